"""The stack a verl's own uv.lock pins (harness.targets.stack): read with ``uv export --frozen --offline`` from a
lock uv made here (``uv lock --offline`` over a folder of tiny wheels and one git pin: no network), markers read for
the lock's environment (Python 3.12, Linux), and what the package index gives of it; a lock that does not parse or
does not resolve for the extra is one line."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import zipfile
from pathlib import Path

import pytest

from harness.errors import TargetError
from harness.targets.environment import uv_bin
from harness.targets.stack import locked_stack

PYPROJECT = """\
[project]
name = "verl"
version = "0.10.0.dev0"
requires-python = ">=3.10"

[project.optional-dependencies]
cpu = ["alpha==1.0", "torchy==2.11.0+cpu"]
gpu = ["gamma"]

[tool.uv]
environments = ["python_full_version >= '3.12' and sys_platform == 'linux'"]
"""


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = ()) -> None:
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{name}/__init__.py": b"",
        f"{dist}/METADATA": meta.encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digest = {k: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode() for k, v in files.items()}
    files[f"{dist}/RECORD"] = (
        "".join(f"{k},sha256={d},{len(files[k])}\n" for k, d in digest.items()) + f"{dist}/RECORD,,\n"
    ).encode()
    with zipfile.ZipFile(folder / f"{name}-{version}-py3-none-any.whl", "w") as whl:
        for k, v in files.items():
            whl.writestr(k, v)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    wheels, tree = tmp_path / "wheels", tmp_path / "verl"
    wheels.mkdir()
    tree.mkdir()
    _wheel(wheels, "alpha", "1.0", ("beta>=2", "delta; python_version < '3.12'"))
    for name, version in (("beta", "2.1"), ("gamma", "3.0"), ("delta", "1.0"), ("torchy", "2.11.0+cpu")):
        _wheel(wheels, name, version)
    (tree / "pyproject.toml").write_text(PYPROJECT)
    argv = [uv_bin(), "lock", "--offline", "--no-config", "--no-index", "--find-links", str(wheels)]
    subprocess.run(argv, cwd=tree, check=True, capture_output=True)
    return tree


@pytest.mark.integration
def test_the_locks_pins_where_each_comes_from_and_what_the_package_index_gives(tree: Path):
    stack = locked_stack(tree, uv_bin())
    assert stack is not None
    assert [(p.name, p.version) for p in stack.pins] == [("alpha", "1.0"), ("beta", "2.1"), ("torchy", "2.11.0+cpu")]
    assert {p.origin for p in stack.pins} == {"other index"}  # a find-links folder, not the package index
    requirements, notes = stack.package_index()
    assert requirements == ["alpha==1.0", "beta==2.1", "torchy==2.11.0"]  # a local build as its public version
    assert notes[-1].startswith("torchy 2.11.0+cpu from ") and notes[-1].endswith(
        ": torchy==2.11.0 from the package index instead"
    )
    lines = stack.lines()
    assert lines[0].startswith("stack: uv.lock (sha256 ") and "extra cpu: 3 pins (3 from other index)" in lines[0]


@pytest.mark.integration
def test_no_lock_a_broken_lock_and_a_lock_without_the_extra(tree: Path, tmp_path: Path):
    assert locked_stack(tmp_path, uv_bin()) is None  # the harness's lock then
    with pytest.raises(TargetError, match=r"does not resolve for extra 'fsdp': uv: .*fsdp"):
        locked_stack(tree, uv_bin(), extra="fsdp")
    (tree / "uv.lock").write_text("version = 1\n[[package]\n")
    with pytest.raises(TargetError, match=r"uv\.lock: not a uv\.lock \(.*\): fix or regenerate it \(uv lock\)$"):
        locked_stack(tree, uv_bin())
