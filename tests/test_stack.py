"""The stack a verl's own uv.lock pins (harness.targets.stack): read with ``uv export --frozen --offline`` from a
lock uv made here (``uv lock --offline`` over a folder of tiny wheels: no network), markers read for the lock's
environment (Python 3.12, Linux), and what the package index gives of it; a lock that does not parse or does not
resolve for the extra is one line. And a target's environment made on that lock (``--stack verl``): exactly
(``uv sync --frozen``) where its source is reachable, else its versions from "the package index" (here a second
folder of the same wheels, named by uv's own UV_FIND_LINKS), each said; a verl without uv.lock gets the harness's
stack; a lock that does not resolve, or a Python it is not made for, is one line and exit 2."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from verl_repo import VerlRepo, git

from harness.errors import EnvironmentProblem, InfraError, TargetError, WorkloadError
from harness.scenario.loader import load_scenario
from harness.targets import environment
from harness.targets.environment import _MADE, ensure_env, env_key, stack_plan, uv_bin
from harness.targets.spec import parse_target
from harness.targets.stack import Lock, Pin, StackRecord, locked_stack
from harness.training.runs import ensure_runs

ROOT = Path(__file__).resolve().parents[1]

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


def _wheel(folder: Path, name: str, version: str, requires: tuple[str, ...] = (), package: str = "") -> Path:
    dist = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        f"{package or name}/__init__.py": b"",
        f"{dist}/METADATA": meta.encode(),
        f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digest = {k: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode() for k, v in files.items()}
    files[f"{dist}/RECORD"] = (
        "".join(f"{k},sha256={d},{len(files[k])}\n" for k, d in digest.items()) + f"{dist}/RECORD,,\n"
    ).encode()
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for k, v in files.items():
            whl.writestr(k, v)
    return path


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
    requirements, substituted, missing = stack.package_index()
    assert requirements == ["alpha==1.0", "beta==2.1", "torchy==2.11.0"] and not missing  # a local build: public
    assert substituted[-1].startswith("torchy 2.11.0+cpu from other index ") and substituted[-1].endswith(
        ": torchy==2.11.0 from the package index"
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


def test_what_the_package_index_stands_in_with_and_which_pythons_a_lock_is_for():
    git_pin = Pin(name="transferqueue", version="0.1.9.dev0", origin="git", where="https://github.com/x/tq.git")
    assert git_pin.from_package_index() == "transferqueue==0.1.9"  # the release its version names
    cpu = Pin(name="torch", version="2.11.0+cpu", origin="other index", where="https://download.pytorch.org/whl/cpu")
    assert cpu.from_package_index() == "torch==2.11.0"
    assert Pin(name="x", version="1.0", origin="path", where="../x").from_package_index() is None
    verl_main = Lock(  # verl main's: requires-python ">=3.10, <3.13", environments Python 3.12 on Linux x86_64 only
        sha256="0" * 64,
        requires_python=">=3.10, <3.13",
        environments=["python_full_version >= '3.12' and sys_platform == 'linux'"],
    )
    assert verl_main.python_problem("3.11.7") == (
        "the lock supports python_full_version >= '3.12' and sys_platform == 'linux' only"
    )
    assert verl_main.python_problem("3.13.1") == "the lock requires Python >=3.10, <3.13"
    assert verl_main.python_problem("3.12.1") is None
    record = StackRecord(requested="verl", source="harness", why="verl==0.9.1 is a release, no uv.lock")
    assert record.summary() == "stack: the harness's own (its project venv): verl==0.9.1 is a release, no uv.lock"


LOCKED = """\
[build-system]
requires = ["beta>=2"]
build-backend = "wheelmaker"
backend-path = ["."]

[project]
name = "verl"
version = "0.9.1"
requires-python = ">=3.10"

[project.optional-dependencies]
{extra} = ["alpha==1.0", "torchy==2.11.0+cpu"]

[tool.uv]
environments = ["python_full_version >= '3.10' and sys_platform == 'linux'"]
"""
# a build backend of its own (PEP 517, in the tree): the test's verl builds with nothing from an index (setuptools,
# verl's, is on none here); its one requirement, beta, is one the lock holds
WHEELMAKER = """\
import base64, hashlib, pathlib, zipfile

def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist = "verl-0.9.1.dist-info"
    files = {str(p): p.read_bytes() for p in sorted(pathlib.Path("verl").rglob("*")) if p.is_file()}
    files[dist + "/METADATA"] = b"Metadata-Version: 2.1\\nName: verl\\nVersion: 0.9.1\\n"
    files[dist + "/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    digest = lambda v: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode()
    record = "".join(f"{k},sha256={digest(v)},{len(v)}\\n" for k, v in files.items()) + dist + "/RECORD,,\\n"
    files[dist + "/RECORD"] = record.encode()
    name = "verl-0.9.1-py3-none-any.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / name, "w") as whl:
        for k, v in files.items():
            whl.writestr(k, v)
    return name
"""


@pytest.fixture(scope="module")
def locked(repo: VerlRepo, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path | str]:
    """A clone of the test verl with two commits a pull request could make: ``locked`` (a uv.lock whose cpu extra
    pins tiny wheels from a folder of its own) and ``nocpu`` (a uv.lock without the cpu extra: it does not resolve
    for it); and msprobe as a wheel (its package ``msprobe``)."""
    root = tmp_path_factory.mktemp("stack")
    wheels, clone = root / "wheels", root / "verl"
    wheels.mkdir()
    _wheel(wheels, "alpha", "1.0", ("beta>=2",))
    for name, version in (("beta", "2.1"), ("torchy", "2.11.0+cpu")):
        _wheel(wheels, name, version)
    msprobe = _wheel(root, "mindstudio_probe", "26.2.0", package="msprobe")
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    shas: dict[str, Path | str] = {"wheels": wheels, "clone": clone, "msprobe": msprobe}
    for branch, extra in (("locked", "cpu"), ("nocpu", "gpu")):
        git(clone, "checkout", "-q", "-b", branch, repo.release)
        (clone / "pyproject.toml").write_text(LOCKED.format(extra=extra))
        (clone / "wheelmaker.py").write_text(WHEELMAKER)
        lock = [uv_bin(), "lock", "--offline", "--no-config", "--no-index", "--find-links", str(wheels)]
        subprocess.run(lock, cwd=clone, check=True, capture_output=True)
        git(clone, "add", "-A")
        git(clone, "commit", "-q", "-m", f"uv.lock ({extra} extra)")
        shas[branch] = git(clone, "rev-parse", "HEAD")
    return shas


@pytest.fixture
def stack_env(locked: dict, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh environment cache, the project's Python as the lock's, the folder of wheels as the package index
    (uv's own variables), and the harness's requirements one the lock holds (the real ones, pydantic and the rest,
    come from the package index: not in that folder)."""
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_FIND_LINKS", str(locked["wheels"]))
    monkeypatch.setenv("UV_OFFLINE", "1")  # that folder alone
    monkeypatch.setenv("HARNESS_STACK_PYTHON", sys.executable)
    for var in ("HARNESS_VERL", "HARNESS_MSPROBE", "HARNESS_SERIES", "HARNESS_STACK"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(environment, "harness_requirements", lambda: ["beta>=2"])
    _MADE.clear()
    return tmp_path / "cache"


def _freeze(python: str) -> set[str]:
    out = subprocess.run([uv_bin(), "pip", "freeze", "--python", python], capture_output=True, text=True, check=True)
    return {ln.split("==")[0].split(" @ ")[0].lower().replace("_", "-") for ln in out.stdout.splitlines()}


@pytest.mark.integration
def test_a_verls_own_lock_installed_exactly_where_its_source_is_reached(locked: dict, stack_env: Path, tmp_path: Path):
    target = parse_target(f"{locked['clone']}@{locked['locked']}", str(locked["msprobe"]), stack="verl")
    env = ensure_env(target)
    assert env.stack.source == "lock" and env.stack.python == ".".join(map(str, sys.version_info[:3]))
    # the harness's and verl's build requirement (beta>=2) held to the lock's beta; msprobe beyond it
    assert env.stack.added == ["mindstudio-probe==26.2.0"] and not env.stack.substituted
    assert env.python and {"alpha", "beta", "torchy", "verl", "mindstudio-probe"} <= _freeze(env.python)
    assert env.versions["verl"] == "0.9.1" and env.facts["msprobe_dir"].startswith(env.facts["site"])
    assert "torch" not in _freeze(env.python)  # nothing of the project venv: the lock's stack alone
    assert env.describe().endswith(
        f"stack: verl's uv.lock (sha256 {env.stack.lock_sha256[:12]}, extra cpu), exactly (uv sync --frozen), "
        f"Python {env.stack.python}; 1 installed beyond the lock"
    )
    assert environment.of_target(env)["stack"]["source"] == "lock"  # results.json's
    imported = subprocess.run(
        [env.python, "-c", "import alpha, msprobe, harness.targets.probe as p; print(p.__name__)"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert imported.returncode == 0, imported.stderr  # the harness's package linked in: what trainings import
    harness_key = env_key(target, stack_plan(target.model_copy(update={"stack": "harness"})))
    assert env.root and env.root.name != harness_key  # the stack is in the key
    scenario = load_scenario(ROOT / "scenarios" / "tiny_fsdp_l1.yaml")
    with pytest.raises(WorkloadError, match=r"the docker executor runs the harness's stack only .*--executor local"):
        ensure_runs(scenario, tmp_path / "results", "session", executor="docker", env=env)


@pytest.mark.integration
def test_unreachable_sources_the_same_versions_from_the_package_index_said(
    locked: dict, stack_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    index = tmp_path / "index"
    shutil.copytree(locked["wheels"], index)
    monkeypatch.setenv("UV_FIND_LINKS", str(index))  # the runner's package index, as uv reads it
    hidden = Path(f"{locked['wheels']}-away")
    os.rename(locked["wheels"], hidden)  # the lock's own source out of reach
    try:
        env = ensure_env(parse_target(f"{locked['clone']}@{locked['locked']}", str(locked["msprobe"]), stack="verl"))
    finally:
        os.rename(hidden, locked["wheels"])
    assert env.stack.source == "package index" and "uv sync --frozen" in env.stack.why
    assert [s.split(":")[0] for s in env.stack.substituted] == [
        f"alpha 1.0 from other index {locked['wheels']}",
        f"beta 2.1 from other index {locked['wheels']}",
        f"torchy 2.11.0+cpu from other index {locked['wheels']}",
    ]
    lines = env.stack.lines()
    assert lines[0].endswith(
        "its versions from the package index, "
        f"Python {env.stack.python}; 3 pins substituted; 1 installed beyond the lock"
    )
    assert env.python and {"alpha", "beta", "torchy", "verl"} <= _freeze(env.python)


@pytest.mark.integration
def test_no_lock_the_harness_stack_said_bad_locks_pythons_and_requirements_one_line(
    locked: dict, repo: VerlRepo, stack_env: Path, monkeypatch: pytest.MonkeyPatch
):
    released = parse_target(f"{repo.path}@v0.9.1", stack="verl")
    plan = stack_plan(released)
    assert plan.lock is None and plan.why == f"verl@{repo.release[:12]} has no uv.lock"
    assert env_key(released, plan) == env_key(released, stack_plan(parse_target(f"{repo.path}@v0.9.1")))
    assert stack_plan(parse_target("0.9.1", stack="verl")).why == "verl==0.9.1 is a release, no uv.lock"
    cli = [sys.executable, "-m", "harness", "target", "--verl", f"{locked['clone']}@{locked['nocpu']}"]
    out = subprocess.run([*cli, "--stack", "verl"], capture_output=True, text=True, check=False, env=os.environ)
    assert out.returncode == 2 and out.stdout == "", out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("TARGET ERROR: ") and "uv.lock does not resolve for extra 'cpu': uv: " in line
    monkeypatch.setattr(environment, "harness_requirements", lambda: ["beta<2"])  # the lock holds beta 2.1
    with pytest.raises(InfraError, match=r"^the harness's requirements and msprobe wheel .* uv\.lock: exit 1: .*beta"):
        ensure_env(parse_target(f"{locked['clone']}@{locked['locked']}", str(locked["msprobe"]), stack="verl"))
    monkeypatch.setenv("HARNESS_STACK_PYTHON", "/nowhere/python3.12")
    said = r"uv\.lock: no Python for it \(HARNESS_STACK_PYTHON=/nowhere/python3\.12: .*\): set HARNESS_STACK_PYTHON to"
    with pytest.raises(EnvironmentProblem, match=said + " one it supports$"):
        stack_plan(parse_target(f"{locked['clone']}@{locked['locked']}", stack="verl"))


def test_a_locks_names_sources_and_constraints_are_shown_as_one_line_each():
    """A uv.lock is the pull request's: its versions, sources and Python constraints are printed in the stack's lines
    and recorded with the environment, each one line, never a workflow command."""
    import tomllib

    from harness.targets.stack import _sources

    text = """\
requires-python = ">=3.10\\n::error title=lock::all good"
supported-markers = ["##[error]linux"]

[[package]]
name = "alpha"
version = "1.0\\n::error::x"
source = { git = "https://h/a##[warning]b" }
"""
    lock = Lock.parse(text.encode(), "verl:uv.lock")
    assert (lock.requires_python, lock.environments) == (">=3.10\\n::error title=lock::all good", ["#\\#[error]linux"])
    assert _sources(tomllib.loads(text)) == {("alpha", "1.0\\n::error::x"): ("git", "https://h/a#\\#[warning]b")}
