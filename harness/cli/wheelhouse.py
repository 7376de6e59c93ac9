"""``python -m harness wheelhouse DIR``: the harness's runtime closure as a folder of wheels, for a runner without
network (docs/air-gapped.md). On the runner, pip alone installs it: ``python3 -m pip install --no-index --no-deps
--find-links DIR -r DIR/requirements.txt`` (the line heads requirements.txt).

The closure is the harness with its ``cpu`` extra (msprobe, verl and what they need), at the versions this
environment holds: what ``.ci/setup`` resolved and the tests ran. ``--held``, the runner's ``pip freeze``, leaves out
what the runner has (a GPU image's torch, CUDA libraries, vLLM), and everything only those need. Wheels of any size;
a distribution published only as a source archive is built here (pure Python ones only are portable).

The install takes the pinned closure as it is (``--no-deps``), as verl's own GPU and NPU jobs install verl beside their
image's stack: requirements.txt already names every distribution the runner lacks, and a resolving install refuses a
runner whose held stack is newer than a pin allows (a CUDA image's transformers 5.17 against verl 0.9.1's
``transformers<5.11``; its packaging 26 against pyvers' ``packaging<26``), although the harness runs on it (both seen
on a CUDA runner, docs/cuda.md). ``pip check`` afterwards lists such mismatches.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.errors import HarnessError, InfraError
from harness.safeio import output_path

HARNESS = "verl-msprobe-harness"
EXTRAS = frozenset({"cpu"})  # msprobe and verl: every scenario needs them
SOURCE = Path(__file__).resolve().parents[2]  # the checkout the harness runs from (its own wheel is built there)


def held(freeze: Path | None) -> set[str]:
    """The distributions a ``pip freeze`` lists (``name==version``, ``name @ url``), by canonical name."""
    names: set[str] = set()
    for line in freeze.read_text().splitlines() if freeze else []:
        try:
            names.add(canonicalize_name(Requirement(line.strip()).name))
        except InvalidRequirement:
            continue  # comments, blank lines, ``-e`` lines
    return names


def closure(python_version: str, leave_out: set[str]) -> dict[str, str]:
    """{distribution: version} the harness needs at run time, as installed here, markers read for ``python_version``;
    ``leave_out`` (and what only they need) is not followed; the harness itself always is (its wheel is built here)."""
    env = {str(k): str(v) for k, v in default_environment().items()}
    env.update(python_version=python_version, python_full_version=f"{python_version}.0")
    out: dict[str, str] = {}
    missing: set[str] = set()
    seen: dict[str, frozenset[str]] = {}
    todo = [(HARNESS, EXTRAS)]
    while todo:
        name, extras = todo.pop()
        key = canonicalize_name(name)
        if (key in leave_out and name != HARNESS) or (key in seen and extras <= seen[key]):
            continue
        seen[key] = extras | seen.get(key, frozenset())
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.add(key)
            continue
        out[key] = dist.version
        for req in map(Requirement, dist.requires or []):
            if req.marker is None or any(req.marker.evaluate({**env, "extra": e}) for e in {"", *extras}):
                todo.append((req.name, frozenset(req.extras)))
    if missing:
        raise InfraError(
            f"wheelhouse: {', '.join(sorted(missing))} needed for Python {python_version} but not installed here: "
            "make the wheelhouse from a venv of that Python (PYTHON=python3.X bash .ci/setup)"
        )
    del out[canonicalize_name(HARNESS)]
    return out


def _pip(*args: str) -> bool:
    return subprocess.run([sys.executable, "-m", "pip", *args], check=False).returncode == 0


def cmd_wheelhouse(args: argparse.Namespace) -> int:
    out = output_path(args.dir, "DIR", directory=True)  # a file there, or on the way: one line naming DIR
    if any(out.iterdir()):
        raise HarnessError(f"wheelhouse: {args.dir} is not empty (nothing is overwritten)")
    if not (SOURCE / "pyproject.toml").is_file():
        raise InfraError(f"wheelhouse: the harness does not run from a checkout ({SOURCE}): its wheel is built there")
    pins = [f"{d}=={v}" for d, v in sorted(closure(args.python_version, held(args.held)).items())]
    tags = ["--python-version", args.python_version, *(f"--platform={p}" for p in args.platform)]
    download = ["download", "--no-deps", "--only-binary=:all:", *tags, "--dest", str(out)]
    print(f"wheelhouse: {len(pins)} distributions for Python {args.python_version} into {out}", flush=True)
    if pins and not _pip(*download, *pins):  # one pip for all; else one at a time, building the sdist-only ones
        for pin in pins:
            if not _pip(*download, "--quiet", pin) and not _pip("wheel", "--no-deps", "--wheel-dir", str(out), pin):
                raise InfraError(
                    f"wheelhouse: no wheel of {pin} for Python {args.python_version} and none could be built"
                )
    with tempfile.TemporaryDirectory(prefix="harness-wheel-") as tmp:  # setuptools writes build/ beside the source
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(SOURCE / name, tmp)
        shutil.copytree(SOURCE / "harness", Path(tmp, "harness"), ignore=shutil.ignore_patterns("__pycache__"))
        if not _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(out.resolve()), tmp):
            raise InfraError(f"wheelhouse: the harness's own wheel could not be built from {SOURCE}")
    pins.append(f"{HARNESS}=={metadata.version(HARNESS)}")
    how = install_line(out)
    head = [f"# the harness's runtime closure for Python {args.python_version}, the runner's stack held out"]
    head.append(f"# {how}")
    (out / "requirements.txt").write_text("\n".join([*head, *pins]) + "\n")
    print(f"on the runner: {how}")
    return 0


def install_line(house: Path) -> str:
    """What installs a wheelhouse on its runner: no index, the pins as they are (the module's docstring says why)."""
    return f"python3 -m pip install --no-index --no-deps --find-links {house} -r {house}/requirements.txt"


def declare(sub: argparse._SubParsersAction) -> None:
    """``wheelhouse``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "wheelhouse",
        help="the harness's runtime closure as wheels in DIR, for a runner without network (pip install --no-index "
        "--find-links DIR -r DIR/requirements.txt there)",
    )
    p.add_argument("dir", metavar="DIR", help="an empty or new dir")
    p.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        metavar="X.Y",
        help="the runner's Python (default this one's)",
    )
    p.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="TAG",
        help="the runner's wheel platform tags, e.g. manylinux_2_28_x86_64 (repeatable; default this machine's)",
    )
    p.add_argument("--held", type=Path, metavar="FREEZE", help="the runner's `pip freeze`: what it has is not packed")
    p.set_defaults(func=cmd_wheelhouse)
