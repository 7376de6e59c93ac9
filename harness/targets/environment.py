"""One Python environment per target, made once with uv and cached by the target's identity and its stack.

On the harness's stack (the default): ``uv venv`` with the project venv's
interpreter, a ``.pth`` that runs ``site.addsitedir(<project venv site-packages>)`` (so torch, msprobe, the
harness and the rest come from there, ``.pth`` files and the harness's editable install included, while the
environment's own site-packages comes first), then ``uv pip install --no-deps`` of the target alone. The CPU
torch is shared and never moved: nothing is resolved, so no requirement can pull another torch.

On the verl's own stack (``--stack verl``: what verl's CPU jobs install): ``uv venv`` with the Python the verl's
``uv.lock`` is made for (``harness.targets.stack.stack_python``), the lock's cpu extra exactly (``uv sync --frozen``)
where the runner reaches its sources, else the same versions from the package index (said in the record: which pins
were substituted, what came beyond the lock), then the harness's runtime requirements and msprobe held to the
lock's versions (the harness's modules run inside verl's processes), a link to the harness's package, and the
target ``--no-deps`` as above. Nothing of the project venv is layered in. A verl without ``uv.lock`` gets the
harness's stack, said.

Environments live in ``<cache>/envs/<16 hex>``: a fixed-width name, so every target's verl sits at a path of
the same length (msprobe's stack.json records each frame's source path: dump bytes grow with it). A file lock
guards creation; the marker file is written last, so a half-made environment is rebuilt. The marker holds the
tree's sha256: an environment whose files changed since (a half-made one, or one a training wrote into) is
rebuilt, never reused on its marker alone.

The target's own code (its build backend, its import-time code in the probes) runs in ``harness.targets.sandbox``: an
unprivileged uid of its own that may write only its environment (while it is made) and a private home, with no
network; a checkout's links are copied as links, never followed, and one that leaves the tree is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import tomllib
from filelock import FileLock
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from harness.artifacts.crash import declared, missing_module
from harness.errors import EnvironmentProblem, HarnessError, InfraError, TargetError
from harness.outside import shown
from harness.targets import sandbox
from harness.targets.probe import PACKAGES, answer, facts
from harness.targets.spec import Package, StackChoice, Target, cache_dir, git, repository, worktree_files
from harness.targets.stack import EXTRA, LOCK, Lock, StackRecord, locked_stack, stack_python

FORMAT = 4  # bump when the layout of an environment changes: every cached one is rebuilt
MARKER = "harness-target.json"
PROBE_TIMEOUT_S = 600


@dataclass(frozen=True)
class TargetEnv:
    """A ready environment: the python trainings run with, and what is installed there."""

    target: Target  # versions filled in from the environment
    python: str | None  # None: the project venv (the executors' default interpreter)
    root: Path | None
    facts: dict[str, Any]
    setup_s: float
    reused: bool
    stack: StackRecord

    @property
    def versions(self) -> dict[str, str | None]:
        return self.facts["versions"]

    def describe(self) -> str:
        """The target and the stack it was installed on, in one line (the reports' base and head)."""
        return f"{self.target.describe()}; {self.stack.summary()}"

    def label(self) -> str:
        how = "project venv" if self.root is None else f"{'reused' if self.reused else 'made'} {self.root}"
        return f"{self.describe()} ({how}, {self.setup_s:.1f}s)"


@dataclass(frozen=True)
class StackPlan:
    """The stack a target's environment is made on, decided before anything is installed: its key holds it."""

    requested: StackChoice
    lock: Lock | None = None  # None: the harness's stack
    python: str | None = None  # the interpreter the lock's environment is made with, and its version
    python_version: str | None = None
    why: str = ""  # why the harness's stack where the verl's was asked for

    def key(self) -> dict[str, str | None]:
        if self.lock is None:  # the same environment whichever was asked for
            return {"stack": "harness"}
        return {"stack": "verl", "lock": self.lock.sha256, "python": self.python, "version": self.python_version}

    def record(self) -> StackRecord:
        """The harness's stack as a record (a lock's is made by installing it)."""
        return StackRecord(requested=self.requested, source="harness", why=self.why)


def lock_of(pkg: Package) -> bytes | None:
    """The uv.lock a checkout or a repository commit would be installed with; None without one."""
    if pkg.kind == "checkout":
        top = Path(str(pkg.source))
        path = top / LOCK
        if LOCK not in worktree_files(top) or not path.resolve().is_relative_to(top.resolve()):
            return None  # ignored, or a link out of the tree (refused when the tree is copied)
        return path.read_bytes() if path.is_file() else None
    if pkg.kind == "git":
        repo = repository(str(pkg.source))
        if not git("ls-tree", "--name-only", str(pkg.commit), "--", LOCK, cwd=repo):
            return None
        return git("show", f"{pkg.commit}:{LOCK}", cwd=repo, binary=True)  # type: ignore[return-value]
    return None


def stack_plan(target: Target) -> StackPlan:
    """Which stack ``target``'s environment gets: the harness's, or its verl's own uv.lock (``--stack verl``) with
    the interpreter it is made for. TargetError when that lock is no uv.lock; EnvironmentProblem when no Python
    it supports is found (both one line, exit 2)."""
    pkg = target.verl
    if target.stack == "harness":
        return StackPlan("harness")
    if pkg.kind not in ("checkout", "git"):
        what = "the release pinned in the project venv" if pkg.kind == "pinned" else f"a {pkg.kind}"
        return StackPlan("verl", why=f"{pkg.identity} is {what}, no uv.lock")
    data = lock_of(pkg)
    if data is None:
        return StackPlan("verl", why=f"{pkg.identity} has no uv.lock")
    lock = Lock.parse(data, f"{pkg.identity}:{LOCK}")
    python, version = stack_python(lock, uv_bin(), pkg.identity)
    return StackPlan("verl", lock, python, version)


def env_key(target: Target, plan: StackPlan) -> str:
    """16 hex digits of everything the environment depends on."""
    doc = {
        "format": FORMAT,
        "python": sys.version,
        "base": project_site_packages(),
        "verl": target.verl.key(),
        "msprobe": target.msprobe.key(),
        "stack": plan.key(),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def project_site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


def uv_bin() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _run(
    argv: list[str],
    what: str,
    cwd: Path | None = None,
    jail: sandbox.Jail | None = None,
    timeout: float = PROBE_TIMEOUT_S,
) -> str:
    """``argv``'s stdout; in the target's sandbox when ``jail`` (``sandbox.run``'s key, readable, writable, env)."""
    if jail is not None:  # one call per sandbox uid at a time: each ends by killing what its uid left running
        with FileLock(cache_dir() / "envs" / f"{jail['key']}.sandbox.lock"):
            out = sandbox.run(argv, jail, what=what, cwd=cwd, timeout=timeout)
    else:
        try:
            out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InfraError(f"{what}: {exc}") from None
    if out.returncode != 0:  # uv's or the target's own output (a build backend, its import-time code): one line
        lines = [ln.strip() for ln in (out.stderr or out.stdout).splitlines() if ln.strip()]
        detail = shown(" | ".join(ln for ln in lines if not ln.startswith(("Traceback", 'File "')))[-600:], 700)
        raise InfraError(f"{what}: exit {out.returncode}: {detail or 'no output'}")
    return out.stdout


def interpreter_home(root: Path) -> list[Path]:
    """The installation an environment's interpreter links to (``pyvenv.cfg``'s home, its prefix): what a sandbox
    must read besides the environment (the harness's own interpreter is read anyway)."""
    try:
        cfg = (root / "pyvenv.cfg").read_text()
    except OSError:
        return []
    home = next((ln.split("=", 1)[1].strip() for ln in cfg.splitlines() if ln.split("=")[0].strip() == "home"), "")
    return [Path(home).parent] if home else []


def _probe(python: str, *args: str, what: str) -> dict[str, Any]:
    """The probe, in the sandbox of the environment ``python`` belongs to (a target's code is imported there)."""
    root = Path(python).parent.parent
    inside = root.parent == cache_dir() / "envs"
    jail: sandbox.Jail | None = {"key": root.name, "readable": [root, *interpreter_home(root)]} if inside else None
    out = _run([python, "-m", "harness.targets.probe", *args], what, jail=jail)
    found = answer(out)
    if found is None:
        raise InfraError(f"{what}: the probe printed no result (or no JSON)")
    return found


def probe_predicates(python: str, config_yaml: str, names: list[str]) -> dict[str, bool | str]:
    """verl's own stage predicates, asked in the target's interpreter (``target_probe.predicates``)."""
    text = Path(config_yaml).read_text()  # as an argument: the sandboxed probe reads no file of the harness's
    return _probe(python, "predicates", text, json.dumps(names), what=f"asking {python}'s verl which stages run")


def probe_dialect(python: str | None) -> dict[str, Any]:
    """How the target's verl configures precision_debugger (``target_probe.dialect``), asked in its interpreter."""
    return _probe(python or sys.executable, "dialect", what=f"asking {python or sys.executable}'s verl its dialect")


@cache
def facts_of(python: str | None) -> dict[str, Any]:
    """What an interpreter has installed (versions, verl's dirs); the harness's own when ``python`` is None."""
    return facts() if python in (None, sys.executable) else _probe(str(python), "facts", what=f"probing {python}")


def source_tree(pkg: Package, tmp: Path) -> str:
    """What gets installed for one package: a requirement, a wheel, or a snapshot of its source tree in ``tmp``."""
    if pkg.kind in ("release", "pinned"):
        return f"{pkg.distribution}=={pkg.version}"
    if pkg.kind == "wheel":
        return str(pkg.source)
    src = tmp / f"{pkg.name}-src"
    src.mkdir()
    if pkg.kind == "checkout":  # the working tree as it is (what the dirty hash covers), never the ignored files
        copy_checkout(Path(str(pkg.source)), src)
    else:  # a commit of a repository
        archive = tmp / f"{pkg.name}.tar"
        git("archive", "--format=tar", "-o", str(archive), str(pkg.commit), cwd=repository(str(pkg.source)))
        with tarfile.open(archive) as tar:
            try:
                tar.extractall(src, filter="data")  # refuses absolute links and links out of the tree
            except tarfile.FilterError as exc:
                member = exc.tarinfo
                raise TargetError(
                    f"{pkg.spec}: {member.name} links to {member.linkname}, outside the tree: refused (a target's "
                    "files must be its own)"
                ) from None
    return str(src)


def copy_checkout(repo: Path, dst: Path) -> None:
    """A checkout's files, links never followed: a link that resolves inside the tree is copied as a relative
    link, one that leaves it (``verl/x -> /etc/hostname``: a host file pulled into an image) is refused."""
    top = repo.resolve()
    for f in worktree_files(repo):
        path = repo / f
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        if not path.is_symlink():
            shutil.copy2(path, dst / f)
            continue
        real = path.resolve()
        if not real.is_relative_to(top):
            raise TargetError(
                f"{repo}: {f} links to {os.readlink(path)}, outside the checkout: refused (a target's files must be "
                "its own)"
            )
        os.symlink(os.path.relpath(real, (top / f).parent), dst / f)


def _build(target: Target, root: Path, plan: StackPlan) -> tuple[dict[str, Any], StackRecord]:
    """uv's venv and the ``.pth`` as the harness (no target code yet), the installs in the sandbox: a build
    backend may write this environment and its source tree, nothing else."""
    shutil.rmtree(root, ignore_errors=True)
    uv = uv_bin()
    _venv(root, plan.python or sys.executable)
    python = root / "bin" / "python"
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], "venv").strip())
    record = plan.record()
    tmp_parent = cache_dir() / "tmp"
    tmp_parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=tmp_parent) as tmp:
        trees: dict[str, str] = {}
        if plan.lock is None:
            layered = f"import site; site.addsitedir({project_site_packages()!r})\n"
            (site / "_harness_project_venv.pth").write_text(layered)
        else:
            trees["verl"] = source_tree(target.verl, Path(tmp))
            record = _install_stack(target, plan, root, Path(trees["verl"]), Path(tmp))
            _link_harness(root, site)
        for pkg in (target.verl, target.msprobe):
            if pkg.kind == "pinned" or (plan.lock is not None and pkg.name == "msprobe"):
                continue  # on a lock's stack msprobe came with its requirements (_install_stack)
            source = trees.get(pkg.name) or source_tree(pkg, Path(tmp))
            install = [uv, "pip", "install", *UV_QUIET, "--python", str(python), "--no-deps", "--no-build-isolation"]
            _run(
                [*install, "--compile-bytecode", source],  # compiled now: a later import writes no .pyc there
                f"cannot install {pkg.identity} ({pkg.spec}) into {root}",
                cwd=Path(tmp),
                jail={
                    "key": root.name,
                    "readable": [*interpreter_home(root), *([Path(source)] if pkg.kind == "wheel" else [])],
                    "writable": [root, Path(tmp)],
                    "network": pkg.kind == "release",  # from the package index; else nothing is downloaded
                },
            )
    return _probe(str(python), "facts", what=f"probing {root}"), record


UV_QUIET = ["--no-config", "--quiet"]
STACK_TIMEOUT_S = 3600  # a lock's stack from the package index: several GB where its torch is a CUDA build


def _venv(root: Path, python: str) -> None:
    shutil.rmtree(root, ignore_errors=True)
    _run([uv_bin(), "venv", *UV_QUIET, "--no-python-downloads", "--python", python, str(root)], f"uv venv {root}")


def _install_stack(target: Target, plan: StackPlan, root: Path, tree: Path, tmp: Path) -> StackRecord:
    """The verl's uv.lock (its cpu extra) into ``root``: exactly where its sources are reachable, else its versions
    from the package index; then the harness's runtime requirements and msprobe, held to what is installed. Each
    install in the sandbox (a lock's git pins and sdists are built: code the pull request names), with network, its
    downloads in a uv cache of this lock's own, copied (never linked: a later sandbox writes that cache)."""
    uv, python = uv_bin(), str(root / "bin" / "python")
    stack = locked_stack(tree, uv, python_version=plan.python_version)  # TargetError: does not resolve
    assert plan.lock is not None
    if stack is None or stack.lock.sha256 != plan.lock.sha256:
        raise InfraError(f"{target.verl.identity}: its uv.lock changed while the environment was made: run again")
    cache = cache_dir() / "uv" / plan.lock.sha256[:16]
    cache.mkdir(parents=True, exist_ok=True)
    uv_opts = [*UV_QUIET, "--python", python, "--cache-dir", str(cache), "--link-mode", "copy"]
    # the interpreter, and a lock's own local folders (a registry that is a folder of wheels: a runner's mirror)
    local = {Path(p.where) for p in stack.pins if p.origin != "git" and Path(p.where).is_absolute()}
    readable = [*interpreter_home(root), *sorted(f for f in local if f.is_dir())]
    jail: sandbox.Jail = {"key": root.name, "readable": readable, "writable": [root, tmp, cache], "network": True}
    where = f"{target.verl.identity}'s uv.lock"
    record: dict[str, Any] = {"requested": "verl", "lock_sha256": plan.lock.sha256, "python": plan.python_version}
    with FileLock(f"{cache}.lock"):  # one sandbox at a time owns the cache
        try:
            _run(
                [uv, "sync", "--frozen", "--extra", EXTRA, "--no-install-project", *uv_opts],
                f"uv sync --frozen --extra {EXTRA} of {where}",
                cwd=tree,
                jail={**jail, "env": {"UV_PROJECT_ENVIRONMENT": str(root)}},
                timeout=STACK_TIMEOUT_S,
            )
            record |= {"source": "lock"}
        except InfraError as exc:  # its own sources unreachable (PyTorch's CPU index, git): the package index's
            requirements, substituted, missing = stack.package_index()
            if missing:
                raise EnvironmentProblem(
                    f"{where} cannot be installed here: {exc}; and the package index has nothing for "
                    f"{', '.join(missing)}"
                ) from None
            _venv(root, str(plan.python))  # nothing half-synced stays
            listed = tmp / "stack-requirements.txt"
            listed.write_text("\n".join(requirements) + "\n")
            _run(
                [uv, "pip", "install", *uv_opts, "-r", str(listed)],
                f"{where}'s versions from the package index",
                jail=jail,
                timeout=STACK_TIMEOUT_S,
            )
            said = str(exc).split(": exit ", 1)[-1]  # uv's own lines, the cause last
            said = said if len(said) <= 440 else f"{said[:240]} ... {said[-200:]}"
            why = f"uv sync --frozen failed (exit {said})"
            record |= {"source": "package index", "why": why, "substituted": substituted}
        held = tmp / "stack-installed.txt"
        held.write_text("\n".join(_installed(python)) + "\n")
        # the harness's requirements, msprobe, and verl's build requirements (its build runs offline, no isolation)
        wanted, wheel = [*harness_requirements(), *build_requirements(tree)], []
        if target.msprobe.kind == "wheel":
            wanted.append(str(target.msprobe.source))
            wheel.append(Path(str(target.msprobe.source)))
        else:
            wanted.append(f"{target.msprobe.distribution}=={target.msprobe.version}")
        _run(
            [uv, "pip", "install", *uv_opts, "--constraints", str(held), *wanted],
            f"the harness's requirements and {target.msprobe.identity} on {where}",
            jail={**jail, "readable": [*readable, *wheel]},
            timeout=STACK_TIMEOUT_S,
        )
    pinned = {canonicalize_name(p.name) for p in stack.pins}
    record["added"] = [line for line in _installed(python) if canonicalize_name(line.split("==")[0]) not in pinned]
    return StackRecord.model_validate(record)


def _installed(python: str) -> list[str]:
    """``name==version`` of every distribution in an environment (read by uv from its metadata, nothing run)."""
    out = _run([uv_bin(), "pip", "list", *UV_QUIET, "--format", "json", "--python", python], f"uv pip list {python}")
    try:
        listed = json.loads(out)
        return sorted((shown(f"{d['name']}=={d['version']}") for d in listed), key=str.lower)  # their metadata's
    except (ValueError, KeyError, TypeError) as exc:
        raise InfraError(f"uv pip list --python {python}: not the JSON expected ({exc})") from None


def harness_requirements() -> list[str]:
    """The harness's runtime requirements (its pyproject's dependencies, its extras apart): its modules run inside
    the target's processes (the CPU plugin and launcher, the embedded workload, the probes), so a lock's stack
    must hold them too."""
    from importlib import metadata

    out = []
    for text in metadata.requires("verl-msprobe-harness") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append(str(req))
    return out


def build_requirements(tree: Path) -> list[str]:
    """What a source tree's ``[build-system]`` requires (PEP 518); TargetError when its pyproject does not parse."""
    path = tree / "pyproject.toml"
    if not path.is_file():
        return ["setuptools"]  # PEP 517's default backend
    try:
        requires = tomllib.loads(path.read_text()).get("build-system", {}).get("requires", ["setuptools"])
        return [str(Requirement(r)) for r in requires]
    except (UnicodeDecodeError, ValueError, InvalidRequirement, AttributeError) as exc:
        raise TargetError(f"{path.name} of the verl under test: [build-system] does not parse ({exc})") from None


def _link_harness(root: Path, site: Path) -> None:
    """The harness importable in a lock's environment, and nothing else of its checkout: a folder holding a link to
    its package, on the path by a ``.pth``."""
    import harness

    folder = root / "harness-import"
    folder.mkdir()
    (folder / "harness").symlink_to(Path(harness.__file__).parent)
    (site / "_harness.pth").write_text(f"{folder}\n")


def tree_hash(root: Path) -> str:
    """sha256 of an environment's files (paths, modes, contents, link targets), its marker excepted."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.parent == root and path.name == MARKER:
            continue
        st = path.lstat()
        h.update(f"{path.relative_to(root)}\0{st.st_mode:o}\0".encode())
        if path.is_symlink():
            h.update(os.readlink(path).encode())
        elif path.is_file():
            h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _with_versions(target: Target, versions: dict[str, str | None]) -> Target:
    return target.model_copy(
        update={
            "verl": target.verl.model_copy(update={"version": versions.get("verl")}),
            "msprobe": target.msprobe.model_copy(update={"version": versions.get("mindstudio-probe")}),
        }
    )


_MADE: dict[str, TargetEnv] = {}


def ensure_env(target: Target) -> TargetEnv:
    """The target's environment: the project venv for the pinned target on the harness's stack, else made once
    and reused."""
    started = time.monotonic()
    plan = stack_plan(target)
    if target.pinned and plan.lock is None:
        return TargetEnv(target, None, None, facts(), time.monotonic() - started, reused=True, stack=plan.record())
    key = env_key(target, plan)
    if key in _MADE:
        return _MADE[key]
    root = cache_dir() / "envs" / key
    root.parent.mkdir(parents=True, exist_ok=True)
    marker = root / MARKER
    with FileLock(f"{root}.lock"):
        try:
            doc = json.loads(marker.read_text())
            reused = doc["key"] == key and doc["tree_sha256"] == tree_hash(root)
            record = StackRecord.model_validate(doc["stack"]) if plan.lock else plan.record()
        except (OSError, ValueError, KeyError):
            reused = False
        if not reused:
            try:
                facts_made, record = _build(target, root, plan)
            except HarnessError:  # a refused or failed target leaves no half-made environment behind
                shutil.rmtree(root, ignore_errors=True)
                raise
            doc = {"key": key, "target": target.model_dump(mode="json"), "facts": facts_made}
            doc["stack"] = record.model_dump(mode="json")
            doc["tree_sha256"] = tree_hash(root)
            doc["setup_s"] = round(time.monotonic() - started, 3)
            tmp = marker.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=1))
            os.replace(tmp, marker)  # last: an environment without its marker is rebuilt
    env = TargetEnv(
        _with_versions(target, doc["facts"]["versions"]),
        str(root / "bin" / "python"),
        root,
        doc["facts"],
        time.monotonic() - started,
        reused,
        record,
    )
    check_identity(env)
    _MADE[key] = env
    return env


def check_identity(env: TargetEnv) -> None:
    """A target is the package it names, or it is refused: its environment's own site-packages must hold the
    distribution (verl; mindstudio-probe for --msprobe), and the module trainings import must be the one installed
    there, not the project venv's that the environment layers over (which would run the pinned release under the
    target's name)."""
    facts, site = env.facts, env.facts.get("site") or ""
    own = {_normal(n) for n in facts.get("own_distributions", [])}
    dirs = {"verl": facts.get("packages_dir"), "msprobe": facts.get("msprobe_dir")}
    for pkg in (env.target.verl, env.target.msprobe):
        if pkg.kind == "pinned":
            continue
        where = f"--{pkg.name} {pkg.spec}"
        if _normal(pkg.distribution) not in own:
            installed = ", ".join(sorted(facts.get("own_distributions", []))) or "nothing"
            raise TargetError(
                f"{where} is not {pkg.distribution}: installing it gave {installed} (name a {pkg.distribution} "
                "checkout, repository, release or wheel)"
            )
        found = dirs[pkg.name]
        if not found or not Path(found).resolve().is_relative_to(Path(site).resolve()):
            raise TargetError(
                f"{where}: the environment imports {pkg.name} from {found}, not from its own {site}: the target "
                f"installs no importable {pkg.name} package"
            )


def _normal(name: str) -> str:
    return canonicalize_name(name)


def check_api(env: TargetEnv, symbols: tuple[str, ...], stages: list[str], workload: str) -> None:
    """Raise InfraError, in one line, when the target lacks a symbol or stage the workload drives (API drift).

    The import probe costs seconds (verl imports torch), so its answer is kept per environment and symbol list."""
    doc_key = hashlib.sha256(json.dumps([sorted(symbols), env.versions, env.facts.get("packages_dir")]).encode())
    name = f"api-{doc_key.hexdigest()[:12]}.json"
    # kept outside the environment (its tree hash covers what runs); the project venv can change under the cache:
    # its answer is keyed by its path, versions and symbols
    where_key = env.root.name if env.root else _short_hash(sys.prefix)
    cached = cache_dir() / "probes" / f"{where_key}-{name}"
    try:
        result = json.loads(cached.read_text())
    except (OSError, ValueError):
        where = str(env.root or sys.prefix)
        result = _probe(env.python or sys.executable, "api", json.dumps(sorted(symbols)), what=f"probing {where}")
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(json.dumps(result))
    found = result["problems"]
    # a missing class explains its missing methods: name the outermost symbol only
    lacking = [s for s in sorted(found) if not any(s.startswith(p + ".") for p in found)]
    reasons = [found[s] for s in lacking]
    known = result.get("stages")
    if known is not None:
        for stage in (s for s in stages if s not in known):
            lacking.append(f"stage {stage!r}")
            reasons.append(f"verl's stage table has {', '.join(known)}")
    missing = [m for r in reasons if (m := missing_module(r))]
    if missing:
        raise EnvironmentProblem(
            f"{env.target.verl.identity} imports {', '.join(sorted(set(missing)))}, which its environment lacks"
            f"{declared(env.facts.get('verl_requires', []), missing)}: targets install --no-deps, so a requirement "
            "verl adds must be in the image or the project venv (not a verdict on verl's code)"
        )
    if lacking:
        raise InfraError(
            f"{env.target.verl.identity} lacks {', '.join(lacking)} (API drift): {'; '.join(reasons)}; workload "
            f"{workload} drives it (target {env.target.verl.describe()})"
        )


def of_target(env: TargetEnv) -> dict[str, Any]:
    """The target's part of results.json's ``environment`` (versions as installed there, identity, series)."""
    t = env.target
    out: dict[str, Any] = {pkg: env.versions.get(pkg) for pkg in PACKAGES}
    out.update(
        packages_dir=env.facts.get("packages_dir"),
        series=t.series,
        stack=env.stack.model_dump(mode="json"),
        target=t.verl.identity,
        verl_commit=t.verl.commit,
        verl_dirty=t.verl.dirty,
        verl_source=t.verl.source or t.verl.kind,
    )
    return out


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]
