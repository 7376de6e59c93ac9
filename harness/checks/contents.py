"""Contents: every dump.json parses and fits the config, the level, the stage and the expectations."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness import figures as fig
from harness.artifacts import DumpDir, iter_tensors, load_dump_json
from harness.checks.base import CheckContext, CheckResult
from harness.stages import NO_GRAD_STAGES

API_PREFIXES = ("Functional.", "Tensor.", "Torch.", "Distributed.", "NPU.", "Aten.", "VF.")
MODULE_PREFIX = "Module."
STATS = ("Max", "Min", "Mean", "Norm")
MAX_LINES_PER_KIND = 3  # keep failures readable: a few examples, then a count


def _is_backward(name: str) -> bool:
    return ".backward" in name or name.endswith("parameters_grad")


def _nonfinite(v: Any) -> bool:
    if isinstance(v, float):
        return not math.isfinite(v)
    return isinstance(v, str) and v.strip().lower() in {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}


class _Problems:
    """Collects problems by kind so that a thousand bad tensors read as three examples and a count."""

    def __init__(self) -> None:
        self.by_kind: dict[str, list[str]] = {}

    def add(self, kind: str, line: str) -> None:
        self.by_kind.setdefault(kind, []).append(line)

    def lines(self) -> list[str]:
        out = []
        for lines in self.by_kind.values():
            out += lines[:MAX_LINES_PER_KIND]
            if len(lines) > MAX_LINES_PER_KIND:
                out.append(f"  ... and {len(lines) - MAX_LINES_PER_KIND} more like the above")
        return out


def _check_names(rel: str, names: list[str], level: str, stage: str, data_mode: Iterable[str], out: _Problems) -> None:
    modules = [n for n in names if n.startswith(MODULE_PREFIX)]
    apis = [n for n in names if n.startswith(API_PREFIXES)]
    others = [n for n in names if n not in set(modules) | set(apis)]
    if others:
        out.add("name", f"{rel}: entries of unknown kind, e.g. {others[0]!r}")
    if level == "L0" and apis:
        out.add("name", f"{rel}: level L0 holds API entries (e.g. {apis[0]!r}); expected Module.* only")
    if level == "L1" and modules:
        out.add("name", f"{rel}: level L1 holds module entries (e.g. {modules[0]!r}); expected API entries only")
    if level == "mix" and not (modules and apis):
        out.add("name", f"{rel}: level mix needs both Module.* and API entries ({len(modules)} / {len(apis)})")
    backward = [n for n in names if _is_backward(n)]
    if stage in NO_GRAD_STAGES and backward:
        out.add("grad", f"{rel}: no-grad stage {stage} holds backward entries (e.g. {backward[0]!r})")
    wants_backward = bool({"all", "backward"} & set(data_mode))
    if stage not in NO_GRAD_STAGES and wants_backward and names and not backward:
        out.add("grad", f"{rel}: update stage {stage} holds no backward entries")


def _check_tensor(rel: str, name: str, where: str, t: dict[str, Any], ctx: dict[str, Any], out: _Problems) -> None:
    label = f"{rel}: {name} {where}"
    if "dtype" not in t or "shape" not in t:
        out.add("meta", f"{label}: tensor without dtype/shape")
    if ctx["summary_mode"] == "md5":
        if "md5" not in t:
            out.add("md5", f"{label}: summary_mode md5 but no md5")
        return
    stats = {k: t.get(k) for k in STATS}
    if any(_nonfinite(v) for v in stats.values()):
        tolerated = any(re.search(p, name) for p in ctx["nonfinite_ok"])
        ctx["tolerated" if tolerated else "nonfinite"].append(f"{label}: non-finite statistics {stats}")
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
    if ctx["task"] == "tensor" and data_name and not (ctx["tensor_dir"] / data_name).is_file():
        out.add("tensor", f"{label}: tensor file dump_tensor_data/{data_name} is missing")


def _check_dump(ctx: CheckContext, d: DumpDir, out: _Problems, counts: Counter, found: dict[str, list[str]]) -> None:
    s, pd = ctx.scenario, ctx.scenario.precision_debugger
    rel = d.path.relative_to(ctx.tree.root).as_posix() + "/dump.json"
    try:
        dump = load_dump_json(d.path / "dump.json")
    except FileNotFoundError:
        return  # the layout check reports missing files
    except ValueError as exc:
        out.add("parse", f"{rel}: not valid JSON (truncated? the run may have crashed before stop()): {exc}")
        return
    for key, want in (("task", pd.task), ("level", pd.level), ("framework", "pytorch")):
        if dump.get(key) != want:
            out.add("header", f"{rel}: {key} is {dump.get(key)!r}, expected {want!r}")
    data = dump.get("data")
    if not isinstance(data, dict):
        out.add("parse", f"{rel}: no 'data' mapping")
        return
    names = list(data)
    counts[d.stage] += len(names)
    if len(names) < s.expect.min_entries:
        out.add("count", f"{rel}: {len(names)} entries, expected at least {s.expect.min_entries}")
    if s.expect.max_entries is not None and len(names) > s.expect.max_entries:
        out.add("count", f"{rel}: {len(names)} entries, expected at most {s.expect.max_entries}")
    _check_names(rel, names, pd.level, d.stage, pd.data_mode, out)
    for pattern in s.expect.required_patterns.get(d.stage, []):  # type: ignore[call-overload]
        if not any(re.search(pattern, n) for n in names):
            out.add("pattern", f"{rel}: no entry matches required pattern {pattern!r}")
    tctx = {
        "summary_mode": pd.summary_mode,
        "task": pd.task,
        "tensor_dir": Path(d.path) / "dump_tensor_data",
        "nonfinite_ok": s.expect.nonfinite_ok,
        **found,
    }
    for name, entry in data.items():
        for where, t in iter_tensors(entry):
            counts["tensors"] += 1
            _check_tensor(rel, name, where, t, tctx, out)


def check_contents(ctx: CheckContext) -> CheckResult:
    res = CheckResult("contents")
    out, counts = _Problems(), Counter[str]()
    found: dict[str, list[str]] = {"nonfinite": [], "tolerated": []}
    dumps = ctx.dumps_of(set(ctx.scenario.expected_stages) - ctx.scenario.gap_stages)
    for d in dumps:
        _check_dump(ctx, d, out, counts, found)
    res.problems = out.lines()
    for kind, target in (("nonfinite", res.problems), ("tolerated", res.notes)):
        lines = found[kind]
        target += lines[:MAX_LINES_PER_KIND]
        if len(lines) > MAX_LINES_PER_KIND:
            target.append(f"  ... {len(lines)} tensors with NaN/Inf statistics in all ({kind})")
    if not dumps:
        res.problems.append("no dump.json to check (see the layout check)")
    res.figures["contents.dumps"] = len(dumps)
    res.figures["contents.tensors"] = counts.pop("tensors", 0)
    res.figures["contents.nonfinite_tensors"] = len(found["nonfinite"])
    res.figures["contents.nonfinite_tolerated"] = len(found["tolerated"])
    res.summary = f"{len(dumps)} dumps, {sum(counts.values())} entries, {len(found['nonfinite'])} non-finite"
    for stage, n in sorted(counts.items()):
        res.figures[fig.contents_entries(stage)] = n
    return res
