"""Contents: every dump.json parses and fits the config, the level, the stage and the expectations."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from itertools import repeat
from operator import contains
from pathlib import Path
from typing import Any

from harness.artifacts import figures as fig
from harness.artifacts.dumpfile import DumpFile, NotRegularFile
from harness.artifacts.reader import DumpDir, iter_tensors
from harness.checks.base import CheckContext, CheckResult
from harness.scenario.stages import NO_GRAD_STAGES

API_PREFIXES = ("Functional.", "Tensor.", "Torch.", "Distributed.", "NPU.", "Aten.", "VF.")
MODULE_PREFIX = "Module."
STATS = ("Max", "Min", "Mean", "Norm")
TENSOR_TYPES = frozenset(("torch.Tensor", "torch.distributed.tensor.DTensor"))  # a set lookup, not an endswith
_CONTAINERS = (dict, list)
MAX_LINES_PER_KIND = 3  # keep failures readable: a few examples, then a count


def _is_backward(name: str) -> bool:
    return ".backward" in name or name.endswith("parameters_grad")


def _any_backward(names: Collection[str], grads: bool = True) -> bool:
    """Whether any name is a backward entry (``_is_backward``; without ``grads``: ``.backward`` only), in C."""
    return any(map(contains, names, repeat(".backward"))) or (
        grads and any(map(str.endswith, names, repeat("parameters_grad")))
    )


def _nonfinite(v: Any) -> bool:
    if isinstance(v, float):
        return not math.isfinite(v)
    return isinstance(v, str) and v.strip().lower() in {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}


class _Problems:
    """Problems by kind, in the order kinds first appear, as a few example lines and a count: a thousand bad
    tensors read as three examples and a count, and memory does not grow with the dump."""

    def __init__(self) -> None:
        self.examples: dict[str, list[str]] = {}
        self.counts: Counter[str] = Counter()

    def add(self, kind: str, line: str) -> None:
        lines = self.examples.setdefault(kind, [])
        if len(lines) < MAX_LINES_PER_KIND:
            lines.append(line)
        self.counts[kind] += 1

    def merge(self, other: _Problems) -> None:
        for kind, lines in other.examples.items():
            mine = self.examples.setdefault(kind, [])
            mine += lines[: MAX_LINES_PER_KIND - len(mine)]
            self.counts[kind] += other.counts[kind]

    def lines(self) -> list[str]:
        out = []
        for kind, lines in self.examples.items():
            out += lines
            if self.counts[kind] > MAX_LINES_PER_KIND:
                out.append(f"  ... and {self.counts[kind] - MAX_LINES_PER_KIND} more like the above")
        return out


@dataclass
class _Names:
    """What the name checks need of a dump, gathered a run of entries at a time: counts and first examples per
    kind, and the required patterns no entry has matched yet. Counting and matching run in C (``map`` over the
    names): a Python call per name was about a tenth of the check's time under cProfile."""

    unmatched: list[re.Pattern[str]]
    entries: int = 0
    modules: int = 0
    apis: int = 0
    first: dict[str, str] = field(default_factory=dict)  # kind -> first name of that kind

    def add(self, names: Collection[str]) -> None:
        apis = sum(map(str.startswith, names, repeat(API_PREFIXES)))
        modules = sum(map(str.startswith, names, repeat(MODULE_PREFIX)))
        self.entries, self.apis, self.modules = self.entries + len(names), self.apis + apis, self.modules + modules
        first = self.first
        if apis and "api" not in first:
            first["api"] = next(n for n in names if n.startswith(API_PREFIXES))
        if modules and "module" not in first:
            first["module"] = next(n for n in names if n.startswith(MODULE_PREFIX))
        if apis + modules < len(names) and "other" not in first:
            first["other"] = next(n for n in names if not n.startswith((*API_PREFIXES, MODULE_PREFIX)))
        if "backward" not in first and _any_backward(names):
            first["backward"] = next(filter(_is_backward, names))
        if self.unmatched:
            self.unmatched = [p for p in self.unmatched if not any(map(p.search, names))]


def _check_names(rel: str, names: _Names, level: str, stage: str, data_mode: Iterable[str], out: _Problems) -> None:
    first = names.first
    if "other" in first:
        out.add("name", f"{rel}: entries of unknown kind, e.g. {first['other']!r}")
    if level == "L0" and names.apis:
        out.add("name", f"{rel}: level L0 holds API entries (e.g. {first['api']!r}); expected Module.* only")
    if level == "L1" and names.modules:
        out.add("name", f"{rel}: level L1 holds module entries (e.g. {first['module']!r}); expected API entries only")
    if level == "mix" and not (names.modules and names.apis):
        out.add("name", f"{rel}: level mix needs both Module.* and API entries ({names.modules} / {names.apis})")
    if stage in NO_GRAD_STAGES and "backward" in first:
        out.add("grad", f"{rel}: no-grad stage {stage} holds backward entries (e.g. {first['backward']!r})")
    wants_backward = bool({"all", "backward"} & set(data_mode))
    if stage not in NO_GRAD_STAGES and wants_backward and names.entries and "backward" not in first:
        out.add("grad", f"{rel}: update stage {stage} holds no backward entries")


@dataclass(frozen=True)
class _TensorRules:
    summary_mode: str
    task: str
    tensor_dir: Path
    nonfinite_ok: list[str]

    @property
    def statistics_only(self) -> bool:
        """Nothing but the statistics to check: the plain case can skip the full check."""
        return self.summary_mode != "md5" and self.task != "tensor"


def _plain(t: dict[str, Any]) -> bool:
    """The common tensor, settled in a few comparisons: dtype and shape, finite statistics in order. Anything
    else (NaN, strings, missing keys: the comparisons fail or raise) takes the full check, which words it."""
    try:
        return (
            -math.inf < t["Min"] <= t["Mean"] <= t["Max"] < math.inf
            and 0.0 <= t["Norm"] < math.inf
            and "dtype" in t
            and "shape" in t
        )
    except (KeyError, TypeError):
        return False


def _check_tensor(
    rel: str, name: str, where: str, t: dict[str, Any], rules: _TensorRules, out: _Problems, found: _Problems
) -> None:
    label = f"{rel}: {name} {where}"
    if "dtype" not in t or "shape" not in t:
        out.add("meta", f"{label}: tensor without dtype/shape")
    if rules.summary_mode == "md5":
        if "md5" not in t:
            out.add("md5", f"{label}: summary_mode md5 but no md5")
        return
    stats = {k: t.get(k) for k in STATS}
    if any(_nonfinite(v) for v in stats.values()):
        tolerated = any(re.search(p, name) for p in rules.nonfinite_ok)
        found.add("tolerated" if tolerated else "nonfinite", f"{label}: non-finite statistics {stats}")
        return
    mx, mn, mean, norm = (stats[k] for k in STATS)
    if isinstance(mx, int | float) and isinstance(mn, int | float) and mn > mx:
        out.add("stats", f"{label}: Min {mn} > Max {mx}")
    if isinstance(mx, int | float) and isinstance(mn, int | float) and isinstance(mean, int | float):
        tol = 1e-5 * max(1.0, abs(mx), abs(mn))
        if not (mn - tol <= mean <= mx + tol):
            out.add("stats", f"{label}: Mean {mean} outside [Min {mn}, Max {mx}]")
    single = isinstance(t.get("shape"), list) and math.prod(t["shape"]) == 1
    if isinstance(norm, int | float) and norm < 0 and not single:  # msprobe reports a scalar's value as its Norm
        out.add("stats", f"{label}: Norm {norm} < 0")
    data_name = t.get("data_name")
    if rules.task == "tensor" and data_name and not (rules.tensor_dir / data_name).is_file():
        out.add("tensor", f"{label}: tensor file dump_tensor_data/{data_name} is missing")


@dataclass
class _Findings:
    """One dump's findings, kept apart until it has parsed to the end: a file that turns out not to be JSON
    is one parse problem, whatever its first entries held."""

    names: _Names
    head: _Problems = field(default_factory=_Problems)  # header, counts, names: reported before the tensors
    tensors: _Problems = field(default_factory=_Problems)
    nonfinite: _Problems = field(default_factory=_Problems)  # kinds "nonfinite" and "tolerated"
    tensor_count: int = 0
    has_data: bool = False
    backward_nonzero: bool = False  # a backward entry's tensor with Norm > 0 was seen


def _read_dump(ctx: CheckContext, d: DumpDir, rel: str) -> _Findings:
    """Stream one dump.json through every check: its one read (``CheckContext.reads``, which keeps what it found of
    the dump for every later reader); raises what ``DumpFile.batches`` raises."""
    s, pd = ctx.scenario, ctx.scenario.precision_debugger
    rules = _TensorRules(pd.summary_mode, pd.task, Path(d.path) / "dump_tensor_data", s.expect.nonfinite_ok)
    dump = ctx.reads.dump(d.path / "dump.json")
    f = _Findings(_Names([re.compile(p) for p in s.expect.required_patterns.get(d.stage, [])]))  # type: ignore[call-overload]
    f.tensor_count = _check_entries(rel, dump, rules, f)
    for key, want in (("task", pd.task), ("level", pd.level), ("framework", "pytorch")):
        if dump.header.get(key) != want:
            f.head.add("header", f"{rel}: {key} is {dump.header.get(key)!r}, expected {want!r}")
    f.has_data = dump.has_data
    if not dump.has_data:
        f.head.add("parse", f"{rel}: no 'data' mapping")
        return f
    n = f.names.entries
    if n < s.expect.min_entries:
        f.head.add("count", f"{rel}: {n} entries, expected at least {s.expect.min_entries}")
    if s.expect.max_entries is not None and n > s.expect.max_entries:
        f.head.add("count", f"{rel}: {n} entries, expected at most {s.expect.max_entries}")
    _check_names(rel, f.names, pd.level, d.stage, pd.data_mode, f.head)
    for pattern in f.names.unmatched:
        f.head.add("pattern", f"{rel}: no entry matches required pattern {pattern.pattern!r}")
    judged = s.expect.nonzero_backward and rules.statistics_only and d.stage not in NO_GRAD_STAGES
    if judged and not f.backward_nonzero:
        f.head.add(
            "grad",
            f"{rel}: no backward tensor with a non-zero Norm (a zero reward or advantage zeroes every gradient): "
            "this dump cannot show a broken backward",
        )
    return f


def _check_entries(rel: str, dump: DumpFile, rules: _TensorRules, f: _Findings) -> int:
    """The per-entry part, the hot loop, a run of entries at a time: names noted, every tensor checked; returns
    the tensor count. A run of plain entries (nearly all of them) costs one ``_plain_tensors`` call per entry
    and no other Python step per entry."""
    fast, tensors = rules.statistics_only, 0
    for batch in dump.batches():
        f.names.add(batch)
        if not f.backward_nonzero and _any_backward(batch, grads=False):
            f.backward_nonzero = any(
                _positive(t.get("Norm")) for name in batch if ".backward" in name for _, t in iter_tensors(batch[name])
            )
        counts = list(map(_plain_tensors, batch.values())) if fast else [-1] * len(batch)
        if min(counts, default=0) >= 0:
            tensors += sum(counts)
            continue
        for (name, entry), n in zip(batch.items(), counts, strict=True):
            if n >= 0:
                tensors += n
                continue
            for where, t in iter_tensors(entry):
                tensors += 1
                if not (fast and _plain(t)):
                    _check_tensor(rel, name, where, t, rules, f.tensors, f.nonfinite)
    return tensors


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def _plain_tensors(entry: Any) -> int:
    """How many tensors an entry of msprobe's usual shape holds (``{"input_args": [tensor, ...], "input_kwargs":
    {"k": tensor}, "output": [...]}``) when all are plain; -1 for any other shape or tensor, which the general
    walk and the full check then take. One flat loop, no calls per tensor: this is the hot loop of a check
    that reads hundreds of MB, and function calls per tensor were most of its time."""
    if type(entry) is not dict or "type" in entry:
        return -1
    n = 0
    for group in entry.values():
        kind = type(group)
        items = group if kind is list else group.values() if kind is dict and "type" not in group else (group,)
        for v in items:
            if type(v) is not dict:
                if type(v) is list:
                    return -1
                continue  # a scalar: no tensor in it
            t = v.get("type")
            if type(t) is str and (t in TENSOR_TYPES or t.endswith("Tensor")):
                try:  # _plain, inlined
                    if not (
                        -math.inf < v["Min"] <= v["Mean"] <= v["Max"] < math.inf
                        and 0.0 <= v["Norm"] < math.inf
                        and "dtype" in v
                        and "shape" in v
                    ):
                        return -1
                except (KeyError, TypeError):
                    return -1
                n += 1
            elif any(map(isinstance, v.values(), repeat(_CONTAINERS))):
                return -1
    return n


def _check_dump(ctx: CheckContext, d: DumpDir, out: _Problems, counts: Counter, found: _Problems) -> None:
    rel = d.path.relative_to(ctx.tree.root).as_posix() + "/dump.json" + ctx.on_node(d.rank)
    try:
        f = _read_dump(ctx, d, rel)
    except (FileNotFoundError, NotRegularFile):
        return  # the layout check reports missing files and FIFOs, devices or links in their place
    except ValueError as exc:
        out.add("parse", f"{rel}: not valid JSON (truncated? the run may have crashed before stop()): {exc}")
        return
    out.merge(f.head)
    out.merge(f.tensors)
    found.merge(f.nonfinite)
    if f.has_data:
        counts[d.stage] += f.names.entries
    counts["tensors"] += f.tensor_count


def check_contents(ctx: CheckContext) -> CheckResult:
    res = CheckResult("contents")
    out, counts, found = _Problems(), Counter[str](), _Problems()
    dumps = ctx.dumps_of(set(ctx.scenario.expected_stages) - ctx.scenario.gap_stages)
    for d in dumps:
        _check_dump(ctx, d, out, counts, found)
    res.problems = out.lines()
    for kind, target in (("nonfinite", res.problems), ("tolerated", res.notes)):
        target += found.examples.get(kind, [])
        if found.counts[kind] > MAX_LINES_PER_KIND:
            target.append(f"  ... {found.counts[kind]} tensors with NaN/Inf statistics in all ({kind})")
    if not dumps:
        res.problems.append("no dump.json to check (see the layout check)")
    res.figures["contents.dumps"] = len(dumps)
    res.figures["contents.tensors"] = counts.pop("tensors", 0)
    res.figures["contents.nonfinite_tensors"] = found.counts["nonfinite"]
    res.figures["contents.nonfinite_tolerated"] = found.counts["tolerated"]
    res.summary = f"{len(dumps)} dumps, {sum(counts.values())} entries, {found.counts['nonfinite']} non-finite"
    for stage, n in sorted(counts.items()):
        res.figures[fig.contents_entries(stage)] = n
    return res
