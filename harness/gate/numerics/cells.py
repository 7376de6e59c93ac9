"""msprobe's CSV cells as pandas writes its DataFrame (``csv.writer``, QUOTE_MINIMAL): names, dtypes, call stacks,
and statistics written by one orjson call a run, its numbers made repr's text; a statistics column of ints and
floats alone is float64 and writes its ints as floats (:class:`Numbers`: the file is written again then, which real
dumps never need). tests/test_stats_compare.py checks the rules on random bit patterns and against msprobe."""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import math
import operator
import re
from collections.abc import Callable, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from harness.gate.numerics.table import NPU_MAX


def _text(v: Any) -> str:
    """A value as pandas writes it to msprobe's CSV (msprobe turns a float inf into ' inf' for Excel)."""
    if isinstance(v, float) and math.isinf(v):
        return " inf" if v > 0 else " -inf"
    return str(v)


def _quotes_cr() -> bool:
    """Whether csv.writer (QUOTE_MINIMAL, lineterminator newline) quotes a field for a carriage return: Python 3.11
    quotes ',', '"' and the newline only, later versions a carriage return too."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["a\r"])
    return buf.getvalue().startswith('"')


_CR = _quotes_cr()


def quoted(s: str) -> bool:
    """Whether csv.writer quotes ``s`` (a test per character: a regex search costs 20x more on a stack's cell)."""
    return "," in s or '"' in s or "\n" in s or (_CR and "\r" in s)


def csv_cell(s: str) -> str:
    """One text field as csv.writer writes it."""
    return '"' + s.replace('"', '""') + '"' if quoted(s) else s


@functools.lru_cache(maxsize=4096)
def kept_cell(s: str) -> str:
    """:func:`csv_cell` of a dtype, shape or requires_grad: few distinct ones, each on many rows."""
    return csv_cell(s)


@functools.lru_cache(maxsize=512)
def _frames_cell(frames: tuple[Any, ...]) -> str:
    return fmt_value(list(frames))


def stack_cell(stack: Any) -> str:
    """The cell of one call stack (a list of frames' texts, a few KB: its str() costs more than the rows it goes
    with); the ranks and steps of a stage share their stacks, so a stack's cell is kept by its frames."""
    if type(stack) is list:
        with contextlib.suppress(TypeError):  # a frame that is not hashable
            return _frames_cell(tuple(stack))
    return fmt_value(stack)


def side_cells(name: str, dtype: str, req: str) -> tuple[str, str, str]:
    """A row side's name, dtype and requires_grad cells: one search for the three, as they mostly need none."""
    if not quoted(name + dtype + req):
        return name, dtype, req
    return csv_cell(name), csv_cell(dtype), csv_cell(req)


def fmt_value(v: Any) -> str:
    """One value as csv.writer writes it (str() of a number, bool or list, repr of a float, None empty), an inf
    as msprobe writes it (' inf': only statistics can be floats)."""
    if type(v) is str:
        return csv_cell(v)
    if type(v) is float:
        return repr(v) if v - v == 0 or v != v else _text(v)
    if type(v) is int or type(v) is bool:  # no text of theirs is quoted
        return str(v)
    return "" if v is None else csv_cell(str(v))


def _fmt_each(values: list[Any]) -> list[str]:
    """:func:`fmt_value` of each value, once per object: a leaf that is not a tensor (a list argument, a number) has
    one value for its four statistics, and a long list's text is most of its row."""
    texts: dict[int, str] = {}
    return [texts[id(v)] if id(v) in texts else texts.setdefault(id(v), fmt_value(v)) for v in values]


_SIMPLE = {float, int, bool, type(None)}  # what orjson writes without a comma inside
_SHORT_EXP = re.compile(r"e-(\d)\b")  # orjson's e-9 for repr's e-09
_SMALL = re.compile(r"0\.0000([1-9])(\d*)")  # orjson's 0.000015 for repr's 1.5e-05 (after , [ or -)
_WORD = re.compile(r",[^\d-]")  # a token that is not a number: null, true, false, a string


def _repr_numbers(text: str) -> str:
    """orjson's text of numbers (each after a comma or a bracket: the text opens with one) made repr's: the same
    shortest digits, but repr's exponent of two digits at least (``e-09``, not ``e-9``) and its exponent from 1e-5
    to 1e-4 (``1.5e-05``, not ``0.000015``). Each pattern opens with a literal, so that only its matches cost
    Python calls (a lookbehind in front is tried at every character)."""
    if "e-" in text:
        text = _SHORT_EXP.sub(r"e-0\1", text)
    if "0.0000" in text:
        text = _SMALL.sub(_small, text)
    return text


def _small(m: re.Match[str]) -> str:
    if m.string[m.start() - 1].isdigit():  # inside a number (10.00001)
        return m[0]
    return f"{m[1]}.{m[2]}e-05" if m[2] else f"{m[1]}e-05"


def float_texts(values: list[Any], other: Callable[[Any], str] = fmt_value) -> list[str]:
    """Each value's cell (:func:`fmt_value`; ``other``: the cell of a value that is not a finite number), by one orjson
    call (:func:`_repr_numbers`): a float's repr costs as much as the rest of its row. Each value orjson writes
    otherwise (a string, a bool, null for None, NaN and the infs) is written by ``other``; a list's or dict's
    text holds commas, so those go as null to keep the text's tokens one per value. tests/test_stats_compare.py
    checks the rule on random bit patterns and on each side of the thresholds."""
    if not values:
        return []
    try:
        text = orjson.dumps(values).decode()
    except orjson.JSONEncodeError:  # an integer beyond 64 bits (parsed by the stdlib)
        return _fmt_each(values)
    if text.count(",") != len(values) - 1:  # a value with a comma in its text
        text = orjson.dumps([v if type(v) in _SIMPLE else None for v in values]).decode()
    text = "," + text[1:-1]
    tokens = _repr_numbers(text)[1:].split(",")
    none = other(None)
    at, i = 0, -1
    for word in _WORD.finditer(text):  # the token's index: the commas up to it, less one (numbers hold none)
        i += text.count(",", at, at := word.start() + 1)
        tokens[i] = none if (v := values[i]) is None else other(v)
    return tokens


def stats_cells(values: list[Any], other: Callable[[Any], str] = fmt_value) -> list[str]:
    """Statistics' cells four to a group (max, min, mean, norm of one row side), joined."""
    t = float_texts(values, other)
    return [f"{a},{b},{c},{d}" for a, b, c, d in zip(t[0::4], t[1::4], t[2::4], t[3::4], strict=True)]


def finite_cells(groups: list[Sequence[float]]) -> list[str]:
    """:func:`group_cells` of finite floats (no word to replace, no group alone): one orjson call, its text split
    between the groups."""
    return _repr_numbers(orjson.dumps(groups).decode())[2:-2].split("],[")


def _each_cells(groups: list[Sequence[Any]], other: Callable[[Any], str]) -> list[str]:
    """:func:`group_cells` value by value (:func:`float_texts`)."""
    return stats_cells([v for g in groups for v in g], other)


_WORDS = (("null", None), ("true", True), ("false", False))  # orjson's words outside strings, and their values
_BLANK = (None,) * 4  # a group written on its own, in the run's place


def group_cells(groups: list[Sequence[Any]], other: Callable[[Any], str] = fmt_value) -> list[str]:
    """Each group's four cells joined (:func:`stats_cells`; ``other`` as in :func:`float_texts`), by one orjson
    call on the groups, its text split between them: numbers as they are, bools and nulls made their cells by one
    replace each (nulls where all are None: NaN and the infs are written null too, else each group with a null on
    its own). A group holding another value (a string, a list) is written on its own."""
    if not groups:
        return []
    with contextlib.suppress(orjson.JSONEncodeError):  # an integer beyond 64 bits: below
        text, k = orjson.dumps(groups).decode(), len(groups)
        if '"' in text or "{" in text or text.count(",") != 4 * k - 1 or text.count("[") != k + 1:
            odd = [not _SIMPLE.issuperset(map(type, g)) for g in groups]  # what orjson writes with no comma inside
            parts = group_cells([_BLANK if o else g for g, o in zip(groups, odd, strict=True)], other)
            return [_each_cells([g], other)[0] if o else p for p, g, o in zip(parts, groups, odd, strict=True)]
        nones = "null" not in text or text.count("null") == sum(map(operator.countOf, groups, repeat(None)))
        for word, value in _WORDS[0 if nones else 1 :]:
            if word in text:
                if "," in (cell := other(value)):
                    return _each_cells(groups, other)
                text = text.replace(word, cell)
        parts = _repr_numbers(text)[2:-2].split("],[")
        if not nones:  # a NaN or an inf: a group's nulls its Nones' cells where they are all None, else on its own
            none = other(None)
            parts = [p if "null" not in p else p.replace("null", none) if p.count("null") == g.count(None)
                     else _each_cells([g], other)[0] for p, g in zip(parts, groups, strict=True)]  # fmt: skip
        return parts
    return _each_cells(groups, other)


_NUMBER = {int, float}
_FLOAT = {float}


class Numbers:
    """Which statistics columns pandas holds as numbers: msprobe writes its CSV from a DataFrame, whose column of
    ints and floats alone is float64, its ints written as floats (``1.0``); any other value (msprobe's "None",
    "Nan", "N/A", a bool, a string) makes the column object, each value written as it is, and it is no longer
    looked at (every column of real_fsdp_l1's files ends so). The columns are counted from NPU max."""

    def __init__(self) -> None:
        self.open = set(range(8))  # not shown to be object yet
        self.ints: set[int] = set()
        self.floats: set[int] = set()

    def note(self, values: list[Any], width: int) -> None:
        """Statistics row by row, ``width`` to a row: 8 (NPU's, then the bench's), or 4 where both sides hold
        them alike. Numbers are told from NaN by their sum (a NaN's, or inf - inf: then one by one)."""
        if not self.open:
            return
        if set(map(type, values)) <= _FLOAT and _no_nan(values):  # floats alone, as most runs are
            self.floats |= self.open
            return
        for c in range(width):
            if cols := self.open & ({c, c + 4} if width == 4 else {c}):
                column = values[c::width]
                if not (kinds := set(map(type, column))) <= _NUMBER or not _no_nan(column):  # msprobe's "Nan"
                    self.open -= cols
                    continue
                if int in kinds:
                    self.ints |= cols
                if float in kinds:
                    self.floats |= cols

    def as_floats(self) -> set[int]:
        """The columns whose ints pandas writes as floats."""
        return self.open & self.ints & self.floats


def _no_nan(numbers: list[float]) -> bool:
    """Whether ints and floats hold no NaN (an int beyond a float's range: as if one, pandas holds it as object)."""
    try:
        total = sum(numbers)
    except OverflowError:
        return False
    return total == total or not any(v != v for v in numbers)


def ints_as_floats(path: Path, columns: set[int]) -> None:
    """The CSV at ``path`` with the ints of ``columns`` (:class:`Numbers`) written as pandas writes a float64
    column's: read back and written again, rarely (a dump whose statistics are numbers alone)."""
    tmp = path.with_name(path.name + ".floats")
    with path.open(newline="") as src, tmp.open("w", newline="") as dst:
        out, rows = csv.writer(dst, lineterminator="\n"), csv.reader(src)
        out.writerow(next(rows))
        for row in rows:
            for c in columns:
                if (cell := row[NPU_MAX + c]).removeprefix("-").isdigit():  # a float's text has '.', 'e' or 'inf'
                    row[NPU_MAX + c] = repr(float(int(cell)))
            out.writerow(row)
    tmp.replace(path)
