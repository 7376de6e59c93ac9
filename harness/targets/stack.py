"""The stack a verl pins in its own ``uv.lock``: what verl's CPU jobs install (``uv run --frozen --all-packages
--extra cpu``), where each pin comes from, which Python the lock is made for, and what an environment made on it
ended up holding (``StackRecord``).

verl's lock takes torch from PyTorch's CPU index and a few packages from git; a runner that reaches those gets
exactly the lock (``uv sync --frozen``, ``harness.targets.environment``), elsewhere the same versions come from the
package index (a ``+cpu`` build as its public version, a git pin as the release its version names) and the record
says which were substituted and what the package index added (on Linux x86_64 its torch is the CUDA build: the
nvidia libraries come with it). A verl without ``uv.lock`` (releases before verl #7127) has no stack of its own:
the harness's is its stack. Read with ``uv export --frozen --offline`` (nothing resolved, nothing downloaded);
markers are read for the lock's own environment (Python 3.12, Linux x86_64) unless an interpreter is named.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Literal

import tomllib
from packaging.markers import InvalidMarker, Marker, default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from harness import config
from harness.errors import EnvironmentProblem, InfraError, TargetError
from harness.outside import shown
from harness.targets.spec import StackChoice

LOCK = "uv.lock"
EXTRA = "cpu"  # the extra verl's CPU jobs install
PACKAGE_INDEX = "https://pypi.org/simple"
SOURCE = 2000  # a lock's source URL or path is cut past this
# the environment verl's lock is made for ([tool.uv] environments): its markers are read there
LOCK_ENVIRONMENT = {"python_version": "3.12", "python_full_version": "3.12.0", "sys_platform": "linux",
                    "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix"}  # fmt: skip
Origin = Literal["package index", "other index", "git", "path", "url"]


class Pin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    version: str
    origin: Origin
    where: str  # the index URL, the git URL, the path

    def from_package_index(self) -> str | None:
        """The requirement that gets this pin from the package index, or None where nothing there can stand for it
        (a path, a URL): a local build (``2.11.0+cpu``) as its public version, a git pin as the release its version
        names (``0.1.9.dev0`` at a commit: ``0.1.9``; the commit itself is no release)."""
        if self.origin in ("path", "url"):
            return None
        try:
            version = Version(self.version)
        except InvalidVersion:
            return None
        return f"{self.name}=={version.base_version if self.origin == 'git' else version.public}"


class Lock(BaseModel):
    """What the harness reads of a uv.lock before anything is installed: its identity and the Pythons it is for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str
    requires_python: str | None
    environments: list[str]  # the lock's supported-markers (verl's [tool.uv] environments); empty: any

    @classmethod
    def parse(cls, data: bytes, where: str) -> Lock:
        """TargetError in one line when ``data`` is no uv.lock."""
        try:
            doc = tomllib.loads(data.decode())
            requires, markers = doc.get("requires-python"), doc.get("supported-markers", [])
            if not isinstance(requires, str | None) or not isinstance(markers, list):
                raise ValueError("requires-python or supported-markers of the wrong type")
        except (UnicodeDecodeError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
            raise TargetError(f"{where}: not a uv.lock ({shown(exc)}): fix or regenerate it (uv lock)") from None
        said = [shown(m) for m in markers]  # the lock's text, printed where a Python is refused: one line each
        return cls(
            sha256=hashlib.sha256(data).hexdigest(), requires_python=requires and shown(requires), environments=said
        )

    def python_problem(self, version: str) -> str | None:
        """Why a Python of ``version`` on this host is not one the lock is made for, or None."""
        env = {**{str(k): str(v) for k, v in default_environment().items()}}
        env.update(python_version=".".join(version.split(".")[:2]), python_full_version=version)
        try:
            if self.requires_python and not SpecifierSet(self.requires_python).contains(version, prereleases=True):
                return f"the lock requires Python {self.requires_python}"
            if self.environments and not any(Marker(m).evaluate(env) for m in self.environments):
                return f"the lock supports {' or '.join(self.environments)} only"
        except (InvalidSpecifier, InvalidMarker) as exc:
            return f"the lock's Python constraints do not parse ({exc})"
        return None


class Stack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lock: Lock
    extra: str
    pins: list[Pin]

    def package_index(self) -> tuple[list[str], list[str], list[str]]:
        """(requirements, substituted, missing): the lock's versions from the package index, a line for every pin
        that comes from elsewhere there, and the pins nothing there stands for."""
        requirements, substituted, missing = [], [], []
        for p in self.pins:
            req = p.from_package_index()
            if req is None:
                missing.append(f"{p.name} {p.version} ({p.origin} {p.where})")
                continue
            requirements.append(req)
            if p.origin != "package index":
                substituted.append(f"{p.name} {p.version} from {p.origin} {p.where}: {req} from the package index")
        return requirements, substituted, missing

    def lines(self) -> list[str]:
        by: dict[str, int] = {}
        for p in self.pins:
            by[p.origin] = by.get(p.origin, 0) + 1
        key = ", ".join(f"{n} from {o}" for o, n in sorted(by.items()))
        head = [f"stack: uv.lock (sha256 {self.lock.sha256[:12]}), extra {self.extra}: {len(self.pins)} pins ({key})"]
        main = [p for p in self.pins if canonicalize_name(p.name) in ("torch", "transformers", "ray", "numpy")]
        head += [f"  {p.name}=={p.version} ({p.origin}: {p.where})" for p in main]
        _, substituted, missing = self.package_index()
        return (
            head
            + [f"  without the lock's own sources: {n}" for n in substituted]
            + [f"  without the lock's own sources: {n}: not on the package index" for n in missing]
        )


class StackRecord(BaseModel):
    """What a target's environment was installed from: recorded with it, in results.json and the reports."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requested: StackChoice
    source: Literal["harness", "lock", "package index"]  # lock: exactly (uv sync --frozen)
    lock_sha256: str | None = None
    python: str | None = None  # the interpreter's version (None: the harness's own)
    why: str = ""  # why not the requested one, or not the lock exactly
    substituted: list[str] = []  # pins installed from elsewhere than the lock says
    added: list[str] = []  # installed beyond the lock (name==version): what the package index or the harness needs

    def summary(self) -> str:
        """One line for people."""
        if self.source == "harness":
            return "stack: the harness's own (its project venv)" + (f": {self.why}" if self.why else "")
        how = "exactly (uv sync --frozen)" if self.source == "lock" else "its versions from the package index"
        lock = f"verl's uv.lock (sha256 {(self.lock_sha256 or '')[:12]}, extra {EXTRA})"
        line = f"stack: {lock}, {how}, Python {self.python}"
        if self.substituted:
            line += f"; {len(self.substituted)} pins substituted"
        return line + f"; {len(self.added)} installed beyond the lock"

    def lines(self) -> list[str]:
        out = [self.summary()]
        if self.why and self.source != "harness":
            out.append(f"  not exactly the lock: {self.why}")
        out += [f"  substituted: {s}" for s in self.substituted]
        if self.added:
            out.append(f"  beyond the lock: {', '.join(self.added)}")
        return out


def _sources(lock: dict) -> dict[tuple[str, str], tuple[Origin, str]]:
    """Each (name, version) of the lock with where it comes from, each as one printable line: the lock is the pull
    request's, and its names and sources are printed in the stack's lines and recorded with the environment."""
    out: dict[tuple[str, str], tuple[Origin, str]] = {}
    for pkg in lock.get("package", []):
        if not isinstance(pkg, dict):
            continue
        found = pkg.get("source")
        source: dict[str, object] = found if isinstance(found, dict) else {}
        name, version = canonicalize_name(shown(pkg.get("name"))), shown(pkg.get("version"))
        if "registry" in source:
            url = shown(source["registry"], SOURCE)
            out[(name, version)] = ("package index" if url.rstrip("/") == PACKAGE_INDEX else "other index", url)
        elif "git" in source:
            out[(name, version)] = ("git", shown(source["git"], SOURCE))
        elif "url" in source:
            out[(name, version)] = ("url", shown(source["url"], SOURCE))
        else:
            out[(name, version)] = ("path", shown(next(iter(source.values()), "?"), SOURCE))
    return out


def locked_stack(tree: Path, uv: str, extra: str = EXTRA, python_version: str | None = None) -> Stack | None:
    """The stack ``tree``'s uv.lock pins for ``extra``; None when it has no uv.lock (the harness's then);
    TargetError in one line when the lock does not parse or does not resolve for ``extra``. Markers are read for
    ``python_version`` (an interpreter's) where given, else for the lock's Python 3.12."""
    path = tree / LOCK
    if not path.is_file():
        return None
    data = path.read_bytes()
    lock = Lock.parse(data, str(path))
    argv = [uv, "export", "--frozen", "--offline", "--no-config", "--extra", extra, "--no-emit-project",
            "--no-hashes", "--no-header", "--no-annotate", "--format", "requirements.txt"]  # fmt: skip
    try:
        out = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"uv export in {tree}: {exc}") from None
    if out.returncode != 0:
        why = shown(" | ".join(ln.strip() for ln in out.stderr.splitlines() if ln.strip())[-400:], 500)
        raise TargetError(f"{path} does not resolve for extra {extra!r}: uv: {why or 'no output'}")
    sources = _sources(tomllib.loads(data.decode()))
    env = {**{str(k): str(v) for k, v in default_environment().items()}, **LOCK_ENVIRONMENT}
    if python_version:
        env.update(python_version=".".join(python_version.split(".")[:2]), python_full_version=python_version)
    pins = []
    for line in out.stdout.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            raise TargetError(f"{path}: uv export wrote {shown(line)!r}, which is no requirement") from None
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        version = next((s.version for s in req.specifier if s.operator == "=="), "")
        match = [(v, o) for (n, v), o in sources.items() if n == name and (not version or v == version)]
        (ver, (origin, where)) = match[0] if match else (version, ("url", req.url or "?"))
        pins.append(Pin(name=req.name, version=ver, origin=origin, where=where))
    return Stack(lock=lock, extra=extra, pins=pins)


def stack_python(lock: Lock, uv: str, where: str) -> tuple[str, str]:
    """(path, version) of the interpreter a stack's environment is made with: ``$HARNESS_STACK_PYTHON`` (a path or
    a version, as uv's ``--python`` takes it), else what uv finds for the lock's requires-python; one line when there
    is none, or it is not one the lock is made for (a workflow names it: actions/setup-python's python-path)."""
    given = config.STACK_PYTHON.get()
    request = given or lock.requires_python or "3"
    said = f"HARNESS_STACK_PYTHON={given}" if given else f"uv's Python for the lock's requires-python {request!r}"
    try:
        found = subprocess.run(
            [uv, "python", "find", "--no-config", "--no-python-downloads", request],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        path = found.stdout.strip()
        version = ""
        if found.returncode == 0 and path:
            asked = subprocess.run(
                [path, "-c", "import platform; print(platform.python_version())"],
                capture_output=True, text=True, check=False, timeout=60,
            )  # fmt: skip
            version = asked.stdout.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"finding {said}: {exc}") from None
    if not version:
        why = shown(" ".join(ln.strip() for ln in found.stderr.splitlines() if ln.strip())[-300:]) or "not found"
        raise EnvironmentProblem(
            f"{where}'s uv.lock: no Python for it ({said}: {why}): set HARNESS_STACK_PYTHON to one it supports"
        )
    if problem := lock.python_problem(version):
        raise EnvironmentProblem(
            f"{where}'s uv.lock: {said} is Python {version} ({path}), but {problem}: set HARNESS_STACK_PYTHON to one "
            "it supports"
        )
    return path, version
