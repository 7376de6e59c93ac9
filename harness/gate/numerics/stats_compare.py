"""msprobe's statistics and md5 compare of two dump.json files, on the harness's streaming reader.

msprobe 26.2's ``compare`` loads both dump.json files whole into pandas (0.67 MB/s, 731 MB peak RSS on a 16.9 MB
pair, measured by benchmarks/numerics_compare.py); real L1 dumps are hundreds of MB per rank. This module computes
what its default mode (``msprobe compare -tp NPU -gp BENCH``: no fuzzy match, no mappings, same framework) writes,
entry by entry, from ``harness.artifacts.dumpfile``. Read from msprobe 26.2 (``msprobe/core/compare/acc_compare.py``,
``compare/utils.py``, ``compare/indicator_analysis/``), not guessed; msprobe's own compare stays the oracle in the
tests:

- Rows (``read_op``, ``op_item_parse``, ``gen_op_item``): one per leaf of an entry's input_args, input_kwargs,
  input, output, parameters (``.input.N`` / ``.output.N`` / ``.parameters.NAME``, nested lists and dicts add
  ``.N`` / ``.KEY``) or parameters_grad, ordered inputs, parameters, outputs, parameters_grad (``reorder_index``).
  Entries whose name has no forward/backward/parameters_grad among its last two parts give none.
- Matching (``compare_statistics``, ``update_backward_call``): by row name, except that a backward entry's call
  number is replaced by its rank among the backward calls of the same API (so one dropped backward call shifts the
  later ones, as msprobe does). Rows are the target's (NPU, head) in its order; a bench-only row is dropped. A
  dtype change outside the float groups (``DTYPE_MATCH_GROUPS``) counts as unmatched: bench columns ``N/A``.
- Columns (``CalcStatsDiff``): each statistic's diff and relative error (``0`` when equal as text, NaN -> ``Nan``,
  Inf rules, ``N/A``, ``Diff`` for non-numbers), requires_grad consistency.
- Result (``STATISTICS_CHECKERS`` / ``MD5_CHECKERS``, per entry): NaN/Inf in the target's Max or Min where the bench
  has none, output NormRelativeErr > 50 % while every input's is < 10 %, requires_grad, scalar parameters, dtype,
  shape: error; output's norm relative error 10x the inputs' (or > 10 % on equal inputs): warning on the first
  output; ``to``/``empty``/... entries never judged, collectives' inputs not. md5: a differing CRC-32 error,
  unmatched warning.

Memory: the entries of the bench not yet reached by the target, plus the bench's entry names (the name index,
about 100 bytes per entry, built only where the two dumps' orders part), plus one run of parsed entries and up to
512 lines not yet written: bounded where both dumps list their APIs in the same order, as two runs of one code do.
Kept across files: up to 512 call stacks' cells (~5 KB each on real_fsdp_l1: its ranks and steps share them).

Speed (benchmarks/numerics_compare.py): most rows of two runs of one code are entries the same text on both sides,
told by their text as written and rendered a run at a time, from their leaves alone (``_leaves``); the cost is then
the target's parsing, a leaf's read and its line, per row in Python. The bench follows the target's runs
(``DumpFile.following``): a run the same text as the bench's next is read past there, neither split nor parsed
(98.7 % of real_fsdp_l1's entries); elsewhere its entries are parsed only where their text is not the target's. An
entry of the bench that no row needs is not checked to be JSON here (the contents check parses every dump of a run).

CSV cells: as pandas writes msprobe's DataFrame, column by column: a statistics column of ints and floats alone is
float64 and writes its ints as floats (``_Numbers``: the file is written again then, which real dumps never need).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import io
import json
import math
import operator
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from pathlib import Path
from typing import Any

import orjson

from harness.artifacts.dumpfile import CHUNK, MAX_VALUE, SKIPPED, DumpFile, entry_value, open_regular, run_texts

BASIC = ["NPU Name", "Bench Name", "NPU Dtype", "Bench Dtype", "NPU Tensor Shape", "Bench Tensor Shape",
         "NPU Requires_grad", "Bench Requires_grad"]  # fmt: skip
STATS = ("max", "min", "mean", "l2norm")
DIFFS = ["Max diff", "Min diff", "Mean diff", "L2norm diff",
         "MaxRelativeErr", "MinRelativeErr", "MeanRelativeErr", "NormRelativeErr"]  # fmt: skip
EXTRA = ["Requires_grad Consistent", "Result", "Err_message"]
SUMMARY_HEADER = BASIC + DIFFS + [f"NPU {s}" for s in STATS] + [f"Bench {s}" for s in STATS] + EXTRA
MD5_HEADER = [*BASIC, "NPU MD5", "BENCH MD5", *EXTRA]
STACK = "NPU_Stack_Info"
N_A, NAN, INF, NEG_INF, DIFF = "N/A", "Nan", "inf", "-inf", "Diff"
_FLOATS = ({"Float16", "Float32", "Float64", "BFloat16"},
           {"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"})  # fmt: skip
_IO = (("input_args", ".input"), ("input_kwargs", ".input"), ("input", ".input"), ("output", ".output"),
       ("parameters", ".parameters"))  # fmt: skip
_STATE = {"input_args": "input", "input_kwargs": "input"}
_IGNORE_ALL = {"empty", "empty_like", "numpy", "to", "__setitem__", "empty_with_format", "new_empty_strided",
               "new_empty", "empty_strided"}  # fmt: skip
_IGNORE_INPUT = {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"}
_DEVICE = re.compile("npu|cpu|cuda", re.IGNORECASE)
MAX_DEPTH = 400
MSG_NANINF = "error: There is nan/inf/-inf in the maximum or minimum value of NPU."
MSG_RELERR = "error: The NormRelativeErr of output is greater than 0.5."
MSG_REQGRAD = "error: The Required_Grad of NPU and Bench are inconsistent"
MSG_PARAMS = "error: The scalar parameters of NPU and Bench are inconsistent."
MSG_DTYPE = "error: The dtype of NPU and Bench are inconsistent."
MSG_SHAPE = "error: The shape of NPU and Bench are inconsistent."
MSG_RELWARN = "warning: The norm relative error of output is 10 times that of input."
MSG_CRC_ERR = "error: The CRC-32 value of NPU differs from that of the bench."
MSG_CRC_WARN = "warning: The parameter of NPU does not match the bench."
_LEVEL = {"pass": 0, "warning": 1, "error": 2}
# columns by index (BASIC, then the summary's diffs and statistics, or the md5s)
NPU_NAME, BENCH_NAME, NPU_DTYPE, BENCH_DTYPE, NPU_SHAPE, BENCH_SHAPE, NPU_REQ, BENCH_REQ = range(8)
NORM_REL, NPU_MAX, NPU_MIN, BENCH_MAX, BENCH_MIN = 15, 16, 17, 20, 21
NPU_MD5, BENCH_MD5 = 8, 9
_TENSOR = operator.itemgetter("shape", "Max", "Min", "Mean", "Norm", "requires_grad")
_FLOAT_ONLY = {float}
_ZEROS = "0,0,0,0,0,0,0,0"  # the diffs and relative errors of two equal statistics
_REORDER = {"parameters": 1, "output": 2, "parameters_grad": 3}  # inputs first, then these


@dataclass(slots=True)
class Item:
    """One row's side: a leaf of an entry as msprobe's ``gen_op_item`` reads it."""

    name: str
    state: str
    dtype: str
    shape: str
    req_grad: str
    stats: Sequence[Any]  # max, min, mean, norm
    md5: str


_UNREAD = object()  # an entry's value not parsed yet (the bench's: DumpFile.following)


@dataclass(slots=True)
class Entry:
    """One dump.json entry: its value and the key its rows are matched by (backward calls renumbered)."""

    name: str
    key: str
    value: Any  # as parsed, or _UNREAD: parsed from ``text`` when first asked for
    text: str | None = None  # as written, where msprobe's layout shows it (DumpFile.runs, DumpFile.following)

    @property
    def data(self) -> Any:
        if self.value is _UNREAD:
            self.value = entry_value(self.text or "")
        return self.value

    def items(self, crc: bool) -> list[Item]:
        """Its rows' sides, parsed when asked (the name index needs less); ``crc``: md5 mode's CRC-32s too."""
        if not isinstance(data := self.data, dict):
            return []
        name, split = self.name, self.name.split(".")
        items: list[Item] = []
        if split[-1] == "parameters_grad" or (len(split) >= 2 and split[-2] == "parameters_grad"):
            _parse(data, name, "parameters_grad", True, crc, items)
        else:
            for io, suffix in _IO:
                if io in data:
                    if type(value := data[io]) is list and not crc:
                        _tensors(value, name + suffix, _STATE.get(io, io), items)
                    else:
                        _parse(value, name + suffix, _STATE.get(io, io), False, crc, items)
        if "parameters" in data:  # else already inputs, then outputs
            items.sort(key=lambda it: _REORDER.get(it.state, 0))  # stable: msprobe's reorder_index
        return items


@dataclass
class Row:
    """One CSV row as msprobe writes it (``values``: its header's columns up to Requires_grad Consistent), and its
    verdict (``result``, ``messages``) as the checkers leave it."""

    npu: Item
    bench: Item | None
    values: list[Any]
    md5: bool
    result: str = "pass"
    messages: list[str] = field(default_factory=list)

    def flag(self, level: str, message: str) -> None:
        if _LEVEL[level] > _LEVEL[self.result]:
            self.result = level
        self.messages.append(message)

    @property
    def cells(self) -> dict[str, Any]:
        """The row by column name (msprobe's header, stack column aside)."""
        names = MD5_HEADER if self.md5 else SUMMARY_HEADER
        return dict(zip(names, [*self.values, self.result, json.dumps(self.messages)], strict=True))


def _text(v: Any) -> str:
    """A value as pandas writes it to msprobe's CSV (msprobe turns a float inf into ' inf' for Excel)."""
    if isinstance(v, float) and math.isinf(v):
        return " inf" if v > 0 else " -inf"
    return str(v)


def _gen_item(data: dict[str, Any], name: str, state: str, crc: bool) -> Item:
    dtype = data.get("dtype")
    if dtype and not crc:  # a tensor in statistics mode, as most leaves are: the rest's result, without its tests
        req = data.get("requires_grad")
        stats = [data.get("Max"), data.get("Min"), data.get("Mean"), data.get("Norm")]
        return Item(name, state, str(dtype), str(data.get("shape")), N_A if req is None else str(req), stats,
                    str(data.get("md5")))  # fmt: skip
    stats = [data.get(k) for k in ("Max", "Min", "Mean", "Norm")]
    shape, md5 = data.get("shape"), data.get("md5")
    if not dtype:
        kind, value = data.get("type"), data.get("value")
        if kind in _KINDS_OF_THEIR_OWN or name.endswith(_PEERS):
            dtype, shape, stats, md5 = _of_their_own(data, name, kind, value, md5)
        else:
            dtype, shape, stats = str(type(value)), "[]", [value] * 4
    if not md5 and crc:  # msprobe's CRC-32 of a value without md5: read in md5 mode only
        md5 = f"{zlib.crc32(str(data.get('value', '')).encode()):08x}"
    req = data.get("requires_grad")
    return Item(name, state, str(dtype), str(shape), N_A if req is None else str(req), stats, str(md5))


_KINDS_OF_THEIR_OWN = {"torch.Size", "slice", "ellipsis", "torch.ProcessGroup"}
_PEERS = (".src", ".dst", ".group_src", ".group_dst")  # a collective's peer: its value as text


def _of_their_own(data: dict[str, Any], name: str, kind: Any, value: Any, md5: Any) -> tuple[Any, Any, list[Any], Any]:
    """A value that is not a tensor, of a kind msprobe writes its own way: dtype, shape, statistics, md5."""
    if kind == "torch.Size":
        return kind, str(value), [data.get(k) for k in ("Max", "Min", "Mean", "Norm")], md5
    if kind == "slice":
        import numpy as np  # only for msprobe's rendering of a slice's shape

        return kind, str(np.shape(np.array(value))), [data.get(k) for k in ("Max", "Min", "Mean", "Norm")], md5
    if kind == "ellipsis":
        return kind, "[]", [value] * 4, md5
    if name.endswith(_PEERS):
        return kind, "[]", [str(value)] * 4, str(value)
    ranks = str(data.get("group_ranks"))  # torch.ProcessGroup
    return kind, "[]", [ranks] * 4, ranks


Leaf = tuple[str, str, str, str, Sequence[Any]]  # a row side's name, dtype, shape, requires_grad, statistics


def _leaves(name: str, data: Any) -> list[Leaf] | None:
    """:meth:`Entry.items` in statistics mode, as the rows of an entry the same on both sides need them
    (:class:`_Pending`), for an entry as most are: a call whose inputs and outputs are lists and keyword dicts of
    tensors and plain values; None for the rest (parameters, gradients, nesting, a None, a kind of value msprobe
    writes its own way). A row side's object costs as much as the rest of its leaf."""
    if type(data) is not dict or "parameters" in data or "parameters_grad" in name:
        return None
    out: list[Leaf] = []
    for part, suffix in _IO:
        if part not in data:
            continue
        value = data[part]
        if type(value) is list:
            members: Any = enumerate(value)
        elif type(value) is dict and type(value.get("type")) is not str and "class_type" not in value:
            members = value.items()
        else:
            return None
        for key, sub in members:
            if type(sub) is not dict or type(kind := sub.get("type")) is not str or "class_type" in sub:
                return None
            req = sub.get("requires_grad")
            req = "True" if req is True else "False" if req is False else N_A if req is None else str(req)
            if dtype := sub.get("dtype"):
                stats = [sub.get("Max"), sub.get("Min"), sub.get("Mean"), sub.get("Norm")]
                out.append((f"{name}{suffix}.{key}", str(dtype), str(sub.get("shape")), req, stats))
            elif kind in _KINDS_OF_THEIR_OWN or (leaf := f"{name}{suffix}.{key}").endswith(_PEERS):
                return None
            else:
                out.append((leaf, str(type(v := sub.get("value"))), "[]", req, [v] * 4))
    return out


def _tensors(data: list[Any], name: str, state: str, out: list[Item]) -> None:
    """:func:`_parse` of a list in statistics mode, its tensors' sides made here (most leaves are tensors in lists:
    a call per leaf costs as much as the leaf); the rest by :func:`_parse`."""
    for i, sub in enumerate(data):
        if (type(sub) is dict and (dtype := sub.get("dtype")) and type(sub.get("type")) is str
                and "class_type" not in sub):  # fmt: skip
            try:  # a tensor's fields, as msprobe writes them in statistics mode: by one call
                shape, mx, mn, mean, norm, req = _TENSOR(sub)
            except KeyError:  # one missing: None, as _gen_item reads it
                shape, req = sub.get("shape"), sub.get("requires_grad")
                mx, mn, mean, norm = sub.get("Max"), sub.get("Min"), sub.get("Mean"), sub.get("Norm")
            req = "True" if req is True else "False" if req is False else N_A if req is None else str(req)
            md5 = "None" if (md5 := sub.get("md5")) is None else str(md5)
            out.append(Item(f"{name}.{i}", state, str(dtype), str(shape), req, [mx, mn, mean, norm], md5))
        else:
            _parse(sub, f"{name}.{i}", state, False, False, out, 1)


def _parse(data: Any, name: str, state: str, grad: bool, crc: bool, out: list[Item], depth: int = 0) -> None:
    """``op_item_parse``: the leaves of one input/output/parameters value, appended to ``out`` (a list, not a
    generator per level: this runs once per leaf of every entry)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{name}: nested deeper than {MAX_DEPTH}")
    if data is None:
        out.append(Item(name, state, N_A, N_A, N_A, ["None"] * 4, N_A))
    elif not data:
        return
    elif isinstance(data, list):
        for i, sub in enumerate(data):
            if type(sub) is dict and type(sub.get("type")) is str and "class_type" not in sub:  # a tensor, mostly
                out.append(_gen_item(sub, name if grad else f"{name}.{i}", state, crc))
            else:
                _parse(sub, name if grad else f"{name}.{i}", state, grad, crc, out, depth + 1)
    elif isinstance(data, dict):
        if data.get("class_type") == "torch.distributed.P2POp":
            tensor = data.get("tensor")
            if isinstance(tensor, dict):
                out.append(_gen_item(tensor, name, state, crc))
            else:
                out.append(Item(name, state, N_A, N_A, N_A, ["None"] * 4, N_A))
        elif isinstance(data.get("type"), str):
            out.append(_gen_item(data, name, state, crc))
        else:
            for key, sub in data.items():
                _parse(sub, f"{name}.{key}", state, grad, crc, out, depth + 1)


def _split(name: str) -> tuple[str, str, str]:
    """``split_data_name_components``: (API without call number, call+direction, direction)."""
    parts = name.split(".")
    last, second = parts[-1], parts[-2] if len(parts) >= 2 else ""
    if "parameters_grad" in (last, second):
        return ".".join(parts[:-1]) if len(parts) > 1 else "", "parameters_grad", "parameters_grad"
    for direction in ("forward", "backward"):
        if direction in (last, second):
            return ".".join(parts[:-2]) if len(parts) > 2 else "", f"{second}.{last}", direction
    return "", "", ""


class Side:
    """One dump.json's entries, with msprobe's backward renumbering (the target's read by :meth:`DumpFile.runs`,
    the bench's by :meth:`DumpFile.following`)."""

    def __init__(self, path: Path) -> None:
        self.dump = DumpFile(path)
        self.backward: dict[str, int] = defaultdict(int)

    def entry(self, name: str, data: Any) -> Entry | None:
        if name.endswith(".forward"):  # API.N.forward, as most are: a key of its own (what the rest gives)
            head = name[:-8]
            if (dot := head.rfind(".")) > 0 and head[dot + 1 :] != "parameters_grad":
                return Entry(name, name, data)
        base, call, direction = _split(name)
        if not base:
            return None
        key = name
        if direction == "backward":
            order = self.backward[base]
            self.backward[base] += 1
            head, _, tail = call.rpartition(".")
            if head.isdigit() or tail.isdigit():
                key = f"{base}.{str(order) if head.isdigit() else head}.{str(order) if tail.isdigit() else tail}"
        return Entry(name, key, data)


_KEY_LINE = re.compile(rb'\n  ("(?:[^"\\\n]|\\.)*"): ')


def entry_keys(path: Path) -> set[str]:
    """The bench's name index: every entry's match key. In msprobe's layout (``json.dump(indent=1)``: the file
    opens ``{`` newline, one space, a key) an entry's name is on a line of its own, two spaces in, and JSON text
    holds no raw newline in a string: the names are read from those lines, without parsing the entries (a
    third of the compare's time when it parsed them); any other layout is parsed."""
    side = Side(path)
    with open_regular(path) as f:
        indent_1 = f.read(4) == b'{\n "'
    if indent_1:
        names = (m.group(1) for chunk in _lines(path) for m in _KEY_LINE.finditer(chunk))
        entries = (side.entry(json.loads(raw) if b"\\" in raw else raw[1:-1].decode(), None) for raw in names)
    else:
        entries = (side.entry(name, None) for batch in side.dump.batches() for name in batch)
    return {e.key for e in entries if e is not None}


def _kind(v: Any) -> str:
    """``CalcStatsDiff.classify`` of one statistic."""
    s = str(v)
    low = s.lower()
    if v is None or low == "nan" or (isinstance(v, float) and math.isnan(v)):
        return "nan"
    if low == "inf":
        return "inf"
    if low == "-inf":
        return "-inf"
    if low not in ("true", "false") and _number(v) is not None:
        return "num"
    if _DEVICE.search(s):
        return "device"
    if s == N_A:
        return "na"
    return "other"


def _number(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    try:
        return float(str(v))
    except ValueError:
        return None


_STATIC = {("nan", t): NAN for t in ("num", "nan", "inf", "-inf")} | {(t, "nan"): NAN for t in ("num", "inf", "-inf")}
_STATIC |= {("inf", "num"): INF, ("inf", "-inf"): INF, ("-inf", "num"): NEG_INF, ("-inf", "inf"): NEG_INF,
            ("num", "inf"): NEG_INF, ("num", "-inf"): INF}  # fmt: skip
_KINDS = ("num", "nan", "inf", "-inf", "device", "na", "other")
_STATIC |= {(a, b): N_A for a in _KINDS for b in _KINDS if "na" in (a, b)}
_STATIC |= {(a, b): DIFF for a in ("device", "other") for b in _KINDS if b != "na"}
_STATIC |= {(b, a): DIFF for a in ("device", "other") for b in _KINDS if b != "na"}
_STATIC[("device", "device")] = N_A


def _diff(npu: Any, bench: Any) -> tuple[str, str]:
    """One statistic's diff and relative error, as ``CalcStatsDiff.calc_summary_diff`` renders them."""
    if npu == bench and type(npu) is type(bench) is float and npu != 0:  # as most statistics of a pair are
        return "0", "0"
    if type(npu) is float and type(bench) is float and npu != bench and npu - npu == 0 == bench - bench:
        d = npu - bench  # two finite floats, as most are: the general path's result without its text tests
        return repr(d), (f"{abs(d / bench * 100)}%" if bench != 0 else INF)
    if str(npu) == str(bench):
        return "0", "0"
    a, b = _kind(npu), _kind(bench)
    if a == b == "num":
        x, y = _number(npu), _number(bench)
        assert x is not None and y is not None
        d = x - y
        return str(d), (f"{abs(d / y * 100)}%" if y != 0 else INF)
    text = _STATIC.get((a, b), N_A)
    return text, text


def _summary(stats: Sequence[Any]) -> Sequence[Any]:
    """``CreateTable.set_summary``: NaN as msprobe shows it ('Nan'), a missing statistic as 'None'."""
    for v in stats:
        if type(v) is not float or v != v:  # else all plain floats, as they mostly are: unchanged
            # msprobe tests str(v).lower() == "nan", which of a JSON value only a NaN or a string can be (a long
            # list's text is costly)
            return [NAN if (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.lower() == "nan")
                    else ("None" if v is None else v) for v in stats]  # fmt: skip
    return stats


def _pct(v: Any) -> float | None:
    """``ApiData.get_min_or_max_value``'s reading of a relative error: only 'x%' texts count."""
    if isinstance(v, str) and v.endswith("%"):
        try:
            return float(v[:-1]) / 100
        except ValueError:
            return 0.0
    return None


def _str2float(v: Any) -> float:
    try:
        return float(str(v).strip("%")) / 100
    except ValueError:
        return 0.0


def _naninf(v: Any) -> bool:
    if type(v) is float:
        return v - v != 0  # NaN or an inf
    if isinstance(v, float):
        return math.isnan(v) or math.isinf(v)
    return isinstance(v, str) and v.strip().lower() in ("inf", "-inf", "nan")


def _judge(rows: list[Row], md5: bool) -> None:
    """msprobe's checkers on one entry's rows (``ApiIndicatorCalculator.calculate``)."""
    inputs = [r for r in rows if ".output." not in r.npu.name]
    outputs = [r for r in rows if ".output." in r.npu.name]
    ignore = ""
    if inputs and len(split := inputs[0].npu.name.split(".")) >= 2:
        ignore = "all" if split[1] in _IGNORE_ALL else "input" if split[1] in _IGNORE_INPUT else ""
    judged = [] if ignore == "all" else outputs if ignore == "input" else inputs + outputs
    if md5:
        for r in judged:
            a, b = r.values[NPU_MD5], r.values[BENCH_MD5]
            if a != b:
                unmatched = a in (N_A, NAN, "") or b in (N_A, NAN, "")
                r.flag(*(("warning", MSG_CRC_WARN) if unmatched else ("error", MSG_CRC_ERR)))
        return
    for r in judged:  # InfNanErrChecker
        if _naninf(r.values[BENCH_MAX]) or _naninf(r.values[BENCH_MIN]):
            continue
        if _naninf(r.values[NPU_MAX]) or _naninf(r.values[NPU_MIN]):
            r.flag("error", MSG_NANINF)
    full = not ignore

    def top(group: list[Row]) -> float:
        return max([0.0, *(p for r in group if (p := _pct(r.values[NORM_REL])) is not None)])

    if full and abs(top(inputs)) < 0.1:  # RelativeErrChecker
        for r in outputs:
            if abs(_str2float(r.values[NORM_REL])) > 0.5:
                r.flag("error", MSG_RELERR)
    for r in judged:  # RequiresGradErrChecker
        if r.bench is not None and r.values[NPU_REQ] != r.values[BENCH_REQ]:
            r.flag("error", MSG_REQGRAD)
    if full:  # ParametersErrChecker
        for r in inputs:
            x = r.values
            if (r.bench is not None and "class" in x[NPU_DTYPE] and "class" in x[BENCH_DTYPE]
                    and x[NPU_SHAPE] == "[]" and x[NPU_MAX] != x[BENCH_MAX]):  # fmt: skip
                r.flag("error", MSG_PARAMS)
    for r in judged:  # DTypeErrChecker
        x = r.values
        if r.bench is None or "qkv" in x[BENCH_NAME] or "gate_up" in x[BENCH_NAME]:
            continue
        if x[NPU_DTYPE] != x[BENCH_DTYPE]:
            r.flag("error", MSG_DTYPE)
    for r in judged:  # ShapeErrChecker
        if r.bench is not None and r.values[NPU_SHAPE] != r.values[BENCH_SHAPE]:
            r.flag("error", MSG_SHAPE)
    if full and outputs:  # RelativeWarnChecker
        into, out = abs(top(inputs)), abs(top(outputs))
        if (into == 0 and out > 0.1) or (into != 0 and out / into > 10):
            outputs[0].flag("warning", MSG_RELWARN)


def _row(npu: Item, bench: Item | None, md5: bool) -> Row:
    """One row."""
    v: list[Any]
    if bench is None:
        v = [npu.name, N_A, npu.dtype, N_A, npu.shape, N_A, npu.req_grad, N_A]
    else:
        v = [npu.name, bench.name, npu.dtype, bench.dtype, npu.shape, bench.shape, npu.req_grad, bench.req_grad]
    if md5:
        v += (npu.md5, N_A if bench is None else bench.md5)
    else:
        mine = _summary(npu.stats)
        theirs = [N_A] * 4 if bench is None else _summary(bench.stats)
        pairs = [_diff(a, b) for a, b in zip(mine, theirs, strict=True)]
        v += [d for d, _ in pairs] + [r for _, r in pairs]
        v += mine
        v += theirs
    v.append(v[NPU_REQ] == v[BENCH_REQ])
    return Row(npu, bench, v, md5)


def _same_dtype(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in _FLOATS)


def _load_stack(path: Path | None) -> dict[str, Any] | None:
    """stack.json (msprobe's stack mode: a ``NPU_Stack_Info`` column when the target's dir holds one); its new
    layout ``{"0": [[api, ...], stack], ...}`` flattened to api -> stack as ``load_stack_json`` does."""
    if path is None or not path.is_file():
        return None
    text = path.read_bytes()
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError:  # NaN, Infinity or an integer beyond 64 bits: the stdlib reads them
        doc = json.loads(text)
    if not isinstance(doc, dict) or not doc.get("0"):
        return doc if isinstance(doc, dict) else {}
    out: dict[str, Any] = {}
    for info in doc.values():
        if isinstance(info, list) and len(info) == 2 and isinstance(info[0], list):
            out.update(dict.fromkeys(info[0], info[1]))
    return out


def _lines(path: Path) -> Iterator[bytes]:
    """A dump.json's bytes in runs of whole lines, each run from a newline to before the next run's: a line's
    leading newline stays with it."""
    carry = b""
    with open_regular(path) as f:
        while chunk := f.read(CHUNK):
            buf = carry + chunk
            cut = max(buf.rfind(b"\n"), 0)
            if cut:
                yield buf[:cut]
            carry = buf[cut:]
            if len(carry) > MAX_VALUE:
                raise ValueError(f"{path}: a line longer than {MAX_VALUE >> 20} MB")
    if carry:
        yield carry


def is_md5(path: Path) -> bool:
    """Whether a dump's statistics carry md5 (msprobe's ``md5_find``: the summary_mode md5 or xor dumps). A dump
    whose text holds no ``"md5"`` has no such key: found by a byte search, the entries parsed only otherwise."""
    with open_regular(path) as f:
        seam = b""
        while (chunk := f.read(CHUNK)) and b'"md5"' not in seam + chunk[:4] and b'"md5"' not in chunk:
            seam = chunk[-4:]
    if not chunk:
        return False
    for batch in DumpFile(path).batches():
        for data in batch.values():
            for value in data.values() if isinstance(data, dict) else ():
                for leaf in value if isinstance(value, list) else [value]:
                    if isinstance(leaf, dict) and "md5" in leaf:
                        return True
    return False


def _quotes_cr() -> bool:
    """Whether csv.writer (QUOTE_MINIMAL, lineterminator newline) quotes a field for a carriage return: Python 3.11
    quotes ',', '"' and the newline only, later versions a carriage return too."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerow(["a\r"])
    return buf.getvalue().startswith('"')


_CR = _quotes_cr()


def _quoted(s: str) -> bool:
    """Whether csv.writer quotes ``s`` (a test per character: a regex search costs 20x more on a stack's cell)."""
    return "," in s or '"' in s or "\n" in s or (_CR and "\r" in s)


def _cell(s: str) -> str:
    """One text field as csv.writer writes it."""
    return '"' + s.replace('"', '""') + '"' if _quoted(s) else s


@functools.lru_cache(maxsize=4096)
def _kept_cell(s: str) -> str:
    """:func:`_cell` of a dtype, shape or requires_grad: few distinct ones, each on many rows."""
    return _cell(s)


@functools.lru_cache(maxsize=512)
def _frames_cell(frames: tuple[Any, ...]) -> str:
    return _fmt(list(frames))


def _stack_cell(stack: Any) -> str:
    """The cell of one call stack (a list of frames' texts, a few KB: its str() costs more than the rows it goes
    with); the ranks and steps of a stage share their stacks, so a stack's cell is kept by its frames."""
    if type(stack) is list:
        with contextlib.suppress(TypeError):  # a frame that is not hashable
            return _frames_cell(tuple(stack))
    return _fmt(stack)


def _cells(name: str, dtype: str, req: str) -> tuple[str, str, str]:
    """A row side's name, dtype and requires_grad cells: one search for the three, as they mostly need none."""
    if not _quoted(name + dtype + req):
        return name, dtype, req
    return _cell(name), _cell(dtype), _cell(req)


def _fmt(v: Any) -> str:
    """One value as csv.writer writes it (str() of a number, bool or list, repr of a float, None empty), an inf
    as msprobe writes it (' inf': only statistics can be floats)."""
    if type(v) is str:
        return _cell(v)
    if type(v) is float:
        return repr(v) if v - v == 0 or v != v else _text(v)
    if type(v) is int or type(v) is bool:  # no text of theirs is quoted
        return str(v)
    return "" if v is None else _cell(str(v))


def _fmt_each(values: list[Any]) -> list[str]:
    """:func:`_fmt` of each value, once per object: a leaf that is not a tensor (a list argument, a number) has
    one value for its four statistics, and a long list's text is most of its row."""
    texts: dict[int, str] = {}
    return [texts[id(v)] if id(v) in texts else texts.setdefault(id(v), _fmt(v)) for v in values]


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


def _float_texts(values: list[Any], other: Callable[[Any], str] = _fmt) -> list[str]:
    """Each value's cell (:func:`_fmt`; ``other``: the cell of a value that is not a finite number), by one orjson
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


def _stats_cells(values: list[Any], other: Callable[[Any], str] = _fmt) -> list[str]:
    """Statistics' cells four to a group (max, min, mean, norm of one row side), joined."""
    t = _float_texts(values, other)
    return [f"{a},{b},{c},{d}" for a, b, c, d in zip(t[0::4], t[1::4], t[2::4], t[3::4], strict=True)]


def _finite_cells(groups: list[Sequence[float]]) -> list[str]:
    """:func:`_group_cells` of finite floats (no word to replace, no group alone): one orjson call, its text split
    between the groups."""
    return _repr_numbers(orjson.dumps(groups).decode())[2:-2].split("],[")


def _each_cells(groups: list[Sequence[Any]], other: Callable[[Any], str]) -> list[str]:
    """:func:`_group_cells` value by value (:func:`_float_texts`)."""
    return _stats_cells([v for g in groups for v in g], other)


_WORDS = (("null", None), ("true", True), ("false", False))  # orjson's words outside strings, and their values
_BLANK = (None,) * 4  # a group written on its own, in the run's place


def _group_cells(groups: list[Sequence[Any]], other: Callable[[Any], str] = _fmt) -> list[str]:
    """Each group's four cells joined (:func:`_stats_cells`; ``other`` as in :func:`_float_texts`), by one orjson
    call on the groups, its text split between them: numbers as they are, bools and nulls made their cells by one
    replace each (nulls where all are None: NaN and the infs are written null too, else each group with a null on
    its own). A group holding another value (a string, a list) is written on its own."""
    if not groups:
        return []
    with contextlib.suppress(orjson.JSONEncodeError):  # an integer beyond 64 bits: below
        text, k = orjson.dumps(groups).decode(), len(groups)
        if '"' in text or "{" in text or text.count(",") != 4 * k - 1 or text.count("[") != k + 1:
            odd = [not _SIMPLE.issuperset(map(type, g)) for g in groups]  # what orjson writes with no comma inside
            parts = _group_cells([_BLANK if o else g for g, o in zip(groups, odd, strict=True)], other)
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


def _named(it: Item, plain: bool) -> tuple[str, str, str]:
    """A row side's name, dtype and requires_grad cells (``plain``: known to need no quoting)."""
    return (it.name, it.dtype, it.req_grad) if plain else (_cell(it.name), _cell(it.dtype), _cell(it.req_grad))


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
    if (into < 0.1 and out > 0.5) or (into == 0 and out > 0.1) or (into != 0 and out / into > 10):
        return None  # RelativeErrChecker, RelativeWarnChecker: those outputs' rows may not pass
    cells = _finite_cells([g for it, bt in zip(items, theirs, strict=True) for g in (it.stats, bt.stats)])
    text += "".join(bt.name for bt in theirs)
    plain = not _quoted(text)
    lines = []
    end = "\n" if stack is None else f",{stack}\n"
    for i, (it, bt) in enumerate(zip(items, theirs, strict=True)):
        n, d, r = _named(it, plain)
        bn = bt.name if plain else _cell(bt.name)
        s = _kept_cell(it.shape)
        lines.append(f"{n},{bn},{d},{d},{s},{s},{r},{r},{diffs[i]},{cells[2 * i]},{cells[2 * i + 1]},True,pass,[]{end}")
        end = end if stack is None else f",{N_A}\n"
    return lines


_NUMBER = {int, float}
_FLOAT = {float}


class _Numbers:
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


def _ints_as_floats(path: Path, columns: set[int]) -> None:
    """The CSV at ``path`` with the ints of ``columns`` (:class:`_Numbers`) written as pandas writes a float64
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


class _Pending:
    """The CSV lines not yet written, in order. The rows of entries the same on both sides (:func:`_same`) are held
    as their leaves and rendered a run at a time: every diff is 0, both sides' cells are the same and no checker
    can flag a row, so each line follows from its leaf alone, and one orjson call writes the statistics of the
    whole run. Other lines are kept as text after the held row they follow, so that a run goes on across the
    entries that differ. A line's end (its stack cell, a few KB on an entry's first row) is kept apart from the
    rest, so that it is copied once, by the join that writes it."""

    def __init__(self, rest: str, numbers: _Numbers) -> None:
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
        cells = _group_cells(groups, _summary_cell)
        if _quoted("".join([f"{n}{d}{r}" for n, d, _, r, _ in leaves])):  # none quoted, as usual
            leaves = [(_cell(n), _cell(d), s, _cell(r), st) for n, d, s, r, st in leaves]
        out = [""] * (2 * len(cells))
        shapes = [_kept_cell(leaf[2]) for leaf in leaves]
        out[0::2] = [f"{n},{n},{d},{d},{s},{s},{r},{r},{_ZEROS},{c},{c},True,pass,[]"
                     for (n, d, _, r, _), s, c in zip(leaves, shapes, cells, strict=True)]  # fmt: skip
        out[1::2] = self.ends
        out = self.first + out
        self.first, self.leaves, self.ends, self.count = [], [], [], 0
        return out


def _summary_cell(v: Any) -> str:
    """The cell of one statistic that is not a finite number, as :func:`_summary` shows it."""
    return _fmt(_summary([v])[0])


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


def _line(r: Row, stack: str | None, mine: str, theirs: str) -> str:
    """One judged row's CSV line (``mine``, ``theirs``: the statistics' cells, from :func:`_stats_cells`)."""
    v = r.values
    if r.md5:
        cells = ",".join(map(_fmt, v))
    else:  # names, dtypes, shapes, requires_grad; the diffs' texts (no quoting: numbers, "%", "N/A", ...); the
        # statistics; consistency
        (nn, nd, nr), (bn, bd, br) = _cells(v[0], v[2], v[6]), _cells(v[1], v[3], v[7])
        cells = f"{nn},{bn},{nd},{bd},{_kept_cell(v[4])},{_kept_cell(v[5])},{nr},{br},{','.join(v[8:NPU_MAX])},"
        cells += f"{mine},{theirs},{v[BENCH_MAX + 4]}"
    messages = _cell(json.dumps(r.messages)) if r.messages else "[]"
    return f"{cells},{r.result},{messages}\n" if stack is None else f"{cells},{r.result},{messages},{stack}\n"


def compare_files(npu_path: Path, bench_path: Path, csv_path: Path | None, on_row: Callable[[Row], None]) -> int:
    """Compare the target's dump.json (NPU, head) against the bench's (base): each row that does not pass goes,
    judged, to ``on_row`` (a pass is only counted: most rows pass), and every row (with ``csv_path``) to
    msprobe's CSV layout; like msprobe, no CSV where either side has no entry. Returns the rows. The mode
    (statistics or md5) is the target's, as msprobe reads it."""
    md5 = is_md5(npu_path)
    stack = _load_stack(npu_path.parent / "stack.json")
    header = (MD5_HEADER if md5 else SUMMARY_HEADER) + ([STACK] if stack is not None else [])
    bench = _Bench(bench_path)
    tmp = csv_path.with_name(csv_path.name + ".part") if csv_path else None
    with tmp.open("w", newline="") if tmp else contextlib.nullcontext() as out:
        if out is not None:
            csv.writer(out, lineterminator="\n").writerow(header)
        n = _rows(npu_path, bench, md5, stack, out.write if out else None, on_row, numbers := _Numbers())
    if tmp is not None and csv_path is not None:
        if n and bench.read_any:
            if not md5 and (floats := numbers.as_floats()):
                _ints_as_floats(tmp, floats)
            tmp.replace(csv_path)
        else:
            tmp.unlink()
    return n


class _Bench:
    """The bench's entries, read as the target's ask for them. Where both list their APIs in one order, as two runs
    of one code do, each asked for is the next, and a run of the target's entries the same text as the bench's next
    is read past (:meth:`follows`: neither split nor parsed here). At the first asked for that is not the next, the
    name index (:func:`entry_keys`, a scan of the whole file) is built, to tell an entry the bench lacks (none read
    for it) from one further on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.side = Side(path)
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
                if (entry := self.side.entry(name, _UNREAD if unread else data)) is not None:
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
            self.keys = entry_keys(self.path)
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
    on_row: Callable[[Row], None],
    numbers: _Numbers,
) -> list[str]:
    """The lines of an entry through rows and checkers, each row that does not pass to ``on_row`` (``info``: the
    entry's stack cell)."""
    theirs = {it.name.replace(match.name, "", 1): it for it in match.items(md5)} if match is not None else {}
    rows = []
    for item in items:
        b_item = theirs.get(item.name.replace(entry.name, "", 1))
        if b_item is not None and not _same_dtype(item.dtype, b_item.dtype):
            b_item = None
        rows.append(_row(item, b_item, md5))
    _judge(rows, md5)
    lines = []
    stats = []
    if not md5:
        values = [x for r in rows for x in r.values[NPU_MAX : BENCH_MAX + 4]]
        numbers.note(values, 8)
        stats = _stats_cells(values)
    for i, r in enumerate(rows):
        if r.result != "pass":
            on_row(r)
        lines.append(_line(r, info, *stats[2 * i : 2 * i + 2]) if stats else _line(r, info, "", ""))
        if info is not None:
            info = N_A
    return lines


def _rows(
    npu_path: Path,
    bench: _Bench,
    md5: bool,
    stack: dict[str, Any] | None,
    write: Callable[[str], Any] | None,
    on_row: Callable[[Row], None],
    numbers: _Numbers,
) -> int:
    n = 0
    stack_texts: dict[int, tuple[str, str]] = {}  # by the id of a stack in ``stack``, its cell and a line's end
    info, end = None, "\n"
    pending = _Pending("\n" if stack is None else f",{N_A}\n", numbers)
    head = Side(npu_path)
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
                    cell = _stack_cell(where)
                    known = stack_texts[id(where)] = cell, f",{cell}\n"
                info, end = known
            items = None
            if match is not None and not md5 and (same_run or _same(entry, match)):  # the same on both sides
                if (leaves := _leaves(entry.name, entry.data)) is None:
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
