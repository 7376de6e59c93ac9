"""The one judge: two sides of a scenario compared figure by figure under one policy.

A side is what was measured: the runs of one target (one per repeat, base or head of ``compare``), or a baseline
(the merged runs of a night, whose stored tolerances and per-run samples it carries). The gate (now against a
baseline) and base against head (``compare``) differ only in their ``Policy``; both end in ``harness.outcomes``.

- every gated figure (overhead ratios, disk bytes, structure entry counts) as head/base (now/baseline), decided by
  ``decide`` on ``harness.checks.stats``: overhead by an interval from the per-step, per-rank samples of each run of
  each side, disk and structure exactly (structure both ways: it has no better or worse);
- dump structure names per stage and rank: any change in the (normalised) entry names is a regression;
- with ``Policy.checks`` (both sides are runs), every check's verdict: one that passes on base and fails on head
  is a regression, a known gap that closes on head is news;
- with ``Policy.environment`` (a baseline from another night), measurements of another device kind, msprobe
  version or series and changed scenario settings are reported and not compared.

Overhead and disk regress upwards and improve downwards; under the gate's policy an improvement is a status of
its own (the baseline is stale: refresh it).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness import outcomes
from harness.artifacts.figures import FAMILIES, family, fmt, ratio, samples_of, structure_names
from harness.checks import stats
from harness.checks.base import CheckResult
from harness.checks.known_gap import is_gap
from harness.gate.baseline import BLOCKING_ENV, INFO_ENV, OVERHEAD_ENV, Baseline, floor
from harness.gate.numerics.report import NumericsReport
from harness.gate.observe import Observation
from harness.gate.structure import name_diff

Verdict = Literal["ok", "regressed", "improved", "inconclusive", "new", "missing"]
Status = Literal[
    "ok",
    "regressed",
    "inconclusive",
    "improved",
    "new scenario",
    "missing scenario",
    "environment differs",
    "settings changed",
    "error",
]
JUDGED: tuple[Status, ...] = ("ok", "regressed", "improved", "inconclusive")
MAX_NAMES = 6  # a structural change lists this many names, then a count


def rel_change(base: float, now: float) -> float:
    if base == 0:
        return 0.0 if now == 0 else math.inf
    return (now - base) / abs(base)


def shown_names(diff: list[str]) -> str:
    """A name diff as one line: the first ``MAX_NAMES``, then how many more."""
    return ", ".join(diff[:MAX_NAMES]) + (f" (+{len(diff) - MAX_NAMES} more)" if len(diff) > MAX_NAMES else "")


@dataclass(frozen=True)
class Policy:
    """How two sides are judged. ``gate``: now against a baseline (its stored tolerances, environment and settings
    checked first, an improvement says "refresh the baseline"); ``compare``: head against base, both run here
    (the families' floors, check verdicts compared too). Overhead is decided by an interval at the confidences of
    ``harness.checks.stats``; the ``exact`` families on the medians (``two_sided``: a change either way regresses)."""

    kind: Literal["gate", "compare"]
    families: Collection[str] = FAMILIES  # decided; the others reported, not judged
    tolerances: Callable[[str, str], float] | None = None  # (scenario, metric) -> tolerance; None: the floors
    across_env: bool = False  # gate: compare even across BLOCKING_ENV
    exact: Collection[str] = ("disk", "structure")
    two_sided: Collection[str] = ("structure",)

    @classmethod
    def gate(cls, baseline: Baseline, across_env: bool = False, families: Collection[str] = FAMILIES) -> Policy:
        return cls("gate", families=families, tolerances=baseline.tolerance, across_env=across_env)

    @property
    def environment(self) -> bool:
        """Environment and settings decide whether the sides are comparable at all (a baseline from another night)."""
        return self.kind == "gate"

    @property
    def checks(self) -> bool:
        """Check verdicts are compared (both sides are runs, each with its checks)."""
        return self.kind == "compare"

    def tolerance(self, scenario: str, metric: str) -> float:
        return self.tolerances(scenario, metric) if self.tolerances else floor(metric)


@dataclass
class Side:
    """What one side measured of one scenario: per gated figure a value per run, the overhead samples per run,
    the structure names per stage and rank (of its first run) with the names whose count varies."""

    figures: dict[str, list[float]]
    samples: dict[str, list[dict[str, float]]]
    names: dict[str, dict[str, int]] | None
    unstable: Mapping[str, Collection[str]]  # per stage and rank (a baseline's)
    unstable_anywhere: Collection[str] = ()  # under any stage and rank (the runs of a side)
    settings: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    runs: list[Observation] = field(default_factory=list)

    @classmethod
    def of_runs(cls, runs: list[Observation]) -> Side:
        figures = {
            m: [float(v) for o in runs if isinstance(v := o.figures.get(m), int | float)]
            for m in sorted({m for o in runs for m in o.gated()})
        }
        structs = [o.structure or {} for o in runs]
        unstable = {
            n
            for k in {k for s in structs for k in s}
            for n in {n for s in structs for n in s.get(k, {}).get("names", {})}
            if len({s.get(k, {}).get("names", {}).get(n, 0) for s in structs}) > 1
        }
        first = runs[0] if runs else None
        return cls(
            figures,
            {m: [samples_of(m, o.figures) for o in runs] for m in figures if family(m) == "overhead"},
            {k: v["names"] for k, v in first.structure.items()} if first and first.structure is not None else None,
            {},
            unstable,
            first.settings if first else {},
            first.environment if first else {},
            runs,
        )

    @classmethod
    def of_baseline(cls, baseline: Baseline, scenario: str) -> Side:
        sb = baseline.scenarios[scenario]
        figures = {m: [float(v)] for m, v in sb.figures.items() if family(m) and isinstance(v, int | float)}
        names = {k: e.names for k, e in sb.structure.items()} if sb.structure is not None else None
        unstable = {k: e.unstable for k, e in (sb.structure or {}).items()}
        return cls(figures, dict(sb.ratio_samples), names, unstable, (), sb.settings, sb.environment)

    def ignored(self, key: str) -> Collection[str]:
        """Names whose count this side saw vary under ``key``: their counts are not compared."""
        return self.unstable.get(key, self.unstable_anywhere)


def decide(metric: str, base: Side, head: Side, tolerance: float, policy: Policy) -> stats.Decision:
    """Head against base for one figure. Overhead: head/base of the per-step, per-rank samples of every run of
    each side (runs from before the samples: of the runs' values), its interval against the tolerance; the exact
    families on the medians of the runs' values."""
    fam = family(metric) or "structure"
    b, h = base.figures[metric], head.figures[metric]
    if fam in policy.exact:
        return stats.exact(b, h, tolerance, two_sided=fam in policy.two_sided)
    base_s, head_s = base.samples.get(metric, []), head.samples.get(metric, [])
    if not (base_s and head_s and all(base_s) and all(head_s)):
        base_s, head_s = [{"run": v} for v in b], [{"run": v} for v in h]
    min_runs = stats.MIN_RUNS_CHANGE if policy.kind == "compare" else 1  # the gate: samples of one night each
    return stats.against_tolerance(stats.paired(base_s, head_s), tolerance, min_runs)


@dataclass
class FigureVerdict:
    """One figure of one scenario, both sides' values (one per run) and what was decided."""

    scenario: str
    metric: str
    verdict: Verdict
    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    tolerance: float | None = None
    judged: bool = True
    decision: stats.Decision | None = None  # the interval behind an overhead verdict
    detail: str = ""  # a structure name change, said in words

    @property
    def word(self) -> str:
        """The verdict column's word: a figure of a family not decided here says so, never "ok"."""
        return self.verdict if self.judged else "not judged"

    # -- the gate's words: now against a baseline
    @property
    def change(self) -> float | None:
        return rel_change(self.base[0], self.head[0]) if self.base and self.head else None

    def limit(self) -> float | None:
        """The value beyond which this verdict was given (tolerances are multiplicative: x(1+t) up, /(1+t) down)."""
        if not self.base or self.tolerance is None or not self.head:
            return None
        b = self.base[0]
        return b * (1 + self.tolerance) if self.head[0] >= b else b / (1 + self.tolerance)

    def tolerance_text(self) -> str:
        t = self.tolerance
        if not t:
            return "tolerance exact"
        if not self.head or not self.base:
            return f"tolerance +{100 * t:.3g}%"
        up = self.head[0] >= self.base[0]
        pct = 100 * t if up else 100 * (1 - 1 / (1 + t))
        return f"tolerance {'+' if up else '-'}{pct:.3g}% (limit {fmt(self.metric, self.limit())})"

    def gate_line(self) -> str:
        """One readable line: scenario, metric, baseline, now, tolerance."""
        head = f"{self.verdict.upper()} {self.scenario}: {self.metric}"
        base, now = (self.base[0] if self.base else None), (self.head[0] if self.head else None)
        if self.detail:
            return f"{head} {self.detail} ({self.tolerance_text()})"
        if self.verdict == "missing":
            return f"{head} baseline {fmt(self.metric, base)}, now not measured"
        if self.verdict == "new":
            return f"{head} now {fmt(self.metric, now)} (not in the baseline)"
        pct = f"{100 * self.change:+.0f}%" if self.change is not None and math.isfinite(self.change) else "from 0"
        line = f"{head} baseline {fmt(self.metric, base)} now {fmt(self.metric, now)} ({pct}), {self.tolerance_text()}"
        if self.decision is not None and self.decision.estimate is not None:
            line += f"; now/baseline {self.decision.text()}"
        if self.verdict == "improved":
            line += ": better than the baseline, refresh it if this is intended"
        return line

    # -- compare's words: head against base, one value per repeat
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

    def compare_line(self) -> str:
        head = f"{self.word.upper()} {self.scenario}: {self.metric}"
        if self.verdict == "missing" or not self.head:  # not judged: a side may lack it
            return f"{head} base {fmt(self.metric, statistics.median(self.base))}, not measured on head"
        if self.verdict == "new" or not self.base:
            return f"{head} head {fmt(self.metric, statistics.median(self.head))}, not measured on base"
        tol = "tolerance exact" if not self.tolerance else f"tolerance {100 * self.tolerance:.3g}%"
        rests = self.decision.undecided() if self.decision else ""
        return (
            f"{head} base {fmt(self.metric, statistics.median(self.base))} head "
            f"{fmt(self.metric, statistics.median(self.head))}: {self.ratio_text()}, {tol}{rests}"
        )


@dataclass
class ScenarioVerdict:
    """One scenario judged: its figures, findings (structure names and checks, as lines), notes, errors."""

    scenario: str
    policy: Policy
    figures: list[FigureVerdict] = field(default_factory=list)
    findings: list[str] = field(default_factory=list)  # structure names and check verdicts: regressions
    undecided: list[str] = field(default_factory=list)  # check verdicts the noise left undecided on head
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)  # verl or msprobe crashed a training: nothing else compared
    standing: Status | None = None  # not compared at all: a new or missing scenario, another environment, ...
    numerics: NumericsReport | None = None  # msprobe's compare of the "on" dumps (harness.gate.numerics)
    checks_judged: int = 0  # checks decided on both sides (passing on both counts; fails-on-both does not)
    reproduce: str = ""  # the command that reproduces its findings on a developer's machine (base against head)

    def reproduce_line(self) -> list[str]:
        """Where anything but ok was found, the command that reproduces it: each finding ends with it."""
        return [f"  reproduce {self.scenario}: {self.reproduce}"] if self.reproduce and self.status != "ok" else []

    @property
    def status(self) -> Status:
        if self.standing is not None:
            return self.standing
        if self.errors:
            return "error"
        if self.crashes or self.findings or self.of("regressed", "missing"):
            return "regressed"
        if self.undecided or self.of("inconclusive"):
            return "inconclusive"
        return "improved" if self.policy.kind == "gate" and self.of("improved") else "ok"

    @property
    def compared(self) -> bool:
        """A verdict was reached on something measured on both sides: a judged figure or check, a finding, a crash."""
        if self.policy.kind == "gate":
            return self.status in JUDGED and bool(self.figures or self.crashes)
        judged = any(f.judged and f.verdict not in ("missing", "new") for f in self.figures)
        return not self.errors and (judged or bool(self.findings) or self.checks_judged > 0)

    def of(self, *verdicts: Verdict) -> list[FigureVerdict]:
        return [f for f in self.figures if f.verdict in verdicts]

    def counts(self) -> tuple[int, int, int]:
        """(within tolerance, decided, reported only): figures of families not decided here are counted apart,
        not as within tolerance (a tier's overhead reported only is no pass)."""
        judged = [f for f in self.figures if f.judged]
        return sum(f.verdict == "ok" for f in judged), len(judged), len(self.figures) - len(judged)

    def within(self, noun: str = "figures") -> str:
        ok, judged, apart = self.counts()
        text = f"{ok} of {judged} {noun} within tolerance"
        return text + (f" ({apart} reported, not judged)" if apart else "")

    def line(self, f: FigureVerdict) -> str:
        return f.gate_line() if self.policy.kind == "gate" else f.compare_line()

    def lines(self) -> list[str]:
        if self.policy.kind == "gate":
            return self._gate_lines()
        if self.errors:
            return [f"ERROR {self.scenario}: {e}" for e in self.errors] + self.reproduce_line()
        out = [f"{self.status} {self.scenario}: {self.within()}"]
        out += self.findings + self.undecided  # checks and entry names first: they say which stage
        out += [f.compare_line() for f in self.figures if f.verdict != "ok"]
        out += self.reproduce_line()
        out += [f"  note {self.scenario}: {n}" for n in self.notes]
        return out

    def _gate_lines(self) -> list[str]:
        if self.crashes:
            out = [f"REGRESSED {self.scenario}: {c}" for c in self.crashes]
        elif self.status in JUDGED:
            out = [f"{self.status} {self.scenario}: {self.within('metrics')}"]
        else:
            out = [f"{self.status.upper()} {self.scenario}: " + "; ".join(self.errors or self.notes)]
        out += self.findings
        out += [f.gate_line() for f in self.of("regressed", "missing", "inconclusive", "improved", "new")]
        out += self.reproduce_line() if self.status in ("regressed", "inconclusive") else []
        if self.status in JUDGED:
            out += [f"  note {self.scenario}: {n}" for n in self.notes]
        return out

    def figure_table(self) -> list[str]:
        """Every overhead and disk figure as head/base with its spread (structure counts when they moved)."""
        rows = [f for f in self.figures if family(f.metric) != "structure" or f.verdict != "ok"]
        return [
            f"  {f.metric:<40} base {fmt(f.metric, statistics.median(f.base)) if f.base else '-':>10}  "
            f"head {fmt(f.metric, statistics.median(f.head)) if f.head else '-':>10}  {f.ratio_text()}  "
            f"{f.word}"
            for f in rows
        ]

    def as_check_result(self) -> CheckResult:
        """For the pytest ``regression`` item: regressions and errors fail, the rest are notes."""
        res = CheckResult("regression")
        res.problems = [f"REGRESSED {self.scenario}: {c}" for c in self.crashes] + self.findings
        res.problems += [self.line(f) for f in self.of("regressed", "missing")]
        res.inconclusive = self.undecided + [self.line(f) for f in self.of("inconclusive")]
        if self.status == "error":
            res.problems += self.errors
        else:
            res.notes = [self.line(f) for f in self.of("improved", "new")] + self.notes
        res.summary = f"{self.status}: {self.within('metrics')}"
        res.figures = {
            "regression.status": self.status,
            "regression.compared": len(self.figures),
            "regression.regressed": len(self.of("regressed", "missing")) + len(self.findings),
            "regression.improved": len(self.of("improved")),
            "regression.inconclusive": len(self.of("inconclusive")),
        }
        return res


def _environment(name: str, base: Side, head: Side, policy: Policy) -> ScenarioVerdict | list[str]:
    """The gate's first question: are the sides comparable at all? A verdict saying why not, or notes."""
    notes: list[str] = []
    be, he = base.environment, head.environment
    blocking = [
        f"{k} baseline {be.get(k)!r}, now {he.get(k)!r}"
        for k in BLOCKING_ENV
        if k in be and be.get(k) != he.get(k)  # absent: an older baseline
    ]
    info = [f"{k} {be.get(k)} -> {he.get(k)}" for k in INFO_ENV if k in be and be.get(k) != he.get(k)]
    if blocking and not policy.across_env:
        why = f"not compared: {'; '.join(blocking)} (--compare-across-env compares anyway)"
        return ScenarioVerdict(name, policy, notes=[why], standing="environment differs")
    if blocking:
        notes.append(f"compared across environments (--compare-across-env): {'; '.join(blocking)}")
    if info:
        notes.append(f"environment changed, compared anyway: {', '.join(info)}")
    if "packages_dir" in be and be.get("packages_dir") != he.get("packages_dir"):
        notes.append("disk figures move with the install path: msprobe's stack.json records each frame's source path")
    # keys present in both that differ (a key only one side records is a format change, not a setting)
    bs, hs = base.settings, head.settings
    if diff := [f"{k}: baseline {bs[k]!r}, now {hs[k]!r}" for k in sorted(set(bs) & set(hs)) if bs[k] != hs[k]]:
        why = f"not compared, refresh the baseline: {'; '.join(diff)}"
        return ScenarioVerdict(name, policy, notes=[why], standing="settings changed")
    return notes


# Checks whose verdict is a run's own maxima (the overhead check: each ratio of one off/on pair against the scenario's
# max): never compared across sides. One pair crosses a maximum on noise (real_fsdp_l0 read 2.00x against 1.6x on a
# loaded runner), so a head run over it where base's was not is no regression; head against base is decided on the
# figures themselves (``decide``: an interval from every run of both sides) or, where this tier cannot decide it,
# reported. A head whose timings went missing loses its figures: MISSING where overhead is decided.
PER_RUN_MAXIMA = frozenset({"overhead"})


def _checks(out: ScenarioVerdict, base: list[Observation], head: list[Observation]) -> None:
    """A check that fails on no base repeat and on a head repeat is a regression; a known gap that closes on head
    is news, not a regression; a check of a run's own maxima is not compared (``PER_RUN_MAXIMA``)."""
    name = out.scenario
    for check in sorted({c for o in base + head for c in o.checks} - PER_RUN_MAXIMA):
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


def judge(name: str, base: Side, head: Side, policy: Policy) -> ScenarioVerdict:
    """One scenario, head against base, under ``policy``."""
    out = ScenarioVerdict(name, policy)
    if policy.environment:  # now against a baseline: only now's runs can fail or crash
        out.errors = [e for o in head.runs for e in o.errors]
        out.crashes = [] if out.errors else [c for o in head.runs for c in o.crashes]
        if out.errors or out.crashes:
            return out
        comparable = _environment(name, base, head, policy)
        if isinstance(comparable, ScenarioVerdict):
            return comparable
        out.notes = comparable
    else:
        out.errors = [f"{side}: {e}" for side, s in (("base", base), ("head", head)) for o in s.runs for e in o.errors]
        if not base.runs or not head.runs:
            out.errors.append(f"not run on {'base' if not base.runs else 'head'}")
        if out.errors:
            return out
        if crashed := [side for side, s in (("base", base), ("head", head)) if any(o.crashes for o in s.runs)]:
            out.notes.append(f"figures not compared: {' and '.join(crashed)} crashed (the crash check says where)")
            _checks(out, base.runs, head.runs)
            return out
    base_fig, head_fig = base.figures, head.figures
    be, he = base.environment, head.environment
    elsewhere = [
        f"{k} baseline {be.get(k)!r}, now {he.get(k)!r}" for k in OVERHEAD_ENV if k in be and be.get(k) != he.get(k)
    ]
    if policy.kind == "gate" and elsewhere and not policy.across_env:
        out.notes.append(
            f"overhead not compared: {'; '.join(elsewhere)} (step times move with it); dump structure and disk compared"
        )
        base_fig = {m: v for m, v in base_fig.items() if family(m) != "overhead"}
        head_fig = {m: v for m, v in head_fig.items() if family(m) != "overhead"}
    if policy.kind == "gate" and (base.names is None or head.names is None):
        out.notes.append(
            "dump structure not compared: "
            + ("no dumps in these results" if head.names is None else "the baseline has none")
        )
        base_fig = {m: v for m, v in base_fig.items() if family(m) != "structure"}
        head_fig = {m: v for m, v in head_fig.items() if family(m) != "structure"}
    for m in sorted(set(base_fig) | set(head_fig)):
        b, h = base_fig.get(m, []), head_fig.get(m, [])
        tol: float | None
        if family(m) not in policy.families:  # reported as measured, a side without it included
            out.figures.append(FigureVerdict(name, m, "ok", b, h, 0.0, judged=False))
        elif not h or not b:
            tol = (policy.tolerance(name, m) if b else None) if policy.kind == "gate" else 0.0
            out.figures.append(FigureVerdict(name, m, "missing" if b else "new", b, h, tol))
        else:
            d = decide(m, base, head, tol := policy.tolerance(name, m), policy)
            if policy.kind == "compare":  # the tolerance as decided (an improvement: against its mirror)
                tol = round(d.threshold - 1 if d.outcome != "improved" else 1 / d.threshold - 1, 6)
            out.figures.append(FigureVerdict(name, m, d.outcome, b, h, tol, decision=d))
    _names(out, base, head)
    if policy.checks:
        _checks(out, base.runs, head.runs)
    return out


def _names(out: ScenarioVerdict, base: Side, head: Side) -> None:
    """Entry names per stage and rank, counts of names either side saw vary ignored. The gate compares the stages
    and ranks both sides hold (a missing one is its entries figure's MISSING) and lists unchanged ones as ok;
    compare every one either holds."""
    name, gate = out.scenario, out.policy.kind == "gate"
    if gate and (base.names is None or head.names is None):
        return
    bn, hn = base.names or {}, head.names or {}
    keys = sorted(set(bn) & set(hn)) if gate else sorted(set(bn) | set(hn))
    for k in keys:
        ignore = {*base.ignored(k), *head.ignored(k)}
        diff = name_diff(bn.get(k, {}), hn.get(k, {}), ignore=ignore)
        metric = structure_names(k)
        if not gate:
            if diff:
                out.findings.append(f"REGRESSED {name}: {metric} {shown_names(diff)}")
        elif not diff:
            out.figures.append(FigureVerdict(name, metric, "ok", tolerance=0.0))
        else:
            detail = f"baseline {len(bn[k])} names, now {len(hn[k])} names: {shown_names(diff)}"
            out.figures.append(FigureVerdict(name, metric, "regressed", tolerance=0.0, detail=detail))


def compare_runs(
    name: str, base: list[Observation], head: list[Observation], families: Collection[str] = FAMILIES
) -> ScenarioVerdict:
    """Base against head: the observations of each side's repeats (results directories). Figures of a family not
    in ``families`` are reported, not judged (dump structure names and checks always are)."""
    return judge(name, Side.of_runs(base), Side.of_runs(head), Policy("compare", families=families))


# The order of the counts on a judgement's last line.
GATE_COUNTS: tuple[Status, ...] = (
    "regressed", "inconclusive", "improved", "ok", "new scenario", "missing scenario", "environment differs",
    "settings changed", "error",
)  # fmt: skip
COMPARE_COUNTS: tuple[Status, ...] = ("regressed", "inconclusive", "error", "ok")


@dataclass
class Judgement:
    """Every scenario judged, head against base: a gate (``base`` describes the baseline) or base against head
    (``order``: the run order of one scenario; ``skipped``: scenarios not run here, with why). ``census``: head's
    annotated roles against base's (``harness.targets.census.diff``), findings whether or not a training reached
    them, read first; ``notes``: what the reader must know of both targets (a census that could not be read, the
    stack each side was installed on); ``accepted``: why head's regressions are an intended change (a label)."""

    kind: Literal["gate", "compare"]
    base: str
    head: str
    scenarios: list[ScenarioVerdict]
    order: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    census: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    accepted: str | None = None

    @property
    def verdict(self) -> tuple[int, str]:
        """``outcomes.final``: nothing compared is never a pass; a census finding is a regression of head."""
        compared = sum(s.compared for s in self.scenarios)
        statuses = [s.status for s in self.scenarios] + (["regressed"] if self.census else [])
        total = len(self.scenarios) + len(self.skipped)
        return outcomes.final(statuses, compared, total, self.accepted)

    @property
    def regressed(self) -> bool:
        """Head has a regression (accepted or not): the report says how to accept an intended one."""
        return bool(self.census) or any(s.status == "regressed" for s in self.scenarios)

    def head_lines(self) -> list[str]:
        """What a reviewer reads first: the census findings, the targets' notes, and how an intended change is
        accepted (or that it was)."""
        out = [f"REGRESSED census: {c}" for c in self.census] + [f"note: {n}" for n in self.notes]
        if self.accepted:
            out.append(f"ACCEPTED as intended ({self.accepted}): every finding below is reported, none fails the gate")
        elif self.regressed and not any(outcomes.CANNOT_TRAIN in f for s in self.scenarios for f in s.findings):
            out.append(f"note: {outcomes.ACCEPT_HINT}")  # the label accepts no head that cannot train
        return out

    @property
    def exit_code(self) -> int:
        return self.verdict[0]

    def count(self, status: Status) -> int:
        return sum(s.status == status for s in self.scenarios)

    def lines(self, figures: bool = True) -> list[str]:
        if self.kind == "gate":
            out = [f"baseline: {self.base}"]
            for s in self.scenarios:
                out += s.lines()
            counts = ", ".join(f"{self.count(st)} {st}" for st in GATE_COUNTS if self.count(st))
            return [*out, f"gate: {counts or 'no scenarios'} -> {self.verdict[1]}"]
        out = [*self.head_lines(), f"compare: base {self.base}", f"         head {self.head}"]
        out += [f"order per scenario: {', '.join(self.order)}"]
        out += [f"SKIPPED {why}" for why in self.skipped]
        for s in self.scenarios:
            out += s.lines()
            out += s.figure_table() if figures and s.status != "error" else []
        said = [f"{self.count(st)} {st}" for st in COMPARE_COUNTS if self.count(st)]
        said += [f"{len(self.skipped)} skipped"] if self.skipped else []
        return [*out, f"compare: {', '.join(said) or 'no scenarios'} -> {self.verdict[1]}"]


def interleaved(repeats: int) -> list[tuple[str, int]]:
    """ABBA: (base 0, head 0), (head 1, base 1), ...: drift over time cancels between the sides."""
    order: list[tuple[str, int]] = []
    for i in range(repeats):
        order += [("base", i), ("head", i)] if i % 2 == 0 else [("head", i), ("base", i)]
    return order
