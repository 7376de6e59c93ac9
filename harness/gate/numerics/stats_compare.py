"""msprobe's statistics and md5 compare of two dump.json files, on the harness's streaming reader: the match.

msprobe 26.2's ``compare`` loads both dump.json files whole into pandas (0.67 MB/s, 731 MB peak RSS on a 16.9 MB
pair, measured by benchmarks/numerics_compare.py); real L1 dumps are hundreds of MB per rank. This package computes
what its default mode (``msprobe compare -tp NPU -gp BENCH``: no fuzzy match, no mappings, same framework) writes,
entry by entry, from ``harness.artifacts.dumpfile``. Read from msprobe 26.2 (``msprobe/core/compare/acc_compare.py``,
``compare/utils.py``, ``compare/indicator_analysis/``), not guessed; msprobe's own compare stays the oracle in the
tests. By job: ``rows`` (an entry's leaves, each a row's side), ``rules`` (the diffs and the checkers, msprobe's
thresholds once), ``cells`` (the CSV's text as pandas writes it), and here the match of the target's entries
against the bench's, streamed into the CSV.

Matching (``compare_statistics``): by row name, a backward entry by its rank among the backward calls of the same
API (``rows.DumpEntries``: so one dropped backward call shifts the later ones, as msprobe does). Rows are the
target's (NPU, head) in its order; a bench-only row is dropped.

Memory: the entries of the bench not yet reached by the target, plus the bench's entry names (the name index,
about 100 bytes per entry, built only where the two dumps' orders part), plus one run of parsed entries and up to
512 lines not yet written: bounded where both dumps list their APIs in the same order, as two runs of one code do.
Kept across files: up to 512 call stacks' cells (~5 KB each on real_fsdp_l1: its ranks and steps share them).

Speed (benchmarks/numerics_compare.py): most rows of two runs of one code are entries the same text on both sides,
told by their text as written and rendered a run at a time, from their leaves alone (``rows.entry_leaves``); the
cost is then the target's parsing, a leaf's read and its line, per row in Python. The bench follows the target's
runs (``DumpFile.following``): a run the same text as the bench's next is read past there, neither split nor parsed
(98.7 % of real_fsdp_l1's entries); elsewhere its entries are parsed only where their text is not the target's. An
entry of the bench that no row needs is not checked to be JSON here (the contents check parses every dump of a run).
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections import defaultdict
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from harness.artifacts.dumpfile import SKIPPED, DumpFile, NotRegularFile, open_regular, run_texts
from harness.gate.numerics.cells import (
    Numbers,
    csv_cell,
    finite_cells,
    fmt_value,
    group_cells,
    ints_as_floats,
    kept_cell,
    quoted,
    side_cells,
    stack_cell,
    stats_cells,
)
from harness.gate.numerics.rows import UNREAD, DumpEntries, Entry, Item, Leaf, entry_keys, entry_leaves, is_md5
from harness.gate.numerics.rules import (
    CsvRow,
    judge_entry,
    make_row,
    output_error,
    output_warning,
    same_dtype,
    summary_stats,
)
from harness.gate.numerics.table import BENCH_MAX, MD5_HEADER, N_A, NPU_MAX, STACK, SUMMARY_HEADER

_FLOAT_ONLY = {float}
_ZEROS = "0,0,0,0,0,0,0,0"  # the diffs and relative errors of two equal statistics


def _load_stack(path: Path | None) -> dict[str, Any] | None:
    """stack.json (msprobe's stack mode: a ``NPU_Stack_Info`` column when the target's dir holds one); its new
    layout ``{"0": [[api, ...], stack], ...}`` flattened to api -> stack as ``load_stack_json`` does."""
    if path is None:
        return None
    try:  # its own file only: a link (to a host file) is not followed, a FIFO not waited on
        with open_regular(path) as f:
            text = f.read()
    except (FileNotFoundError, NotRegularFile):
        return None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN, Infinity or an integer beyond 64 bits: the stdlib reads them
        try:
            doc = json.loads(text)
        except RecursionError:  # what json.load of msprobe's own reader would die of
            raise ValueError(f"{path.name}: nested too deeply to be a call stack") from None
    if not isinstance(doc, dict) or not doc.get("0"):
        return doc if isinstance(doc, dict) else {}
    out: dict[str, Any] = {}
    for info in doc.values():
        if isinstance(info, list) and len(info) == 2 and isinstance(info[0], list):
            out.update(dict.fromkeys(info[0], info[1]))
    return out


def _named(it: Item, plain: bool) -> tuple[str, str, str]:
    """A row side's name, dtype and requires_grad cells (``plain``: known to need no quoting)."""
    return (it.name, it.dtype, it.req_grad) if plain else (csv_cell(it.name), csv_cell(it.dtype), csv_cell(it.req_grad))


def _passing_lines(items: list[Item], theirs: list[Item], skip: tuple[int, int], stack: str | None) -> list[str] | None:
    """The CSV lines of an entry moved on head whose every row passes, straight from its leaves: where the rows'
    objects and checkers would cost most. ``theirs``: the bench's leaves in the same order, named past ``skip``
    characters (the two entries' names) as the target's are. None where that cannot be shown this way: two leaves
    of one name (a gradient's list: each matched with the bench's last), a leaf of another name, dtype, shape or
    requires_grad, a statistic not a finite non-zero float (zeros: equal values, not always equal texts: -0.0 ==
    0.0, msprobe diffs them), a "class" dtype (the scalar-parameters checker), or norms moved enough for the
    relative-error checkers (what is left can only pass: the other checkers need a NaN/Inf or one of the
    differences tested here)."""
    if len({it.name for it in items}) != len(items) or len(theirs) != len(items):
        return None
    for it, bt in zip(items, theirs, strict=True):
        if (it.dtype != bt.dtype or it.shape != bt.shape or it.req_grad != bt.req_grad
                or it.name[skip[0] :] != bt.name[skip[1] :]):  # fmt: skip
            return None
    for side in (items, theirs):
        values = [v for it in side for v in it.stats]
        if set(map(type, values)) != _FLOAT_ONLY or not all(values) or (x := sum(values)) - x != 0:
            return None  # not all finite non-zero floats (a sum of finite floats that overflows: row by row)
    text = "".join(f"{it.name}{it.dtype}{it.req_grad}" for it in items)
    if "class" in text:
        return None
    diffs, into, out = [], 0.0, 0.0  # out, into: the largest norm relative error of the outputs, the inputs
    for it, bt in zip(items, theirs, strict=True):
        if it.stats == bt.stats:
            diffs.append(_ZEROS)
            continue
        pairs = list(zip(it.stats, bt.stats, strict=True))
        texts = ["0" if a == b else repr(a - b) for a, b in pairs]
        diffs.append(",".join(texts + ["0" if a == b else f"{abs((a - b) / b * 100)}%" for a, b in pairs]))
        a, b = pairs[3]
        rel = abs((a - b) / b * 100) / 100 if a != b else 0.0
        if ".output." in it.name:
            out = max(out, rel)
        else:
            into = max(into, rel)
    if output_error(into, out) or output_warning(into, out):
        return None  # RelativeErrChecker, RelativeWarnChecker: those outputs' rows may not pass
    cells = finite_cells([g for it, bt in zip(items, theirs, strict=True) for g in (it.stats, bt.stats)])
    text += "".join(bt.name for bt in theirs)
    plain = not quoted(text)
    lines = []
    end = "\n" if stack is None else f",{stack}\n"
    for i, (it, bt) in enumerate(zip(items, theirs, strict=True)):
        n, d, r = _named(it, plain)
        bn = bt.name if plain else csv_cell(bt.name)
        s = kept_cell(it.shape)
        lines.append(f"{n},{bn},{d},{d},{s},{s},{r},{r},{diffs[i]},{cells[2 * i]},{cells[2 * i + 1]},True,pass,[]{end}")
        end = end if stack is None else f",{N_A}\n"
    return lines


class _Pending:
    """The CSV lines not yet written, in order. The rows of entries the same on both sides (:func:`_same`) are held
    as their leaves and rendered a run at a time: every diff is 0, both sides' cells are the same and no checker
    can flag a row, so each line follows from its leaf alone, and one orjson call writes the statistics of the
    whole run. Other lines are kept as text after the held row they follow, so that a run goes on across the
    entries that differ. A line's end (its stack cell, a few KB on an entry's first row) is kept apart from the
    rest, so that it is copied once, by the join that writes it."""

    def __init__(self, rest: str, numbers: Numbers) -> None:
        self.rest = rest  # the end of a row after an entry's first
        self.numbers = numbers
        self.first: list[str] = []  # lines before the first held row
        self.leaves: list[Leaf] = []
        self.ends: list[str] = []  # each held row's end, and the lines after it
        self.after: list[str] = []  # lines after the last held row, not yet joined to its end
        self.count = 0  # lines held

    def add(self, leaves: list[Leaf], end: str) -> bool:
        """The entry's rows held as the same on both sides (``end``: its first row's); False (none held) where
        two leaves have one name (a gradient's list: each matched with the bench's last)."""
        if len({leaf[0] for leaf in leaves}) != len(leaves):
            return False
        if leaves:
            self._settle()
            self.leaves += leaves
            self.ends.append(end)
            self.ends += [self.rest] * (len(leaves) - 1)
            self.count += len(leaves)
        return True

    def extend(self, lines: list[str]) -> None:
        """Lines of an entry that differs, after those held."""
        (self.after if self.ends else self.first).extend(lines)
        self.count += len(lines)

    def _settle(self) -> None:
        """The lines after the last held row joined to its end, once (not an entry at a time: each join copies the
        end, a call stack's cell and all the lines before)."""
        if self.after:
            self.ends[-1] += "".join(self.after)
            self.after = []

    def lines(self) -> list[str]:
        """The lines held, a held row's in two parts (the end apart); none held after. A run's cells are made by
        comprehensions over the whole run: a call per row costs as much as its line."""
        if not (leaves := self.leaves):
            out, self.first, self.count = self.first, [], 0
            return out
        self._settle()
        groups = [leaf[4] for leaf in leaves]
        if self.numbers.open:  # both sides' alike
            self.numbers.note([v for g in groups for v in g], 4)
        cells = group_cells(groups, _summary_cell)
        if quoted("".join([f"{n}{d}{r}" for n, d, _, r, _ in leaves])):  # none quoted, as usual
            leaves = [(csv_cell(n), csv_cell(d), s, csv_cell(r), st) for n, d, s, r, st in leaves]
        out = [""] * (2 * len(cells))
        shapes = [kept_cell(leaf[2]) for leaf in leaves]
        out[0::2] = [f"{n},{n},{d},{d},{s},{s},{r},{r},{_ZEROS},{c},{c},True,pass,[]"
                     for (n, d, _, r, _), s, c in zip(leaves, shapes, cells, strict=True)]  # fmt: skip
        out[1::2] = self.ends
        out = self.first + out
        self.first, self.leaves, self.ends, self.count = [], [], [], 0
        return out


def _summary_cell(v: Any) -> str:
    """The cell of one statistic that is not a finite number, as :func:`summary_stats` shows it."""
    return fmt_value(summary_stats([v])[0])


def _same(entry: Entry, match: Entry) -> bool:
    """Whether an entry is the same text on both sides: its text as written where both dumps are in msprobe's
    layout (its name included; NaN and the infs as written: msprobe's rows of two alike are the same rows of zero
    diffs), else its name and :func:`_same_text`."""
    if entry.text is not None and match.text is not None:
        return entry.text == match.text
    return match.name == entry.name and _same_text(match.data, entry.data)


def _same_text(a: Any, b: Any) -> bool:
    """Whether two entries' values are the same text: serialised alike (1 == 1.0 == True and -0.0 == 0.0 are equal
    values, not equal texts: msprobe's diff of them is not 0), and equal where orjson writes a null (None, and
    NaN and the infs, which it writes alike; NaN is never equal)."""
    try:
        text = orjson.dumps(a)
        return text == orjson.dumps(b) and (b"null" not in text or a == b)
    except orjson.JSONEncodeError:  # an integer beyond 64 bits (parsed by the stdlib): not shown alike here
        return False


def _line(r: CsvRow, stack: str | None, mine: str, theirs: str) -> str:
    """One judged row's CSV line (``mine``, ``theirs``: the statistics' cells, from :func:`stats_cells`)."""
    v = r.values
    if r.md5:
        cells = ",".join(map(fmt_value, v))
    else:  # names, dtypes, shapes, requires_grad; the diffs' texts (no quoting: numbers, "%", "N/A", ...); the
        # statistics; consistency
        (nn, nd, nr), (bn, bd, br) = side_cells(v[0], v[2], v[6]), side_cells(v[1], v[3], v[7])
        cells = f"{nn},{bn},{nd},{bd},{kept_cell(v[4])},{kept_cell(v[5])},{nr},{br},{','.join(v[8:NPU_MAX])},"
        cells += f"{mine},{theirs},{v[BENCH_MAX + 4]}"
    messages = csv_cell(json.dumps(r.messages)) if r.messages else "[]"
    return f"{cells},{r.result},{messages}\n" if stack is None else f"{cells},{r.result},{messages},{stack}\n"


def compare_files(
    npu_path: Path,
    bench_path: Path,
    csv_path: Path | None,
    on_row: Callable[[CsvRow], None],
    dump_of: Callable[[Path], DumpFile] = DumpFile,
) -> int:
    """Compare the target's dump.json (NPU, head) against the bench's (base): each row that does not pass or has no
    counterpart on the bench goes, judged, to ``on_row`` (a pass is only counted: most rows pass), and every row
    (with ``csv_path``) to msprobe's CSV layout; like msprobe, no CSV where either side has no entry. Returns the
    rows. The mode (statistics or md5) is the target's, as msprobe reads it. ``dump_of``: each side's dump (a run's
    held open by the session that read it, with its summary: ``harness.artifacts.dumpfacts``)."""
    head = DumpEntries(dump_of(npu_path))
    with head.dump.opened():  # one open: the md5 test (where the contents check has not told it) and the rows
        md5 = is_md5(head.dump)
        stack = _load_stack(npu_path.parent / "stack.json")
        header = (MD5_HEADER if md5 else SUMMARY_HEADER) + ([STACK] if stack is not None else [])
        bench = _Bench(dump_of(bench_path))
        tmp = csv_path.with_name(csv_path.name + ".part") if csv_path else None
        with tmp.open("w", newline="") if tmp else contextlib.nullcontext() as out:
            if out is not None:
                csv.writer(out, lineterminator="\n").writerow(header)
            n = _rows(head, bench, md5, stack, out.write if out else None, on_row, numbers := Numbers())
    if tmp is not None and csv_path is not None:
        if n and bench.read_any:
            if not md5 and (floats := numbers.as_floats()):
                ints_as_floats(tmp, floats)
            tmp.replace(csv_path)
        else:
            tmp.unlink()
    return n


class _Bench:
    """The bench's entries, read as the target's ask for them. Where both list their APIs in one order, as two runs
    of one code do, each asked for is the next, and a run of the target's entries the same text as the bench's next
    is read past (:meth:`follows`: neither split nor parsed here). At the first asked for that is not the next, the
    name index (:func:`entry_keys`, a scan of the whole file through its one open) is built, to tell an entry the
    bench lacks (none read for it) from one further on."""

    def __init__(self, dump: DumpFile) -> None:
        self.side = DumpEntries(dump)
        self.runs = self.side.dump.following()
        self.queue: list[Entry] = []  # the entries of the bench's last run not yet asked for, last first
        self.pending: dict[str, Entry] = {}  # read, not yet asked for
        self.keys: set[str] | None = None
        self.read_any = False
        self.started = self.ended = self.past = False  # past: the last run was read past (follows)

    def follows(self, text: str | None, last: str, backward: dict[str, int]) -> bool:
        """Whether the bench's next entries are the target's next run (its text ``text``, None where not known; its
        last entry's name ``last``; the target's backward counts before it ``backward``): then read past. Only
        where both are at a run's start, in one order so far, with the same counts (so that their entries' keys
        are alike); else the bench's entries up to ``last`` are read, where none is held, for :meth:`match`: its
        runs go on ending where the target's do. Called at each of the target's runs."""
        if self.past:  # the last run read past: the same names came in between, counted alike
            self.side.backward, self.past = defaultdict(int, backward), False
        if self.queue or self.pending or self.keys is not None or self.ended:
            return False
        same = text is not None and self.side.backward == backward
        if self._run((text if same else None, last)) is SKIPPED:
            self.read_any = self.past = True
            return True
        return False

    def _run(self, follow: tuple[str | None, str] | None) -> dict[str, Any] | None:
        """The bench's next run (``follow``: :meth:`DumpFile.following`), its entries held in ``queue``; SKIPPED
        where read past, None at the end."""
        if not self.started:
            next(self.runs)
            self.started = True
        try:
            batch, texts = self.runs.send(follow)
        except StopIteration:
            self.ended = True
            return None
        if batch is not SKIPPED:
            unread, held = texts is not None, []
            for (name, data), text in zip(batch.items(), texts or repeat(None), strict=unread):
                if (entry := self.side.entry(name, UNREAD if unread else data)) is not None:
                    entry.text = text
                    held.append(entry)
            self.queue = held[::-1]
        return batch

    def _next(self) -> Entry | None:
        while not self.queue:
            if self.ended or self._run(None) is None:
                return None
        self.read_any = True
        return self.queue.pop()

    def match(self, key: str) -> Entry | None:
        if (found := self.pending.pop(key, None)) is not None:
            return found
        if self.keys is None:
            if (b := self._next()) is None:
                return None
            if b.key == key:
                return b
            self.pending[b.key] = b
            self.keys = entry_keys(self.side.dump)  # the file its read holds open
        if key in self.keys:
            while key not in self.pending and (b := self._next()) is not None:
                self.pending[b.key] = b
        return self.pending.pop(key, None)


def _judged_lines(
    entry: Entry,
    match: Entry | None,
    items: list[Item],
    md5: bool,
    info: str | None,
    on_row: Callable[[CsvRow], None],
    numbers: Numbers,
) -> list[str]:
    """The lines of an entry through rows and checkers, each row that does not pass to ``on_row`` (``info``: the
    entry's stack cell)."""
    theirs = {it.name.replace(match.name, "", 1): it for it in match.items(md5)} if match is not None else {}
    rows = []
    for item in items:
        b_item = theirs.get(item.name.replace(entry.name, "", 1))
        if b_item is not None and not same_dtype(item.dtype, b_item.dtype):
            b_item = None
        rows.append(make_row(item, b_item, md5))
    judge_entry(rows, md5)
    lines = []
    stats = []
    if not md5:
        values = [x for r in rows for x in r.values[NPU_MAX : BENCH_MAX + 4]]
        numbers.note(values, 8)
        stats = stats_cells(values)
    for i, r in enumerate(rows):
        if r.result != "pass" or r.bench is None:
            on_row(r)
        lines.append(_line(r, info, *stats[2 * i : 2 * i + 2]) if stats else _line(r, info, "", ""))
        if info is not None:
            info = N_A
    return lines


def _rows(
    head: DumpEntries,
    bench: _Bench,
    md5: bool,
    stack: dict[str, Any] | None,
    write: Callable[[str], Any] | None,
    on_row: Callable[[CsvRow], None],
    numbers: Numbers,
) -> int:
    n = 0
    stack_texts: dict[int, tuple[str, str]] = {}  # by the id of a stack in ``stack``, its cell and a line's end
    info, end = None, "\n"
    pending = _Pending("\n" if stack is None else f",{N_A}\n", numbers)
    for batch, text in head.dump.runs():
        same_run = bench.follows(text, next(reversed(batch)), head.backward)  # the bench's next run is this one's text
        texts = None if same_run else run_texts(batch, text)
        for (name, data), entry_text in zip(batch.items(), texts or repeat(None), strict=texts is not None):
            if (entry := head.entry(name, data)) is None:
                continue
            entry.text = entry_text
            if pending.count > 512:  # a write per line costs more; a join of thousands (MBs with a stack column)
                # takes fresh memory each time: 5x the page faults on real_fsdp_l1's trees
                held = pending.lines()
                if write is not None:
                    write("".join(held))
            match = entry if same_run else bench.match(entry.key)
            if stack is not None:  # one call stack is many entries' (msprobe's stack.json lists their names)
                where = stack.get(entry.name, N_A)
                if (known := stack_texts.get(id(where))) is None:
                    cell = stack_cell(where)
                    known = stack_texts[id(where)] = cell, f",{cell}\n"
                info, end = known
            items = None
            if match is not None and not md5 and (same_run or _same(entry, match)):  # the same on both sides
                if (leaves := entry_leaves(entry.name, entry.data)) is None:
                    items = entry.items(md5)
                    leaves = [(it.name, it.dtype, it.shape, it.req_grad, it.stats) for it in items]
                if pending.add(leaves, end):  # all pass
                    n += len(leaves)
                    continue
            if items is None:
                items = entry.items(md5)
            n += len(items)
            if match is not None and not md5:
                lines = _passing_lines(items, match.items(md5), (len(entry.name), len(match.name)), info)
                if lines is not None:
                    numbers.floats |= numbers.open  # finite floats alone
                    pending.extend(lines)
                    continue
            pending.extend(_judged_lines(entry, match, items, md5, info, on_row, numbers))
    if write is not None:
        write("".join(pending.lines()))
    return n
