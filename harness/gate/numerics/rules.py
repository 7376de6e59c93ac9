"""msprobe 26.2's rules for one row and one entry: each statistic's diff and relative error (``CalcStatsDiff``:
``0`` when equal as text, NaN -> ``Nan``, Inf rules, ``N/A``, ``Diff`` for non-numbers), requires_grad consistency,
and the checkers (``STATISTICS_CHECKERS`` / ``MD5_CHECKERS``, per entry): NaN/Inf in the target's Max or Min where
the bench has none, an output's norm relative error past :data:`OUTPUT_ERROR` while every input's is under
:data:`QUIET_INPUTS`, requires_grad, scalar parameters, dtype, shape: error; the outputs' norm relative error
:data:`WARN_RATIO` times the inputs' (or past :data:`WARN_ON_EQUAL_INPUTS` on equal inputs): warning on the first
output; ``to``/``empty``/... entries never judged, collectives' inputs not. md5: a differing CRC-32 error,
unmatched warning. A dtype change outside the float groups (``DTYPE_MATCH_GROUPS``) counts as unmatched.

The relative-error thresholds are defined here once and read through :func:`output_error` and
:func:`output_warning`, by the checkers and by the compare's fast path for entries whose every row passes."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.gate.numerics.rows import Item
from harness.gate.numerics.table import (
    BENCH_DTYPE,
    BENCH_MAX,
    BENCH_MD5,
    BENCH_MIN,
    BENCH_NAME,
    BENCH_REQ,
    BENCH_SHAPE,
    DIFF,
    INF,
    MD5_HEADER,
    N_A,
    NAN,
    NEG_INF,
    NORM_REL,
    NPU_DTYPE,
    NPU_MAX,
    NPU_MD5,
    NPU_MIN,
    NPU_REQ,
    NPU_SHAPE,
    SUMMARY_HEADER,
)

# msprobe's thresholds on the norm relative error (RelativeErrChecker, RelativeWarnChecker), as fractions
QUIET_INPUTS = 0.1  # every input's under this: an output's past OUTPUT_ERROR is an error
OUTPUT_ERROR = 0.5
WARN_ON_EQUAL_INPUTS = 0.1  # the inputs' all 0: the outputs' largest past this is a warning
WARN_RATIO = 10  # else the outputs' largest this many times the inputs' largest


def output_error(inputs: float, output: float) -> bool:
    """RelativeErrChecker: whether an output of norm relative error ``output`` is an error, the inputs' largest
    being ``inputs``."""
    return inputs < QUIET_INPUTS and output > OUTPUT_ERROR


def output_warning(inputs: float, outputs: float) -> bool:
    """RelativeWarnChecker: whether the outputs' largest norm relative error ``outputs`` warns, the inputs' largest
    being ``inputs``."""
    return (inputs == 0 and outputs > WARN_ON_EQUAL_INPUTS) or (inputs != 0 and outputs / inputs > WARN_RATIO)


_FLOATS = ({"Float16", "Float32", "Float64", "BFloat16"},
           {"torch.float16", "torch.float32", "torch.float64", "torch.bfloat16"})  # fmt: skip
_IGNORE_ALL = {"empty", "empty_like", "numpy", "to", "__setitem__", "empty_with_format", "new_empty_strided",
               "new_empty", "empty_strided"}  # fmt: skip
_IGNORE_INPUT = {"_reduce_scatter_base", "_all_gather_base", "all_to_all_single", "batch_isend_irecv"}
_DEVICE = re.compile("npu|cpu|cuda", re.IGNORECASE)
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


@dataclass
class CsvRow:
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


def summary_stats(stats: Sequence[Any]) -> Sequence[Any]:
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


def judge_entry(rows: list[CsvRow], md5: bool) -> None:
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

    def top(group: list[CsvRow]) -> float:
        return max([0.0, *(p for r in group if (p := _pct(r.values[NORM_REL])) is not None)])

    if full:  # RelativeErrChecker
        into = abs(top(inputs))
        for r in outputs:
            if output_error(into, abs(_str2float(r.values[NORM_REL]))):
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
        if output_warning(into, out):
            outputs[0].flag("warning", MSG_RELWARN)


def make_row(npu: Item, bench: Item | None, md5: bool) -> CsvRow:
    """One row."""
    v: list[Any]
    if bench is None:
        v = [npu.name, N_A, npu.dtype, N_A, npu.shape, N_A, npu.req_grad, N_A]
    else:
        v = [npu.name, bench.name, npu.dtype, bench.dtype, npu.shape, bench.shape, npu.req_grad, bench.req_grad]
    if md5:
        v += (npu.md5, N_A if bench is None else bench.md5)
    else:
        mine = summary_stats(npu.stats)
        theirs = [N_A] * 4 if bench is None else summary_stats(bench.stats)
        pairs = [_diff(a, b) for a, b in zip(mine, theirs, strict=True)]
        v += [d for d, _ in pairs] + [r for _, r in pairs]
        v += mine
        v += theirs
    v.append(v[NPU_REQ] == v[BENCH_REQ])
    return CsvRow(npu, bench, v, md5)


def same_dtype(a: str, b: str) -> bool:
    return a == b or any(a in g and b in g for g in _FLOATS)
