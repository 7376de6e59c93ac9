"""Where the history of nights is kept between nights: the store seam (docs/history.md, "Where the history lives").

``store`` is the history file itself; a ``HistoryStore`` is where such files live from one night to the next. A
nightly's last job takes a working copy of the store (``checkout``), appends, checks and publishes there, and
``save``s what it wrote back, only if the store is still as it was taken (another job wrote it meanwhile: ``Moved``,
this night not recorded, nothing of the other job's lost). The duet reads one file as the store holds it now
(``read``). ``GitBranch`` keeps the files on a branch of a git repository (the nightlies': GitHub Pages serves the
page of the nights from its docs/); ``Directory`` in a plain directory (a runner's own disk). Both refuse a symbolic
link among what they hold before anything is written (a night would append, publish and save through it, outside
its copy), and write back only the names they are given (the history files and their page, docs/; never the lock
files beside them). Git is given no credential on its command line: a token reaches it through its environment
(``GIT_CONFIG_*``, set by ``.ci/history``), which every git process here inherits."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from filelock import FileLock

from harness.history.store import HistoryError
from harness.safeio import write_atomic


class StoreError(HistoryError):
    """The store could not be read or written as asked (its line says which store and why)."""


class Unreadable(StoreError):
    """The store cannot be read (a runner or token problem): nothing was taken from it."""


class Refused(StoreError):
    """The store holds what a night must not write through (a symbolic link): nothing was written."""


class Moved(StoreError):
    """The store changed since its copy was taken (another job wrote it): this copy was not saved."""


@dataclass(frozen=True)
class Checkout:
    """A working copy of a store: ``work`` holds its files as they were taken, ``version`` what the save expects to
    find there still ("" where the store held nothing), ``note`` why it held nothing (this night starts it)."""

    work: Path
    version: str
    note: str | None = None


@dataclass(frozen=True)
class Read:
    """One file as the store holds it now: its bytes, and which version of the store they are (``at``)."""

    data: bytes
    at: str


class HistoryStore(Protocol):
    """Where the history files live between nights."""

    @property
    def title(self) -> str:
        """The store in the night's step summary heading ("branch precision-debugger-history")."""
        ...

    def where(self) -> str:
        """The store in a sentence ("the branch B of REMOTE")."""
        ...

    def checkout(self, work: Path) -> Checkout:
        """A working copy of every file the store holds, in ``work`` (made anew); ``Unreadable``, ``Refused``."""
        ...

    def read(self, name: str, scratch: Path) -> Read | None:
        """The file ``name`` as the store holds it now (None: no such file, or no store yet), ``scratch`` for the
        store's own use; ``Unreadable``."""
        ...

    def save(self, copy: Checkout, names: Sequence[str], message: str) -> str:
        """Write ``names`` (files and directories of ``copy.work``) back, only if the store is still at
        ``copy.version`` (else ``Moved``); the line that says what was recorded."""
        ...


def _git(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, check=False)


def _fresh(path: Path) -> None:
    """``path`` gone, whatever was there (a link removed, never followed), for a copy made anew."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    else:
        shutil.rmtree(path, ignore_errors=True)


def _last_line(data: bytes) -> str:
    lines = data.decode(errors="replace").splitlines()
    return lines[-1] if lines else ""


@dataclass(frozen=True)
class GitBranch:
    """The history on ``branch`` of the git repository ``remote``: fetched at depth 1, pushed back with a lease on
    the commit fetched (absent: still absent), so two jobs never overwrite each other's night."""

    remote: str
    branch: str

    @property
    def title(self) -> str:
        return f"branch {self.branch}"

    def where(self) -> str:
        return f"the branch {self.branch} of {self.remote}"

    def _ref(self) -> str:
        return f"refs/heads/{self.branch}"

    def _tip(self) -> subprocess.CompletedProcess[bytes]:
        return _git("ls-remote", "--heads", self.remote, self._ref())

    def checkout(self, work: Path) -> Checkout:
        _fresh(work)
        _checked(_git("init", "-q", str(work)), "git init")
        tip = self._tip()
        if tip.returncode != 0:
            raise Unreadable(f"cannot read {self.remote} (its branch {self.branch})")
        if not tip.stdout.strip():
            return Checkout(work, "", f"no branch {self.branch} in {self.remote}")
        # the commit fetched is the one the push expects to replace (the branch may have moved since ls-remote)
        fetched = _git("fetch", "-q", "--depth=1", self.remote, self._ref(), cwd=work)
        if fetched.returncode != 0:
            raise Unreadable(f"cannot read {self.remote} (its branch {self.branch}): {_last_line(fetched.stderr)}")
        base = _checked(_git("rev-parse", "FETCH_HEAD", cwd=work), "git rev-parse").decode().strip()
        # the night writes the branch, files only: a link on it (to an absolute path) would have the night append,
        # publish (docs/) and push through it, writing outside the copy; refused before the checkout
        tree = _checked(_git("ls-tree", "-r", "-z", base, cwd=work), "git ls-tree").decode(errors="replace")
        links = [entry.split("\t", 1)[1] for entry in tree.split("\0") if entry.startswith("120000 ")]
        if links:
            raise Refused(
                f"the history branch {self.branch} holds a symbolic link ({' '.join(links)}): nothing is written "
                "through a link; remove it from the branch"
            )
        _checked(_git("checkout", "-q", "--detach", base, cwd=work), "git checkout")
        return Checkout(work, base)

    def read(self, name: str, scratch: Path) -> Read | None:
        _fresh(scratch)
        _checked(_git("init", "-q", str(scratch)), "git init")
        tip = self._tip()
        failed = tip if tip.returncode != 0 else None
        if failed is None and tip.stdout.strip():
            fetched = _git("fetch", "-q", "--depth=1", self.remote, self._ref(), cwd=scratch)
            failed = fetched if fetched.returncode != 0 else None
        if failed is not None:
            why = _last_line(failed.stderr)
            raise Unreadable(f"cannot read the history branch {self.branch} of {self.remote} ({why})")
        if not tip.stdout.strip() or _git("cat-file", "-e", f"FETCH_HEAD:{name}", cwd=scratch).returncode != 0:
            return None
        data = _checked(_git("show", f"FETCH_HEAD:{name}", cwd=scratch), "git show")
        at = _checked(_git("rev-parse", "FETCH_HEAD", cwd=scratch), "git rev-parse").decode().strip()[:12]
        return Read(data, f"of {self.branch} at {at}")

    def save(self, copy: Checkout, names: Sequence[str], message: str) -> str:
        work = copy.work
        present = [n for n in names if (work / n).exists()]
        if present:  # the history files and their pages (not the lock files beside them)
            _checked(_git("add", "--", *present, cwd=work), "git add")
        if _git("diff", "--cached", "--quiet", cwd=work).returncode == 0:
            return "history: nothing new to record"
        who = ("-c", "user.name=precision_debugger nightly", "-c", "user.email=nightly@localhost")
        _checked(_git(*who, "commit", "-q", "-m", message, cwd=work), "git commit")
        # the push succeeds only if the branch is still where this job fetched it (absent: still absent)
        lease = f"--force-with-lease={self._ref()}:{copy.version}"
        pushed = _git("push", "-q", lease, self.remote, f"HEAD:{self._ref()}", cwd=work)
        if pushed.returncode != 0:
            tip = self._tip()
            now = tip.stdout.decode(errors="replace")[:12] if tip.returncode == 0 else ""
            raise Moved(
                f"the history branch {self.branch} moved since this job read it ({copy.version[:12]} then, "
                f"{now or 'absent'} now: another job wrote it)"
            )
        head = _checked(_git("rev-parse", "HEAD", cwd=work), "git rev-parse").decode().strip()
        return f"history: {self.branch} now at {head}"


def _checked(proc: subprocess.CompletedProcess[bytes], what: str) -> bytes:
    if proc.returncode != 0:
        raise StoreError(f"{what} failed (exit {proc.returncode}): {_last_line(proc.stderr)}")
    return proc.stdout


LOCK = ".history-store.lock"  # beside the files of a Directory: one save at a time, never itself saved


@dataclass(frozen=True)
class Directory:
    """The history in a plain directory: copied out whole, written back file by file (each atomically, under the
    directory's lock) only where the directory still holds what was copied (its files' digest)."""

    root: Path

    @property
    def title(self) -> str:
        return f"directory {self.root}"

    def where(self) -> str:
        return f"the directory {self.root}"

    def _files(self) -> dict[str, Path]:
        """Every file the directory holds, by its path in it; a link anywhere refused, the lock left out."""
        if self.root.is_symlink():
            raise Refused(f"the history directory {self.root} is a symbolic link: nothing is written through a link")
        files: dict[str, Path] = {}
        links: list[str] = []
        for top, dirs, names in os.walk(self.root):  # links are not followed: each is seen, and refused
            for name in [*dirs, *names]:
                path = Path(top, name)
                rel = path.relative_to(self.root).as_posix()
                if path.is_symlink():
                    links.append(rel)
                elif name in names and rel != LOCK:
                    files[rel] = path
        if links:
            raise Refused(
                f"the history directory {self.root} holds a symbolic link ({' '.join(sorted(links))}): nothing is "
                "written through a link; remove it from the directory"
            )
        return files

    def _version(self) -> str:
        digest = hashlib.sha256()
        for rel, path in sorted(self._files().items()):
            digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        return digest.hexdigest()

    def checkout(self, work: Path) -> Checkout:
        _fresh(work)
        work.mkdir(parents=True)
        if not self.root.exists():
            return Checkout(work, "", f"no directory {self.root}")
        try:
            files = self._files()
            version = self._version()
            for rel, path in files.items():
                (work / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, work / rel)
        except OSError as exc:
            raise Unreadable(f"cannot read {self.root} ({exc.strerror or exc})") from None
        return Checkout(work, version if files else "", None if files else f"no history in {self.root}")

    def read(self, name: str, scratch: Path) -> Read | None:
        del scratch  # a directory is read in place
        try:
            files = self._files() if self.root.exists() else {}
            if name not in files:
                return None
            return Read(files[name].read_bytes(), f"of {self.root} at {self._version()[:12]}")
        except OSError as exc:
            raise Unreadable(f"cannot read {self.root} ({exc.strerror or exc})") from None

    def save(self, copy: Checkout, names: Sequence[str], message: str) -> str:
        del message  # a directory keeps no log
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / LOCK)):
            held = self._files()
            if (self._version() if held else "") != copy.version:
                raise Moved(f"the history directory {self.root} changed since this job read it: another job wrote it")
            changed = 0
            for name in names:
                mine = copy.work / name
                if mine.is_file():
                    wanted = {name: mine}
                elif mine.is_dir():  # a page: the directory as the copy holds it, what it no longer holds removed
                    wanted = {p.relative_to(copy.work).as_posix(): p for p in mine.rglob("*") if p.is_file()}
                    for rel in [r for r in held if r.startswith(f"{name}/") and r not in wanted]:
                        held[rel].unlink()
                        changed += 1
                else:
                    continue
                for rel, path in wanted.items():
                    data = path.read_bytes()
                    if rel not in held or held[rel].read_bytes() != data:
                        (self.root / rel).parent.mkdir(parents=True, exist_ok=True)
                        write_atomic(self.root / rel, data)
                        changed += 1
        if not changed:
            return "history: nothing new to record"
        return f"history: {self.root} now at {self._version()[:12]}"
