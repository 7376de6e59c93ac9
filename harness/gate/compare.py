"""Base against head: the same scenarios, run for two targets on one machine, compared figure by figure.

A pull request's numbers compared with a baseline from another night and another runner mix the change
with the runner's drift; run side by side, interleaved (base, head, head, base, ...), they do not. This
module judges what such runs left on disk (results directories, one per side and repeat):

- every gated figure (overhead ratios, disk bytes, structure entry counts) as head/base, decided by ``decide``
  on ``harness.checks.stats`` (overhead: an interval from the per-step, per-rank samples of every repeat);
- dump structure names per stage and rank, and every check's verdict (layout, contents, ...), decided now:
  any change in the entry names, or a check that passes on base and fails on head, is a regression.
"""

from __future__ import annotations

import statistics
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from harness import outcomes
from harness.artifacts.figures import FAMILIES, family, fmt, ratio, samples_of, structure_names
from harness.checks import stats
from harness.checks.known_gap import is_gap
from harness.gate.baseline import floor
from harness.gate.numerics import NumericsReport
from harness.gate.observe import Observation
from harness.gate.structure import name_diff

Verdict = Literal["ok", "regressed", "improved", "inconclusive", "missing", "new"]
MAX_NAMES = 6


def decide(
    metric: str, base: list[float], head: list[float], samples: tuple[list[dict[str, float]], ...] = ()
) -> stats.Decision:
    """Head against base for one figure, by ``harness.checks.stats``. Overhead: head/base of the per-step, per-rank
    samples of each repeat (``samples``: base's and head's, one mapping per repeat), else of the repeats' values,
    with its interval against the family's tolerance; disk and structure counts (deterministic) exactly."""
    fam = family(metric) or "structure"
    tol = floor(metric)
    if fam != "overhead":
        return stats.exact(base, head, tol, two_sided=fam == "structure")
    base_s, head_s = samples or ([], [])
    if not (base_s and head_s and all(base_s) and all(head_s)):  # results from before the samples
        base_s, head_s = [{"run": b} for b in base], [{"run": h} for h in head]
    return stats.against_tolerance(stats.paired(base_s, head_s), tol)


@dataclass
class FigureComparison:
    scenario: str
    metric: str
    verdict: Verdict
    base: list[float] = field(default_factory=list)  # one value per repeat
    head: list[float] = field(default_factory=list)
    tolerance: float = 0.0
    judged: bool = True
    decision: stats.Decision | None = None  # what the verdict rests on (interval, samples, noise)

    @property
    def ratios(self) -> list[float]:
        """head/base per repeat pair (the repeats are interleaved, so pair i ran close together)."""
        return [h / b for b, h in zip(self.base, self.head, strict=False) if b]

    def ratio_text(self) -> str:
        if self.decision and self.decision.estimate:
            return f"head/base {self.decision.estimate.text()}"
        if not self.base or not self.head or not statistics.median(self.base):
            return "head/base -"
        r = statistics.median(self.head) / statistics.median(self.base)
        spread = self.ratios
        text = f"head/base {ratio(r)}"
        return text + (f" (spread {ratio(min(spread))}-{ratio(max(spread))})" if len(spread) > 1 else "")

    def line(self) -> str:
        head = f"{self.verdict.upper()} {self.scenario}: {self.metric}"
        if self.verdict == "missing":
            return f"{head} base {fmt(self.metric, statistics.median(self.base))}, not measured on head"
        if self.verdict == "new":
            return f"{head} head {fmt(self.metric, statistics.median(self.head))}, not measured on base"
        tol = "tolerance exact" if not self.tolerance else f"tolerance {100 * self.tolerance:.3g}%"
        rests = self.decision.undecided() if self.decision else ""
        return (
            f"{head} base {fmt(self.metric, statistics.median(self.base))} head "
            f"{fmt(self.metric, statistics.median(self.head))}: {self.ratio_text()}, {tol}{rests}"
        )


@dataclass
class ScenarioComparison:
    scenario: str
    figures: list[FigureComparison] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # structure names and check verdicts: regressions
    undecided: list[str] = field(default_factory=list)  # check verdicts the noise left undecided on head
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    numerics: NumericsReport | None = None  # msprobe's compare of the "on" dumps (harness.gate.numerics)
    checks_judged: int = 0  # checks decided on both sides (passing on both counts; fails-on-both does not)

    @property
    def compared(self) -> bool:
        """A verdict was reached on something measured on both sides: a judged figure or check, or a finding."""
        judged = any(f.judged and f.verdict not in ("missing", "new") for f in self.figures)
        return not self.errors and (judged or bool(self.findings) or self.checks_judged > 0)

    @property
    def status(self) -> Literal["ok", "regressed", "inconclusive", "error"]:
        if self.errors:
            return "error"
        if self.findings or any(f.verdict in ("regressed", "missing") for f in self.figures):
            return "regressed"
        undecided = self.undecided or any(f.verdict == "inconclusive" for f in self.figures)
        return "inconclusive" if undecided else "ok"

    def lines(self) -> list[str]:
        if self.errors:
            return [f"ERROR {self.scenario}: {e}" for e in self.errors]
        within = sum(f.verdict == "ok" for f in self.figures)
        out = [f"{self.status} {self.scenario}: {within} of {len(self.figures)} figures within tolerance"]
        out += self.findings + self.undecided  # checks and entry names first: they say which stage
        out += [f.line() for f in self.figures if f.verdict != "ok"]
        out += [f"  note {self.scenario}: {n}" for n in self.notes]
        return out

    def figure_table(self) -> list[str]:
        """Every overhead and disk figure as head/base with its spread (structure counts when they moved)."""
        rows = [f for f in self.figures if family(f.metric) != "structure" or f.verdict != "ok"]
        return [
            f"  {f.metric:<40} base {fmt(f.metric, statistics.median(f.base)) if f.base else '-':>10}  "
            f"head {fmt(f.metric, statistics.median(f.head)) if f.head else '-':>10}  {f.ratio_text()}  "
            f"{f.verdict if f.judged else 'not judged'}"
            for f in rows
        ]


def _numbers(observations: list[Observation], metric: str) -> list[float]:
    return [float(v) for o in observations if isinstance(v := o.figures.get(metric), int | float)]


def _names(observations: list[Observation]) -> tuple[dict[str, dict[str, int]], set[str]]:
    """Structure names per stage/rank of the first repeat, and the names whose count varies between repeats."""
    structs = [o.structure or {} for o in observations]
    first = {k: v["names"] for k, v in structs[0].items()} if structs else {}
    unstable = {
        n
        for k in {k for s in structs for k in s}
        for n in {n for s in structs for n in s.get(k, {}).get("names", {})}
        if len({s.get(k, {}).get("names", {}).get(n, 0) for s in structs}) > 1
    }
    return first, unstable


def _checks(name: str, base: list[Observation], head: list[Observation], out: ScenarioComparison) -> None:
    """A check that fails on no base repeat and on a head repeat is a regression; one the noise left undecided
    on head (an overhead budget, INCONCLUSIVE) leaves the scenario undecided; a known gap that closes on head is
    news, not a regression."""
    for check in sorted({c for o in base + head for c in o.checks}):
        if any(check in o.not_checked for o in base + head):
            continue  # a crash left nothing to check: the crash check carries the verdict
        base_ok = all(o.checks.get(check, False) or check in o.inconclusive for o in base)
        failed_on = [o for o in head if not o.checks.get(check, False) and check not in o.inconclusive]
        undecided_on = [o for o in head if check in o.inconclusive]
        if is_gap(check):
            if base_ok and failed_on:
                out.notes.append(f"{check}: the gap is closed on head (the stages dump now): remove the known gap")
            continue
        out.checks_judged += base_ok or not failed_on
        if base_ok and failed_on:
            problems = failed_on[0].problems.get(check, [])
            shown = "; ".join(problems[:3]) + (f" (+{len(problems) - 3} more)" if len(problems) > 3 else "")
            out.findings.append(f"REGRESSED {name}: {check} check passes on base, fails on head: {shown}")
        elif base_ok and undecided_on:
            shown = "; ".join(undecided_on[0].inconclusive[check][:3])
            out.undecided.append(f"INCONCLUSIVE {name}: {check} check passes on base, undecided on head: {shown}")
        elif not base_ok and not failed_on:
            out.notes.append(f"{check} check fails on base, passes on head")
        elif not base_ok:
            out.notes.append(f"{check} check fails on base and on head: not judged")


def compare_scenario(
    name: str, base: list[Observation], head: list[Observation], judge: Collection[str] = FAMILIES
) -> ScenarioComparison:
    """One scenario: the observations of each side's repeats (results directories), head against base. Figures
    of a family not in ``judge`` are reported, not judged (dump structure names and checks always are)."""
    out = ScenarioComparison(name)
    out.errors = [f"base: {e}" for o in base for e in o.errors] + [f"head: {e}" for o in head for e in o.errors]
    if not base or not head:
        out.errors.append(f"not run on {'base' if not base else 'head'}")
    if out.errors:
        return out
    if crashed := [side for side, obs in (("base", base), ("head", head)) if any(o.crashes for o in obs)]:
        out.notes.append(f"figures not compared: {' and '.join(crashed)} crashed (the crash check says where)")
        _checks(name, base, head, out)
        return out
    gated = sorted({m for o in base + head for m in o.gated()})
    for metric in gated:
        b, h = _numbers(base, metric), _numbers(head, metric)
        if not h or not b:
            out.figures.append(FigureComparison(name, metric, "missing" if b else "new", b, h))
            continue
        if family(metric) not in judge:
            out.figures.append(FigureComparison(name, metric, "ok", b, h, judged=False))
            continue
        samples = ([samples_of(metric, o.figures) for o in base], [samples_of(metric, o.figures) for o in head])
        d = decide(metric, b, h, samples)
        tol = d.threshold - 1 if d.outcome != "improved" else 1 / d.threshold - 1
        out.figures.append(FigureComparison(name, metric, d.outcome, b, h, round(tol, 6), decision=d))
    base_names, base_unstable = _names(base)
    head_names, head_unstable = _names(head)
    for key in sorted(set(base_names) | set(head_names)):
        diff = name_diff(base_names.get(key, {}), head_names.get(key, {}), ignore=base_unstable | head_unstable)
        if diff:
            shown = ", ".join(diff[:MAX_NAMES]) + (f" (+{len(diff) - MAX_NAMES} more)" if len(diff) > MAX_NAMES else "")
            out.findings.append(f"REGRESSED {name}: {structure_names(key)} {shown}")
    _checks(name, base, head, out)
    return out


@dataclass
class Comparison:
    base: str  # the targets, described
    head: str
    order: list[str]  # the run order of one scenario: base, head, head, base, ...
    scenarios: list[ScenarioComparison]
    skipped: list[str] = field(default_factory=list)  # scenarios not run here, with why (no NPU, ...)

    @property
    def verdict(self) -> tuple[int, str]:
        """As the gate's (``outcomes.final``): nothing compared is never a pass."""
        compared = sum(s.compared for s in self.scenarios)
        total = len(self.scenarios) + len(self.skipped)
        return outcomes.final((s.status for s in self.scenarios), compared, total)

    @property
    def exit_code(self) -> int:
        return self.verdict[0]

    def lines(self, figures: bool = True) -> list[str]:
        out = [
            f"compare: base {self.base}",
            f"         head {self.head}",
            f"order per scenario: {', '.join(self.order)}",
        ]
        out += [f"SKIPPED {why}" for why in self.skipped]
        for s in self.scenarios:
            out += s.lines()
            out += s.figure_table() if figures and s.status != "error" else []
        statuses = ("regressed", "inconclusive", "error", "ok")
        counts = {st: sum(s.status == st for s in self.scenarios) for st in statuses}
        counts["skipped"] = len(self.skipped)
        summary = ", ".join(f"{n} {st}" for st, n in counts.items() if n) or "no scenarios"
        out.append(f"compare: {summary} -> {self.verdict[1]}")
        return out


def interleaved(repeats: int) -> list[tuple[str, int]]:
    """ABBA: (base 0, head 0), (head 1, base 1), ...: drift over time cancels between the sides."""
    order: list[tuple[str, int]] = []
    for i in range(repeats):
        order += [("base", i), ("head", i)] if i % 2 == 0 else [("head", i), ("base", i)]
    return order
