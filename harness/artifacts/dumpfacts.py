"""dump_facts.json: what a run's one read of each of its dump.json files found, stored beside the run.

A dump is read whole once, when the run is judged: the contents check's streamed read (``harness.checks.contents``),
and a read of its own for a dump no check reads (a stage or step the scenario does not expect). What every later
reader needs of it is folded in that pass (``dumpfile.Summary``): the entries' names with msprobe's call counters
folded and their counts (the structure the gate, the baseline, the history and the reports compare), whether its
statistics carry md5 (the numerics' mode), and the sha256 and size of the bytes read. Later readers, in this process
or any other, read these facts and never the dump; a reader that reads a dump's bytes again (the numerics' rows)
checks them against the digest, so a dump changed since is told by its bytes, never by its size or times.

Within the process that judged the run, its dumps are held open where a later reader of their bytes is known (the
numerics of a comparison read base's first runs and head's first): that reader reads the file the checks opened and
read, by ``pread``, never a second open.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from harness.artifacts.dumpfile import DumpFile, Summary, open_regular
from harness.artifacts.reader import DumpTree
from harness.artifacts.rundir import RunDir
from harness.safeio import MB, Versioned

MAX_FACTS_BYTES = 64 * MB
HELD_MAX = 256  # dumps a run holds open for a later reader: past this, that reader opens them again (the fd limit)


class DumpFact(BaseModel):
    """One dump.json as its whole read found it; a dump that did not read to its end (not JSON, truncated) has none
    (the contents check says why)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    digest: str  # sha256 of its bytes
    size: int
    names: dict[str, int] | None  # its entries' folded names and their counts; None: no ``data`` mapping
    md5: bool

    @classmethod
    def of(cls, s: Summary) -> DumpFact:
        return cls(digest=s.digest, size=s.size, names=dict(s.names) if s.has_data else None, md5=s.md5)

    def summary(self) -> Summary:
        return Summary(Counter(self.names or {}), self.names is not None, self.md5, self.digest, self.size)


class DumpFacts(Versioned):
    """dump_facts.json, in the on run's dir: each dump of the run that read whole, by its path under the run's dumps
    dir (``step_N/<stage>/step0/rank<R>/dump.json``)."""

    FILE = "dump_facts.json"
    REDO = "judge the run again (--reuse): its dumps are read once more"
    schema_version: Literal[1] = 1
    dumps: dict[str, DumpFact] = {}

    @classmethod
    def recorded(cls, run: RunDir) -> DumpFacts | None:
        """The run's stored facts; None where its judge stored none (a run judged by an earlier harness). Raises
        InputError where the file is there and not such facts."""
        path = run.dump_facts
        if not path.exists() and not path.is_symlink():
            return None
        return cls.read_file(path, MAX_FACTS_BYTES, follow=False)


class DumpReads:
    """The one read of each dump.json of one run in this process: every reader of the run's dumps gets them here
    (:meth:`dump`). Each is opened once; with ``hold``, it stays open until :meth:`close` for the later reader of its
    bytes (the numerics), which reads that open file (``DumpFile.opened``), never another."""

    def __init__(self, dumps: Path, hold: bool = False) -> None:
        self.root = dumps
        self.hold = hold
        self._dumps: dict[Path, DumpFile] = {}

    def dump(self, path: Path) -> DumpFile:
        """The dump at ``path``, as every reader of it here reads it (its summary once read whole). Raises OSError
        (``dumpfile.NotRegularFile`` included) where it cannot be opened."""
        if (known := self._dumps.get(path)) is not None:
            return known
        held = sum(d.file is not None for d in self._dumps.values())
        dump = self._dumps[path] = DumpFile(path)
        if self.hold and held < HELD_MAX:
            try:
                dump.file = open_regular(path)
            except OSError:
                dump.failed = True  # not opened again, by this reader or the facts
                raise
        return dump

    def read(self, path: Path) -> Summary | None:
        """The dump's summary, read whole here unless a reader already did; None where it is not a whole dump (not
        there, not a regular file, not JSON)."""
        try:
            dump = self.dump(path)
            if dump.summary is None and not dump.failed:  # a read that failed is not tried again
                dump.read_summary()
        except (OSError, ValueError):
            return None
        return dump.summary

    def facts(self, tree: DumpTree) -> DumpFacts:
        """Every dump.json of the run's tree: those read already as they were read, the rest read whole now."""
        facts: dict[str, DumpFact] = {}
        for d in tree.dirs:
            if "dump.json" in d.files and (summary := self.read(d.path / "dump.json")) is not None:
                facts[(d.path / "dump.json").relative_to(tree.root).as_posix()] = DumpFact.of(summary)
        return DumpFacts(dumps=facts)

    def known(self, path: Path) -> DumpFile | None:
        """The dump at ``path`` as read here (held open where it is, with its summary once read whole); None where
        no reader asked for it."""
        return self._dumps.get(path)

    def close(self) -> None:
        for dump in self._dumps.values():
            if dump.file is not None:
                with contextlib.suppress(OSError):
                    dump.file.close()
                dump.file = None
