"""The system under test: which verl and msprobe a run trains with, and how every result names them.

A SPEC says where a package comes from: nothing (the release pinned in the project venv), a released
version (``0.9.1``), a wheel file, a local git checkout (its working tree as it is, uncommitted changes
included) or a repository at a ref (``<path|url>@<sha|branch|tag>``). Parsing resolves the identity (the
commit, plus a hash of uncommitted changes) without installing anything; ``harness.targets.environment`` makes the
environment. Identity is not the series: the commit says *what* ran, the series (the ref: ``main``, a
release) says which baselines it may be compared with.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Literal

from filelock import FileLock
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict

from harness import config
from harness.errors import InfraError, TargetError
from harness.outside import shown
from harness.safeio import cannot_write, writable

Kind = Literal["pinned", "release", "wheel", "checkout", "git"]
Name = Literal["verl", "msprobe"]
# what the target's environment is installed on: the harness's own stack (its project venv), or the verl's own
# uv.lock (harness.targets.stack), as verl's CPU jobs install it; a verl without one gets the harness's
StackChoice = Literal["harness", "verl"]
STACKS: tuple[StackChoice, ...] = ("harness", "verl")
DISTRIBUTION: dict[str, str] = {"verl": "verl", "msprobe": "mindstudio-probe"}
_HEX = re.compile(r"^[0-9a-fA-F]{7,40}$")
TARGET_HELP = (
    "a version (0.9.1), a git checkout dir, <repository path or file:// URL>@<sha|branch|tag>, or a .whl; "
    "default: the release pinned in the project venv"
)
SERIES_HELP = "the baseline series this run belongs to (default: the ref, or the release)"
STACK_HELP = (
    "harness: the harness's own stack (its project venv; the default); verl: the verl's own uv.lock, its cpu extra, "
    "as verl's CPU jobs install it (the harness's stack where it has none); the Python: $HARNESS_STACK_PYTHON"
)
ENV_VARS = {"verl": config.VERL, "msprobe": config.MSPROBE, "series": config.SERIES, "stack": config.STACK}


def reproducible(commit: str | None, source: str | None, version: str | None = None) -> str:
    """A verl SPEC a developer passes to ``--verl`` to run the very verl that ran here: its commit in the public
    repository the job checked it out of (``HARNESS_VERL_URL``), else in the repository or checkout it came from;
    a release by its version."""
    if commit:
        return f"{config.VERL_URL.get() or source or 'VERL'}@{commit[:12]}"
    return version or source or "VERL"


def reproduce_compare(scenario: str, base: str, head: str, *, heavy: bool = False) -> str:
    """The command that reproduces a finding of ``scenario`` between two verl SPECs, base against head (``--heavy``
    for a scenario marked heavy, which is skipped without it)."""
    return f"python -m harness compare scenarios/{scenario}.yaml --base {base} --head {head}{' --heavy' * heavy}"


def cache_dir() -> Path:
    """The harness's own cache (environments, repository mirrors): never inside a results dir. Made here, so that
    a HARNESS_CACHE_DIR naming a file (or a place that cannot be written: a read-only mount) is one line before
    anything uses it."""
    root = config.CACHE_DIR.get().expanduser().resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        why = "not a directory" if root.exists() else exc.strerror
        raise InfraError(f"HARNESS_CACHE_DIR {root}: {why} (the harness's cache: name a directory)") from None
    try:
        writable(root)
    except OSError as exc:
        raise cannot_write(root, exc, named=f"HARNESS_CACHE_DIR {root} (the harness's cache)") from None
    return root


def git(*args: str, cwd: Path | str | None = None, binary: bool = False) -> str | bytes:
    """``git ARGS`` in ``cwd``; TargetError with git's own first line when it fails (shown as one line: it quotes a
    URL or a ref given from outside). A value from outside comes after ``--`` or ``--end-of-options`` in ``args``:
    never read as one of git's options (a SPEC ``--upload-pack=CMD@main`` reached ``git clone`` as one)."""
    said = shown(" ".join(args), 1000)
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, check=False, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TargetError(f"git {said}: {exc}") from None
    if out.returncode != 0:
        why = out.stderr.decode(errors="replace").strip().splitlines()
        where = f" in {cwd}" if cwd else ""
        raise TargetError(f"git {said}{where}: {shown(why[0]) if why else f'exit {out.returncode}'}")
    return out.stdout if binary else out.stdout.decode().strip()


class Package(BaseModel):
    """One package under test and where it came from."""

    model_config = ConfigDict(frozen=True)

    name: Name
    kind: Kind
    spec: str | None = None  # as given; None for the pinned release
    source: str | None = None  # checkout dir, repository path or URL, wheel path
    ref: str | None = None  # git ref as given
    commit: str | None = None
    dirty: bool = False
    dirty_hash: str | None = None  # sha256 of the uncommitted changes (tracked diff and untracked files)
    content_hash: str | None = None  # sha256 of a wheel file
    version: str | None = None  # known once installed for checkouts and refs

    @property
    def distribution(self) -> str:
        return DISTRIBUTION[self.name]

    @property
    def identity(self) -> str:
        """Short and stable: what ran (``verl@1a2b3c4d5e6f+dirty.0f9e8d7c``, ``verl==0.9.1``)."""
        if self.commit:
            return f"{self.name}@{self.commit[:12]}" + (f"+dirty.{(self.dirty_hash or '')[:8]}" if self.dirty else "")
        if self.kind == "wheel":
            return f"{self.name} wheel {Path(self.source or '').name} sha256:{(self.content_hash or '')[:12]}"
        return f"{self.name}=={self.version}"

    @property
    def series(self) -> str:
        """The ref a baseline series follows: the branch or tag, else the release version."""
        if self.kind in ("checkout", "git"):
            ref = self.ref or ""
            if not ref or (_HEX.match(ref) and (self.commit or "").startswith(ref.lower())):
                return f"commit {(self.commit or '?')[:12]}"
            return re.sub(r"^(refs/(heads|tags|remotes)/|origin/)", "", ref)
        return self.version or "?"

    def key(self) -> dict[str, str | bool | None]:
        """What makes two installs the same (full hashes, not the short identity)."""
        return {
            "kind": self.kind,
            "version": self.version if self.kind in ("release", "pinned") else None,
            "commit": self.commit,
            "dirty_hash": self.dirty_hash,
            "content_hash": self.content_hash,
        }

    def describe(self) -> str:
        """One line for people: version, commit, dirty or not, where it came from."""
        parts = [f"{self.name} {self.version}" if self.version else self.name]  # a checkout's: known once installed
        if self.commit:
            dirty = f" (dirty, changes {self.dirty_hash[:12]})" if self.dirty_hash else ""
            parts.append(f"@ {self.commit[:12]}{dirty}")
        parts.append(
            "(pinned, project venv)" if self.kind == "pinned" else f"from {self.source or 'the package index'}"
        )
        return " ".join(parts)


class Target(BaseModel):
    """verl and msprobe under test, and the baseline series the run belongs to."""

    model_config = ConfigDict(frozen=True)

    verl: Package
    msprobe: Package
    series: str
    stack: StackChoice = "harness"

    @property
    def pinned(self) -> bool:
        """Both from the project venv: no environment of its own."""
        return self.verl.kind == self.msprobe.kind == "pinned"

    def describe(self) -> str:
        stack = "; on verl's own uv.lock" if self.stack == "verl" else ""
        return f"{self.verl.describe()}; {self.msprobe.describe()}; series {self.series}{stack}"

    def block(self) -> dict[str, object]:
        """The ``target`` block of run.json and results.json."""
        out: dict[str, object] = {"series": self.series, "stack": self.stack}
        for p in (self.verl, self.msprobe):
            out[p.name] = {"identity": p.identity, **p.model_dump(exclude={"name"})}
        return out


def _pinned_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def worktree_files(repo: Path) -> list[str]:
    """The files of a checkout as it is: tracked (unless deleted) and untracked, never ignored ones; links too
    (whatever they point to: harness.targets.environment refuses one that leaves the tree)."""
    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=repo)
    return sorted({f for f in str(listed).split("\0") if f and ((repo / f).is_file() or (repo / f).is_symlink())})


def dirty_hash(repo: Path) -> str | None:
    """sha256 of what differs from HEAD (tracked diff, untracked files); None for a clean checkout."""
    if not git("status", "--porcelain", "--untracked-files=all", cwd=repo):
        return None
    h = hashlib.sha256(git("diff", "HEAD", "--binary", cwd=repo, binary=True))  # type: ignore[arg-type]
    untracked = str(git("ls-files", "-z", "--others", "--exclude-standard", cwd=repo)).split("\0")
    for f in sorted(u for u in untracked if u):
        h.update(f.encode() + b"\0" + (repo / f).read_bytes() + b"\0")
    return h.hexdigest()


def mirror_of(url: str) -> Path:
    """A bare mirror of a repository URL in the cache, fetched now (so ``main`` means today's main)."""
    mirror = cache_dir() / "git" / f"{hashlib.sha256(url.encode()).hexdigest()[:16]}.git"
    mirror.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{mirror}.lock"):
        if (mirror / "HEAD").is_file():
            git("fetch", "--quiet", "--prune", "origin", cwd=mirror)
        else:
            git("clone", "--quiet", "--mirror", "--", url, str(mirror))
    return mirror


def repository(source: str) -> Path:
    """The git directory to resolve refs in: a local repository as it is, a URL through its mirror."""
    path = Path(source).expanduser()
    if "://" not in source and _is("is_dir", path):
        return Path(str(git("rev-parse", "--absolute-git-dir", cwd=path)))
    return mirror_of(source)


def _is(test: str, path: Path) -> bool:
    """``path.is_dir()`` / ``is_file()``, False for a name the OS refuses (a component over 255 bytes)."""
    try:
        return bool(getattr(path, test)())
    except OSError:
        return False


def _is_version(spec: str) -> bool:
    """A PEP 440 version (what ``verl==SPEC`` installs), parsed by packaging: its pattern does not backtrack (the
    hand-written one before it took 0.8 s for a 24-character sha~1, four times as long for each two more)."""
    try:
        Version(spec)
    except InvalidVersion:
        return False
    return True


def _parse_verl(spec: str, flag: str = "--verl") -> Package:
    path = Path(spec).expanduser()
    if spec.endswith(".whl"):
        return _wheel("verl", spec, flag)
    if _is("is_dir", path):
        repo = path.resolve()
        try:
            top = Path(str(git("rev-parse", "--show-toplevel", cwd=repo)))
        except TargetError:
            raise TargetError(f"{flag} {spec}: {repo} is not a git checkout (make it one, or give a wheel)") from None
        commit = str(git("rev-parse", "HEAD", cwd=top))
        branch = str(git("rev-parse", "--abbrev-ref", "HEAD", cwd=top))
        changes = dirty_hash(top)
        return Package(
            name="verl", kind="checkout", spec=spec, source=str(top), ref=None if branch == "HEAD" else branch,
            commit=commit, dirty=changes is not None, dirty_hash=changes,
        )  # fmt: skip
    if _is_version(spec):
        return Package(name="verl", kind="release", spec=spec, version=spec)
    source, at, ref = spec.rpartition("@")
    if at and source and ref:
        repo = repository(source)
        commit = ""
        # a branch of a clone (actions/checkout's) is origin/<branch> there unless it is the one checked out
        for name in (ref, f"refs/remotes/origin/{ref}"):
            try:
                commit = str(
                    git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{name}^{{commit}}", cwd=repo)
                )
                break
            except TargetError:
                continue
        if not commit:
            raise TargetError(f"{flag} {spec}: no commit {ref!r} in {source}")
        local = "://" not in source
        return Package(
            name="verl", kind="git", spec=spec, source=str(Path(source).expanduser().resolve()) if local else source,
            ref=ref, commit=commit,
        )  # fmt: skip
    raise TargetError(
        f"{flag} {spec!r}: expected a version (0.9.1), a checkout dir, <repository path or URL>@<ref>, or a .whl file"
    )


def _wheel(name: Name, spec: str, flag: str) -> Package:
    path = Path(spec).expanduser().resolve()
    try:
        if not _is("is_file", path):
            raise OSError("no such wheel file")
        content_hash = _sha256_file(path)
        built = _built_for(path)
    except OSError as exc:
        raise TargetError(f"{flag} {spec}: {exc.strerror or exc}") from None
    except (zipfile.BadZipFile, ValueError):  # ValueError: a zip archive zipfile cannot read
        built = None
    wanted = canonicalize_name(DISTRIBUTION[name])
    if built != wanted:  # else a census of nothing, and exit 0: a file named .whl is no wheel of verl for that
        what = "not a wheel (no zip archive with a *.dist-info/WHEEL)" if built is None else f"a wheel of {built}"
        raise TargetError(f"{flag} {spec}: {what}, not of {DISTRIBUTION[name]}: name a {DISTRIBUTION[name]} wheel")
    parts = path.name.split("-")
    return Package(
        name=name, kind="wheel", spec=spec, source=str(path), content_hash=content_hash,
        version=parts[1] if len(parts) > 2 else None,
    )  # fmt: skip


def _built_for(path: Path) -> str | None:
    """The distribution a wheel file is built for (its ``NAME-VERSION.dist-info/WHEEL``, canonical), None when it
    has no such file (PEP 427); BadZipFile when it is no zip archive."""
    with zipfile.ZipFile(path) as whl:
        for entry in whl.namelist():
            top, _, rest = entry.partition("/")
            if rest == "WHEEL" and top.endswith(".dist-info") and "-" in top:
                return canonicalize_name(shown(top.removesuffix(".dist-info").rsplit("-", 1)[0]))
    return None


def _parse_msprobe(spec: str, flag: str = "--msprobe") -> Package:
    if spec.endswith(".whl"):
        return _wheel("msprobe", spec, flag)
    if _is_version(spec):
        return Package(name="msprobe", kind="release", spec=spec, version=spec)
    raise TargetError(
        f"{flag} {spec!r}: expected a version (26.2.0) or a .whl file (msprobe ships compiled parts: its source "
        "cannot be built here)"
    )


def _pinned(name: Name) -> Package:
    return Package(name=name, kind="pinned", version=_pinned_version(DISTRIBUTION[name]))


def pinned_target() -> Target:
    """The releases pinned in the project venv (the default): no environment of their own."""
    verl = _pinned("verl")
    return Target(verl=verl, msprobe=_pinned("msprobe"), series=verl.series)


_SPEC_HINT = {"verl": "a version, a checkout, <repository>@<ref> or a .whl", "msprobe": "a version or a .whl"}


def _given(name: str, value: str | None, option: str | None = None) -> tuple[str | None, str]:
    """The value of ``--NAME``, else of its variable, and which of the two said it (its error lines name that one).
    A line break or another control character is refused: the value is printed in verdict lines, where it could
    start a forged one. An empty verl or msprobe SPEC (an unset shell variable, an empty workflow input) is refused,
    never read as "the pinned release"."""
    flag = option or f"--{name}"
    if value is None and (env := ENV_VARS[name].get()) is not None:
        value, flag = env, ENV_VARS[name].name
    if value is not None and not value.strip() and name in _SPEC_HINT:
        raise TargetError(
            f"{flag} is empty ({value!r}: an unset variable?): name a {name} ({_SPEC_HINT[name]}), or leave {flag} "
            "out for the release pinned in the project venv"
        )
    if value is not None and not value.isprintable():
        raise TargetError(f"{flag} {value!r}: holds a line break or a control character")
    return value or None, flag


def parse_target(
    verl: str | None = None,
    msprobe: str | None = None,
    series: str | None = None,
    verl_option: str = "--verl",
    stack: str | None = None,
) -> Target:
    """The target from the options, falling back to HARNESS_VERL / HARNESS_MSPROBE / HARNESS_SERIES /
    HARNESS_STACK; ``verl_option``: the option that gave ``verl`` (``--base``), as its error lines name it."""
    (verl, verl_flag), (msprobe, msprobe_flag) = _given("verl", verl, verl_option), _given("msprobe", msprobe)
    series = _given("series", series)[0]
    stack, stack_flag = _given("stack", stack)
    if stack is not None and stack not in STACKS:
        raise TargetError(f"{stack_flag} {stack!r}: one of {', '.join(STACKS)}")
    v = _parse_verl(verl, verl_flag) if verl else _pinned("verl")
    m = _parse_msprobe(msprobe, msprobe_flag) if msprobe else _pinned("msprobe")
    return Target(verl=v, msprobe=m, series=series or v.series, stack="verl" if stack == "verl" else "harness")
