"""Reading inputs and writing results without surprises: a named file that is a FIFO, a device or a link is refused
before it is opened (a FIFO would hang the read), inputs have a size cap, and every record is written whole or not
at all (temp file + ``os.replace``: a full disk leaves the previous file, never a half-written one, and a link at
the path is replaced, never followed). A full disk is an InfraError saying how much space is left.

The one way to write a file: ``write_atomic`` for a whole file, ``open_to_write`` for one written as it goes (a log,
an appended listing). Neither follows a link at the path, both keep the mode of the file they replace or extend (a
new one gets the umask's, as ``open`` would give it: a history appended by a nightly stays readable by the page that
publishes it), and a place that cannot be written is one line naming it (``OutputError``), never a traceback."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.errors import HarnessError, InfraError
from harness.outside import redact, shown

MB = 1 << 20


class InputError(ValueError):
    """A file that cannot be read as the input it should be; the message says why, in a few words."""


class OutputError(HarnessError):
    """A place the harness was told to write that cannot take the file: a link, a directory, a read-only or
    unwritable place. Bad input of whoever named it (exit 2), never a harness bug and never a verdict."""


def read_text(path: Path, max_bytes: int = MB, follow: bool = True) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``. ``follow=False``: a symlink is refused too."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise InputError("is a symbolic link (not followed)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"not a regular file ({_kind(st.st_mode)})")
    if st.st_size > max_bytes:
        raise InputError(f"{st.st_size} bytes, over the {max_bytes} byte limit")
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):  # swapped between the stat and the open
                raise InputError("not a regular file")
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise InputError(f"over the {max_bytes} byte limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})") from None


def tail_bytes(path: Path, max_bytes: int) -> str:
    """The last ``max_bytes`` of a regular file as text (undecodable bytes replaced); "" when it is not one. A link
    is not followed: a run's log is written by the code under test, and nothing is read through links out of a
    results dir."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return ""
        f.seek(max(0, st.st_size - max_bytes))
        return f.read(max_bytes).decode("utf-8", errors="replace")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device")):
        if test(mode):
            return name
    return "a socket or device" if stat.S_ISSOCK(mode) or stat.S_ISBLK(mode) else "not a file"


def free_space(path: Path) -> str:
    """The free space of the filesystem holding ``path`` (or its nearest existing parent), for error lines."""
    for p in (path, *path.parents):
        try:
            return f"{shutil.disk_usage(p).free / MB:.1f} MB free on {p}"
        except OSError:
            continue
    return "free space unknown"


def disk_full(path: Path, what: str) -> InfraError:
    return InfraError(f"no space left writing {path} ({what}): {free_space(path.parent)}; free some space, rerun")


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _new_mode(path: Path) -> int:
    """The mode a write to ``path`` gives: the existing regular file's, else what ``open`` gives a new file."""
    with contextlib.suppress(OSError):
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    return 0o666 & ~_umask()


def cannot_write(path: Path, exc: OSError, size: str = "", named: str = "") -> HarnessError:
    """A failed write (or mkdir, or lock) as one line naming ``path`` (or ``named``: the option that gave it): a full
    disk is the runner's (InfraError), a place that refuses the file is the input of whoever named it (OutputError),
    never a harness bug."""
    said = named or str(path)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return disk_full(path, size or "a file")
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        where = "a read-only filesystem" if exc.errno == errno.EROFS else "a place this user may not write"
        return OutputError(f"{said}: cannot write: {where} ({exc.strerror}); write elsewhere or make it writable")
    if exc.errno == errno.ELOOP:
        return OutputError(f"{said}: a symbolic link: files are written in place, never through a link (remove it)")
    return OutputError(f"{said}: cannot write: {exc.strerror or exc}")


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write ``path`` whole or not at all: a temp file in the same directory, then ``os.replace``. A link at
    ``path`` is replaced, never followed; the mode of the file replaced is kept. A full disk is an InfraError naming
    the file and the free space, a place that refuses the file an OutputError."""
    raw = data.encode() if isinstance(data, str) else data
    tmp = None
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        mode = _new_mode(path)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise cannot_write(path, exc, f"{len(raw)} bytes") from None


def open_to_write(path: Path, append: bool = False, binary: bool = False) -> IO[Any]:
    """``path`` opened for writing as it goes (truncated, or ``append``ed to), never through a link (``O_NOFOLLOW``)
    and only where it is a regular file (a FIFO would block, a device would take the bytes); a new file gets the
    umask's mode, an existing one keeps its own. OutputError or InfraError in one line otherwise."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | (os.O_APPEND if append else 0)
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as exc:
        raise cannot_write(path, exc, "a stream") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # truncated only once it is known to be a regular file
        os.close(fd)
        raise OutputError(f"{path}: cannot write: {_kind(st.st_mode)}, not a file (remove it or write elsewhere)")
    os.set_blocking(fd, True)
    if not append:
        os.ftruncate(fd, 0)
    return os.fdopen(fd, "ab") if binary else os.fdopen(fd, "a", encoding="utf-8")


def in_place(root: Path, path: Path) -> Path:
    """``path``, after checking that neither ``root`` nor a directory between them (``path`` included) is a symbolic
    link: what is written or deleted there stays there (a rmtree through a linked dir deleted files elsewhere).
    HarnessError, one line naming the link, otherwise."""
    here = root
    for part in ("", *path.relative_to(root).parts):
        here = here / part if part else here
        if here.is_symlink():
            raise HarnessError(
                f"{here}: a symbolic link in an output dir: outputs are written in place only (remove it)"
            )
    return path


def output_path(path: str | Path, option: str, inputs: Iterable[str | Path] = (), directory: bool = False) -> Path:
    """Where a command may write ``path`` (given as ``option``), absolute, its parent made (a ``directory``
    output: itself). Never one of the command's ``inputs`` nor inside one (a results dir being read: a baseline
    written as ``R/<scenario>/results.json`` replaced a results file, and every later command failed on it), and a
    directory output never holds one. A file output that is a directory, a directory output that is a file, or a
    parent that is not a directory: HarnessError, one line naming ``option``; a place this user cannot write (a
    read-only mount, another user's dir): OutputError, said before anything is run or written there."""
    if Path(path).is_symlink():  # resolved, a dangling link would name its target, wherever it points
        raise OutputError(f"{option} {path}: a symbolic link: outputs are written in place, never through a link")
    out = Path(path).resolve()
    for given in inputs:
        src = Path(given).resolve()
        if out == src or src in out.parents:
            where = "the input" if out == src else "inside the input"
            raise HarnessError(f"{option} {path}: is {where} {given} (write elsewhere)")
        if directory and out in src.parents:
            raise HarnessError(f"{option} {path}: holds the input {given} (name a directory of its own)")
    try:
        if out.exists() and out.is_dir() != directory:
            raise HarnessError(f"{option} {path}: {'not a directory' if directory else 'is a directory (name a file)'}")
        if blocked := next((p for p in out.parents if p.exists() and not p.is_dir()), None):
            raise HarnessError(f"{option} {path}: {blocked} is not a directory")
        folder = out if directory else out.parent
        folder.mkdir(parents=True, exist_ok=True)
        writable(folder)
    except OSError as exc:
        raise cannot_write(out, exc, named=f"{option} {path}") from None
    return out


def writable(where: Path) -> None:
    """OSError where a file cannot be made in the directory ``where`` (a read-only mount, another user's dir): a
    file made and removed, what every later write there needs."""
    fd, probe = tempfile.mkstemp(dir=where, prefix=".harness-writable.")
    os.close(fd)
    os.unlink(probe)


def validation_line(exc: ValidationError) -> str:
    """A pydantic error as one line: the first field's path and problem, and how many more there are. The path is
    the file's own keys (a history's scenario, a figure's name): shown as outside text (``harness.outside.shown``),
    a key that holds a line break or a workflow command is never a line of its own."""
    err = exc.errors()[0]
    where = shown(".".join(map(str, err["loc"]))) or "(top level)"
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {err['msg'].removeprefix('Value error, ')}{more}"


class Versioned(BaseModel):
    """A file the harness writes and reads again (results.json, baseline.json, ...): every field declared
    (``extra="forbid"``) and the ``schema_version`` that wrote it. A reader takes its own schema and the one before
    (``upgrade``: files written before schema versions exist, 1, had none), so the baseline a nightly kept from last
    night still reads after one harness upgrade; anything else is refused in one line saying what to do (``REDO``),
    never read as if it were this schema."""

    model_config = ConfigDict(extra="forbid")
    FILE: ClassVar[str]  # the file's name in messages
    REDO: ClassVar[str]  # what to do with a file of another schema

    @classmethod
    def schema_number(cls) -> int:
        return int(cls.model_fields["schema_version"].default)

    @classmethod
    def upgrade(cls, doc: dict[str, Any]) -> dict[str, Any]:
        """A document of the previous schema as this one's: where a field moved, say so here."""
        return doc

    @classmethod
    def of(cls, doc: object) -> Self:
        """Validate a parsed document, upgrading the previous schema; InputError in one line otherwise."""
        version = doc.get("schema_version", 1) if isinstance(doc, dict) else cls.schema_number()
        known = type(version) is int  # not True, not 2.0
        if isinstance(doc, dict) and known and version == cls.schema_number() - 1:
            doc = cls.upgrade({k: v for k, v in doc.items() if k != "schema_version"})
            doc["schema_version"] = cls.schema_number()
        elif not known or version != cls.schema_number():
            raise InputError(
                f"{cls.FILE} written by schema {shown(repr(version))}, this harness reads schemas "
                f"{cls.schema_number() - 1} and {cls.schema_number()}: {cls.REDO}"
            )
        try:
            return cls.model_validate(doc)
        except ValidationError as exc:
            raise InputError(f"{validation_line(exc)}: not a harness {cls.FILE}") from None

    @classmethod
    def read_file(cls, path: Path, max_bytes: int, follow: bool = True) -> Self:
        """``path`` as this file; InputError (what is wrong, in one line, without the path) otherwise."""
        text = read_text(path, max_bytes, follow)
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise InputError(f"not valid JSON ({str(exc)[:80]}): a truncated or corrupt {cls.FILE}") from None
        return cls.of(doc)

    def write(self, path: Path) -> None:
        """Whole, never through a link, every credential redacted (``harness.outside``): fields that came from
        outside (a server's message, a commit's subject) are stored as they would be shown."""
        write_atomic(path, redact(self.model_dump_json(indent=1)) + "\n")
