"""The stack a verl pins in its own ``uv.lock``: what verl's CPU jobs install (``uv run --frozen --all-packages
--extra cpu``) and where each pin comes from.

verl's lock takes torch from PyTorch's CPU index, some wheels from verl's own wheelhouse and a few packages from git;
a runner that reaches those gets exactly the lock (``uv sync --frozen``), elsewhere the same versions come from the
package index where it has them, and the report says which do not (a git commit is no release; a ``+cpu`` build is
not on the package index). A verl without ``uv.lock`` (releases before verl #7127) has no stack of its own: the
harness's lock (``.ci/cpu.lock``) is its stack. Read with ``uv export --frozen --offline`` (nothing resolved, nothing
downloaded); markers are read for the lock's own environment (Python 3.12, Linux x86_64), not this interpreter's.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Literal

import tomllib
from packaging.markers import default_environment
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from harness.errors import InfraError, TargetError

LOCK = "uv.lock"
PACKAGE_INDEX = "https://pypi.org/simple"
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
        """The requirement that gets this pin from the package index, or None where it cannot (a git commit, a
        path); a local build (``2.11.0+cpu``) as its public version."""
        if self.origin in ("git", "path", "url"):
            return None
        try:
            return f"{self.name}=={Version(self.version).public}"
        except InvalidVersion:
            return None


class Stack(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    lock_sha256: str
    extra: str
    pins: list[Pin]

    def package_index(self) -> tuple[list[str], list[str]]:
        """(requirements, notes): the lock's versions from the package index, and every pin that differs there."""
        requirements, notes = [], []
        for p in self.pins:
            req = p.from_package_index()
            if req is None:
                notes.append(
                    f"{p.name} {p.version} ({p.origin} {p.where}): not on the package index, the harness's own"
                )
                continue
            requirements.append(req)
            if p.origin != "package index":
                notes.append(f"{p.name} {p.version} from {p.where}: {req} from the package index instead")
        return requirements, notes

    def lines(self) -> list[str]:
        by: dict[str, int] = {}
        for p in self.pins:
            by[p.origin] = by.get(p.origin, 0) + 1
        key = ", ".join(f"{n} from {o}" for o, n in sorted(by.items()))
        head = [f"stack: uv.lock (sha256 {self.lock_sha256[:12]}), extra {self.extra}: {len(self.pins)} pins ({key})"]
        main = [p for p in self.pins if canonicalize_name(p.name) in ("torch", "transformers", "ray", "numpy")]
        head += [f"  {p.name}=={p.version} ({p.origin}: {p.where})" for p in main]
        _, notes = self.package_index()
        return head + [f"  without the lock's own indexes: {n}" for n in notes]


def _sources(lock: dict) -> dict[tuple[str, str], tuple[Origin, str]]:
    """Each (name, version) of the lock with where it comes from."""
    out: dict[tuple[str, str], tuple[Origin, str]] = {}
    for pkg in lock.get("package", []):
        if not isinstance(pkg, dict):
            continue
        found = pkg.get("source")
        source: dict[str, object] = found if isinstance(found, dict) else {}
        name, version = canonicalize_name(str(pkg.get("name"))), str(pkg.get("version"))
        if "registry" in source:
            url = str(source["registry"])
            out[(name, version)] = ("package index" if url.rstrip("/") == PACKAGE_INDEX else "other index", url)
        elif "git" in source:
            out[(name, version)] = ("git", str(source["git"]))
        elif "url" in source:
            out[(name, version)] = ("url", str(source["url"]))
        else:
            out[(name, version)] = ("path", str(next(iter(source.values()), "?")))
    return out


def locked_stack(tree: Path, uv: str, extra: str = "cpu") -> Stack | None:
    """The stack ``tree``'s uv.lock pins for ``extra``; None when it has no uv.lock (the harness's lock then);
    TargetError in one line when the lock does not parse or does not resolve for ``extra``."""
    path = tree / LOCK
    if not path.is_file():
        return None
    data = path.read_bytes()
    try:
        lock = tomllib.loads(data.decode())
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TargetError(f"{path}: not a uv.lock ({exc}): fix or regenerate it (uv lock)") from None
    argv = [uv, "export", "--frozen", "--offline", "--no-config", "--extra", extra, "--no-emit-project",
            "--no-hashes", "--no-header", "--no-annotate", "--format", "requirements.txt"]  # fmt: skip
    try:
        out = subprocess.run(argv, cwd=tree, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InfraError(f"uv export in {tree}: {exc}") from None
    if out.returncode != 0:
        why = [ln.strip() for ln in out.stderr.splitlines() if ln.strip()]
        raise TargetError(f"{path} does not resolve for extra {extra!r}: uv: {' | '.join(why)[-400:] or 'no output'}")
    sources = _sources(lock)
    env = {**{str(k): str(v) for k, v in default_environment().items()}, **LOCK_ENVIRONMENT}
    pins = []
    for line in out.stdout.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "-")):
            continue
        try:
            req = Requirement(line)
        except InvalidRequirement:
            raise TargetError(f"{path}: uv export wrote {line!r}, which is no requirement") from None
        if req.marker is not None and not req.marker.evaluate({**env, "extra": extra}):
            continue
        name = canonicalize_name(req.name)
        version = next((s.version for s in req.specifier if s.operator == "=="), "")
        match = [(v, o) for (n, v), o in sources.items() if n == name and (not version or v == version)]
        (ver, (origin, where)) = match[0] if match else (version, ("url", req.url or "?"))
        pins.append(Pin(name=req.name, version=ver, origin=origin, where=where))
    return Stack(lock_sha256=hashlib.sha256(data).hexdigest(), extra=extra, pins=pins)
