"""Reading msprobe's dump.json entry by entry: linear time, memory bounded by a window, not by the file.

Real L1 dumps are hundreds of MB per rank and stage, and a whole one parsed takes about ten times its size.
msprobe writes ``json.dump(..., indent=1)``, so each entry of ``data`` ends at a line ``\n  }``: runs of
whole entries are cut there and parsed by orjson, the entry holding a ``NaN``/``Infinity`` literal (msprobe
writes them, orjson rejects them) by the stdlib. A cut is used only if it parses as whole members, so any
other layout still reads correctly, through the stdlib's decoder value by value (a lazy reading, the compare's
bench, splits such a run into its entries' texts without parsing them: :meth:`DumpFile.following`).
Readers take the entries a run at a time (:meth:`DumpFile.batches`), so that their per-entry work can run in
C (``map``, ``Counter``).
Every reader of dump.json goes through here. A whole read leaves the dump's :class:`Summary` (the folded names that
the structure counts, whether msprobe's md5 compare applies, the digest of the bytes read): the facts of a run's
dumps, folded in its one read and stored beside it (``harness.artifacts.dumpfacts``), which every later reader takes
instead of reading the dump again. A reader that needs a second pass over a file it holds open reads it again by
``pread`` (:func:`reread`), not by a second open; a whole read of a dump whose summary is known checks its digest: a
dump changed since is told by its bytes, never by its size or times."""

from __future__ import annotations

import codecs
import errno
import gc
import hashlib
import io
import json
import os
import re
import stat
from collections import Counter
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

HEADER_KEYS = ("task", "level", "framework")
CHUNK = 1 << 20
MAX_VALUE = 64 << 20  # one entry or header value; more than this is a broken file, not a big dump
LONGEST_TOKEN = 1 << 20  # names, dtypes, md5s: no string in a dump comes near this
_ENTRY_START = '\n  "'  # data's first member, as json.dump(indent=1) lays it out
_ENTRY_END = "\n  }"  # where such a member that is an object ends
_ENTRY_SEP = "," + _ENTRY_START  # between two members of data
SKIPPED: dict[str, Any] = {}  # DumpFile.following: a run read past (never a run's entries: a run holds one at least)
BATCH = 1 << 14  # characters of entries per orjson call: amortises the call, and a NaN in it wastes little
_SPACE = re.compile(r"[ \t\n\r]*")
_MD5 = '"md5"'
_DECODER = json.JSONDecoder()  # accepts NaN, Infinity and -Infinity
_KINDS = (
    (stat.S_ISLNK, "symlink"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISDIR, "directory"),
    (stat.S_ISREG, "regular file"),
)


class NotRegularFile(OSError):
    """A FIFO blocks a reader forever and a device never ends: neither is read, and the layout check says why."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", str(path))
        self.kind = kind


def file_kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "unknown")


def open_regular(path: Path) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file itself: no symlink, FIFO or device (checked on the
    open descriptor, so nothing can swap the file in between; O_NONBLOCK keeps the open of a FIFO from
    waiting for a writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(path, "symlink") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise NotRegularFile(path, file_kind(mode))
    return os.fdopen(fd, "rb")


# Module.<path>.<Class>.forward.0, Module.<path>.<Class>.parameters_grad.0 (L0 and mix)
_MODULE = re.compile(r"^(?P<head>(?:Module|Cell)\..+\.(?:forward|backward|parameters_grad))\.\d+$")
# Functional.linear.3.forward, Tensor.add_.0.backward, Aten.add.Tensor.1.forward (L1 and mix)
_API = re.compile(r"^(?P<head>.+)\.\d+\.(?P<dir>forward|backward)$")
_DIRECTIONS = (".forward", ".backward")


def normalise(name: str) -> str:
    """An entry's name with msprobe's call counter folded away: ``Functional.linear.3.forward`` ->
    ``Functional.linear.forward``; module paths keep their layer indices (what the structure counts). An API's name,
    as most are, is split by hand: ``_API``'s match, at a third of its cost (this runs once per entry of every dump);
    a newline is left to the expressions (``.`` and ``$`` read it their own way)."""
    if name.endswith(_DIRECTIONS) and "\n" not in name:  # never a module's (it ends in its call counter)
        head, _, direction = name.rpartition(".")
        api, _, call = head.rpartition(".")
        return f"{api}.{direction}" if api and call.isdecimal() else name  # isdecimal: what \d matches
    if m := _MODULE.match(name):
        return m["head"]
    if m := _API.match(name):
        return f"{m['head']}.{m['dir']}"
    return name


def _carries_md5(batch: dict[str, Any]) -> bool:
    """Whether an entry's statistics carry md5 (msprobe's ``md5_find``: the summary_mode md5 or xor dumps)."""
    for data in batch.values():
        for value in data.values() if isinstance(data, dict) else ():
            for leaf in value if isinstance(value, list) else [value]:
                if isinstance(leaf, dict) and "md5" in leaf:
                    return True
    return False


@dataclass(frozen=True)
class Summary:
    """What a whole read of one dump.json tells the readers after it: its entries' names folded (:func:`normalise`)
    with their counts (the structure), whether ``data`` is a mapping, whether its statistics carry md5 (the
    numerics' mode), and the bytes it read: their sha256 and how many. Read only: one summary is every later
    reader's."""

    names: Counter[str]
    has_data: bool
    md5: bool
    digest: str
    size: int


class Changed(ValueError):
    """A dump whose bytes are no longer those its summary was made of (its digest differs): what was judged of it
    does not hold for what is read now."""


@dataclass
class DumpFile:
    """One dump.json, read front to back once by iterating :meth:`batches`. ``header`` (task, level,
    framework), ``has_data``, ``names`` and ``md5`` are complete when the iteration ends: JSON does not fix the key
    order."""

    path: Path
    header: dict[str, Any] = field(default_factory=dict)
    has_data: bool = False  # "data" is present and a mapping
    names: Counter[str] = field(default_factory=Counter)  # batches(): the entries' names folded, with their counts
    md5: bool = False  # batches(): an entry's statistics carry md5
    file: BinaryIO | None = None  # held open (:meth:`opened`): every read of it is a pread of this one
    summary: Summary | None = None  # its whole read's, once made (here, or stored beside the run and given)
    failed: bool = False  # a read of it raised (not there, not a regular file, not JSON): no summary to make

    @contextmanager
    def opened(self) -> Iterator[BinaryIO]:
        """The file to read from its start: where it is held open (by a reader of it in progress, or around
        several), a reader of that same open file with its own offset (:func:`reread`); else opened here, and held
        while this read lasts. Raises OSError (NotRegularFile included)."""
        if self.file is not None:
            with reread(self.file) as again:
                yield again
            return
        with open_regular(self.path) as f:
            self.file = f
            try:
                yield f
            finally:
                self.file = None

    def batches(self) -> Iterator[dict[str, Any]]:
        """The entries of ``data`` (name -> value) in file order, a run of them at a time. Raises OSError
        (NotRegularFile included) and ValueError (not JSON, possibly after some runs: a truncated dump; :class:`Changed`
        at the end of one whose known summary's digest is not its bytes'). Read to its end, the file's
        :class:`Summary` is left in ``summary`` for the readers after it."""
        self.names, self.md5 = Counter(), False
        try:
            with self.opened() as f, _collector_paused():
                w = _Window(f, digest=True)
                for batch in _document(w, self):
                    self.names.update(map(normalise, batch))
                    if w.md5 and not self.md5:
                        self.md5 = _carries_md5(batch)
                    yield batch
                self._read_whole(w, made=True)
        except (OSError, ValueError):
            self.failed = True
            raise

    def _read_whole(self, w: _Window, made: bool = False) -> None:
        """The end of a whole read: the summary made (``made``: by :meth:`batches`, which folds the names), or the
        known one's digest checked against the bytes read."""
        if w.hash is None:  # nothing to make, nothing to check
            return
        digest = w.hash.hexdigest()
        if self.summary is None:
            if made:
                self.summary = Summary(self.names, self.has_data, self.md5, digest, w.read)
        elif self.summary.digest != digest:
            raise Changed(
                f"changed since its facts were read: its bytes' sha256 {digest[:16]}..., not {self.summary.digest[:16]}"
                "... (a run's dumps are read once, when its checks run: judge it again, --reuse)"
            )

    def read_summary(self) -> Summary:
        """``summary``, else the file read whole now. Raises what :meth:`batches` raises."""
        if self.summary is None:
            for _ in self.batches():
                pass
        assert self.summary is not None
        return self.summary

    def runs(self) -> Iterator[tuple[dict[str, Any], str | None]]:
        """:meth:`batches`, each with its entries' text as one (from after the first name's opening quote to after
        the last entry's end) where msprobe's layout cuts them, None otherwise: two runs of one text are the same
        entries, told without comparing their values (:func:`run_texts` splits one into its entries')."""
        with self.opened() as f, _collector_paused():
            w = _Window(f, keep=True, digest=self.summary is not None)
            for batch in _document(w, self):
                yield batch, w.text
            self._read_whole(w)

    def following(self) -> Generator[tuple[dict[str, Any], list[str] | None], tuple[str | None, str] | None, None]:
        """The entries' texts, run by run, as another dump's runs (:meth:`runs`) go, without parsing them (where
        msprobe's layout cuts them: else the run parsed, its texts None; a value so read is not checked to be JSON
        until :func:`entry_value` reads it), its names read from the texts. Started by ``next()``
        (which yields ``(SKIPPED, None)``), each later run asked for by ``send((text, last))``, ``text`` and
        ``last`` the other's next run's text and its last entry's name. Where this dump's next entries are that
        text (two runs of one code write most of theirs alike) they are read past, neither split nor parsed, and
        ``(SKIPPED, None)`` comes back; else its entries up to ``last`` where it is near (``text`` None: not
        tried), so that its runs go on ending where the other's do. ``send(None)`` or ``next()``: the next run of
        about BATCH characters. The compare's bench: most of its entries are the same text as the target's."""
        with self.opened() as f, _collector_paused():
            w = _Window(f, keep=True, lazy=True, digest=self.summary is not None)
            w.follow = yield SKIPPED, None
            for batch in _document(w, self):
                w.follow = yield batch, w.texts
            self._read_whole(w)


class _At(io.RawIOBase):
    """An open file read from its start by ``pread``: an offset of its own, the holder's left where it is."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd, self.at = fd, 0

    def readable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def readinto(self, buffer: Any) -> int:
        n = os.preadv(self.fd, [buffer], self.at)
        self.at += n
        return n


def reread(f: BinaryIO) -> BinaryIO:
    """A second reader of an open file, from its start: no second open (the file read is the one opened and
    checked), and the first reader's position untouched. Closing it leaves the file open."""
    return io.BufferedReader(_At(f.fileno()), CHUNK)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsed entries hold no reference cycles, and reference counting frees each run once it is read; the
    cyclic collector, triggered by every 700 new containers, only walks them (a third of a read's time where a
    reader holds one run while the next is parsed; a full collection walks every object of a big process), so
    it is paused while a dump is read."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Window:
    """The unread text of a file: ``buf[pos:]``, refilled as the parse moves on."""

    def __init__(self, f: BinaryIO, keep: bool = False, lazy: bool = False, digest: bool = False) -> None:
        self.f = f
        self.keep = keep  # the last members' text kept in ``text`` (DumpFile.runs)
        self.lazy = lazy  # and, where they are, the members not parsed
        self.texts: list[str] | None = None  # lazy: the last members' texts
        self.text: str | None = None  # else: the last members' text as one
        self.follow: tuple[str | None, str] | None = None  # DumpFile.following: a text to read past, a last name
        self.decode = codecs.getincrementaldecoder("utf-8")().decode
        self.buf, self.pos, self.base, self.eof = "", 0, 0, False
        self.md5, self.tail = False, ""  # whether the text read so far holds '"md5"'; the last read's end, for a seam
        # the bytes read so far: a whole read's digest (``digest``: where it is made or checked) and size
        self.hash, self.read = hashlib.sha256() if digest else None, 0

    def more(self) -> bool:
        """Read on; at least as much as is held, so that retrying one long value stays linear."""
        if self.eof:
            return False
        keep = self.buf[self.pos :]
        if len(keep) > MAX_VALUE:
            raise self.error(f"a value longer than {MAX_VALUE >> 20} MB")
        raw = self.f.read(max(CHUNK, len(keep)))
        self.eof = not raw
        if self.hash is not None:
            self.hash.update(raw)
        self.read += len(raw)
        self.base += self.pos
        text = self.decode(raw, final=self.eof)
        seam = self.tail + text[: len(_MD5)]
        self.md5 = self.md5 or _MD5 in seam or _MD5 in text  # searches in C, no copy of the text
        self.tail = seam[-len(_MD5) :] if len(text) < len(_MD5) else text[-len(_MD5) :]
        self.buf, self.pos = keep + text, 0
        return True

    def error(self, what: str, at: int | None = None) -> ValueError:
        return ValueError(f"{what} at char {self.base + (self.pos if at is None else at)}")

    def peek(self) -> str:
        """The next character that is not white space ('' at the end of the file)."""
        while True:
            self.pos = _SPACE.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return ""

    def take(self, allowed: str) -> str:
        if (c := self.peek()) == "" or c not in allowed:
            raise self.error(f"expected one of {allowed!r}, got {c or 'the end of the file'!r}")
        self.pos += 1
        return c

    def holds(self, text: str) -> bool:
        while len(self.buf) - self.pos < len(text) and self.more():
            pass
        return self.buf.startswith(text, self.pos)

    def value(self) -> Any:
        """One JSON value, by the stdlib's decoder; read on while it is cut off by the end of the window."""
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                if exc.pos + LONGEST_TOKEN > len(self.buf) and self.more():  # else a real error, not a cut
                    continue
                raise self.error(exc.msg, exc.pos) from None
            except RecursionError:  # no dump nests a thousand levels: not valid, as a syntax error is
                raise self.error("nested too deeply to be a dump", self.pos) from None
            if end < len(self.buf) or not self.more():  # a number at the window's end may go on
                self.pos = end
                return value

    def key(self) -> str:
        if not isinstance(key := self.value(), str):
            raise self.error("expected a string key")
        self.take(":")
        return key

    def members(self) -> dict[str, Any]:
        """The next members of an object: in msprobe's layout the whole entries of the next BATCH characters
        (at least one entry; lazy, with ``follow``: read past them if they are its text, else up to its last
        name), in one orjson call; else one member by the decoder."""
        follow, self.follow, end = self.follow, None, -1
        if follow is not None and self.lazy and self.buf.startswith('"', self.pos):
            text, last = follow
            if text is not None and self.holds('"' + text):  # JSON objects are prefix-free: exactly that text's
                self.pos += 1 + len(text)
                self.texts = None
                return SKIPPED
            end = self._end_of(last, len(text or ""))
        if end < 0:
            end = self.buf.rfind(_ENTRY_END, self.pos, self.pos + BATCH)
            if end < 0:
                end = self.buf.find(_ENTRY_END, self.pos)
            while end < 0 and self.more():
                end = self.buf.find(_ENTRY_END, self.pos)
        if (end >= 0 and self.lazy and self.buf.startswith('"', self.pos)
                and (named := _named_texts(self.buf[self.pos + 1 : end + len(_ENTRY_END)])) is not None):  # fmt: skip
            self.texts, names = named
            self.pos = end + len(_ENTRY_END)
            return dict.fromkeys(names)
        if end >= 0 and (cut := _leading_members(self.buf[self.pos : end + len(_ENTRY_END)])) is not None:
            items, length = cut
            # the text after the first entry's opening quote (lazy: a run parsed has its values, not its texts)
            self.text = self.buf[self.pos + 1 : self.pos + length] if self.keep and not self.lazy else None
            self.texts = None
            self.pos += length
            return items
        self.texts = self.text = None
        return {self.key(): self.value()}

    def _end_of(self, name: str, size: int) -> int:
        """Where the entry ``name`` ends, if it opens within twice ``size`` characters (or BATCH) from here; -1 if
        not (the orders part: the usual cut then). Two searches, not one per entry."""
        key, limit = f'"{name}": ', 2 * max(size, BATCH)
        if self.buf.startswith(key, self.pos):
            at = len(key)  # from pos, which more() moves
        else:
            key = _ENTRY_START[:-1] + key
            while (found := self.buf.find(key, self.pos, self.pos + limit)) < 0:
                if len(self.buf) - self.pos >= limit or not self.more():
                    return -1
            at = found - self.pos + len(key)
        while (end := self.buf.find(_ENTRY_END, self.pos + at)) < 0:
            if not self.more():
                return -1
        return end


def run_texts(batch: dict[str, Any], text: str | None) -> list[str] | None:
    """A run's entries' texts (:meth:`DumpFile.runs`), split where the next opens (a line of data's indent: deeper
    inside an entry, and JSON strings hold no newline); None where they are not the batch's entries (a name twice
    is one member)."""
    if text is None:
        return None
    texts = text.split(_ENTRY_SEP)
    aligned = len(texts) == len(batch) and all(map(str.startswith, texts, map('{}": '.format, batch)))
    return texts if aligned else None


def _named_texts(text: str) -> tuple[list[str], list[str]] | None:
    """Entries' texts (from after each name's opening quote) and their names, split where data's next member opens
    (a line of data's indent: deeper inside an entry, and JSON strings hold no newline), none parsed; None where a
    name is not plain text (an escape) or comes twice (one member): those are parsed."""
    texts = text.split(_ENTRY_SEP)
    cuts = [t.find('": ') for t in texts]
    names = [t[:c] for t, c in zip(texts, cuts, strict=True)]
    joined = "".join(names)
    if -1 in cuts or "\\" in joined or '"' in joined or len(set(names)) != len(names):
        return None
    return texts, names


def entry_value(text: str) -> Any:
    """One entry's value from its text (:meth:`DumpFile.following`); ValueError where the text is not one
    JSON member."""
    cut = _leading_members('"' + text)
    if cut is None or len(cut[0]) != 1 or cut[1] != len(text) + 1:
        raise ValueError(f"not one JSON member: entry {text[:200]!r}")
    return next(iter(cut[0].values()))


def _leading_members(text: str) -> tuple[dict[str, Any], int] | None:
    """The leading entries of ``text`` (``"k": {...}, ...``, ending at an entry's end) and their length; None
    when they are not whole members. orjson rejects NaN and Infinity: on its error, the entries before the
    error go in one orjson call and the entry holding it through the stdlib (a text search for the literals
    first costs more than the parse it saves where they are rare)."""
    try:
        return orjson.loads("{" + text + "}"), len(text)
    except orjson.JSONDecodeError as exc:
        before = text.rfind(_ENTRY_END, 0, max(exc.pos - 1, 0))  # exc.pos counts the "{" in front
    if before >= 0:
        try:
            return orjson.loads("{" + text[: before + len(_ENTRY_END)] + "}"), before + len(_ENTRY_END)
        except orjson.JSONDecodeError:
            pass
    first = text.find(_ENTRY_END) + len(_ENTRY_END)
    try:
        return _DECODER.decode("{" + text[:first] + "}"), first
    except ValueError:
        return None


def _document(w: _Window, dump: DumpFile) -> Iterator[dict[str, Any]]:
    """The top-level object: header values kept, ``data`` streamed, anything else parsed and dropped."""
    w.take("{")
    seen: set[str] = set()
    if w.peek() != "}":
        while True:
            at, key = w.pos, w.key()
            if key in seen:  # json.load keeps the last, a stream the first: two readers, two dumps
                raise w.error(f"the top-level key {key!r} twice", at)
            seen.add(key)
            if key == "data" and w.peek() == "{":
                w.pos += 1
                dump.has_data = True
                yield from _data(w, cut=w.holds(_ENTRY_START))
            elif key == "data":
                w.value()
                dump.has_data = False
            elif key in HEADER_KEYS:
                dump.header[key] = w.value()
            else:
                w.value()
            if w.take(",}") == "}":
                break
    else:
        w.pos += 1
    if w.peek():
        raise w.error("extra data after the document")


def _data(w: _Window, cut: bool) -> Iterator[dict[str, Any]]:
    """The members of ``data``, from after its ``{`` to after its ``}``; cut at entry ends in msprobe's layout."""
    if w.peek() == "}":
        w.pos += 1
        return
    while True:
        w.peek()
        yield w.members() if cut else {w.key(): w.value()}  # w.texts: None unless cut (never set otherwise)
        if w.take(",}") == "}":
            return
