"""The one judge: two sides of a scenario compared figure by figure under one policy.

A side is what was measured: the runs of one target (one per repeat, base or head of ``compare``), or a baseline
(the merged runs of a night, whose stored tolerances and per-run samples it carries). The gate (now against a
baseline: ``GatePolicy``) and base against head (``compare``, and bisect's overhead probe: ``ComparePolicy``) differ
only in their policy, whose methods answer each question the judge asks; both end in ``harness.outcomes``.

- every gated figure (overhead ratios, disk bytes, structure entry counts) as head/base (now/baseline), decided by
  ``decide`` on ``harness.checks.stats``: overhead by an interval from the per-step, per-rank samples of each run of
  each side, disk and structure exactly (structure both ways: it has no better or worse);
- dump structure names per stage and rank: any change in the (normalised) entry names is a regression;
- with ``Policy.checks`` (both sides are runs), every check's verdict: one that passes on base and fails on head
  is a regression, a known gap that closes on head is news;
- under the gate's ``admit`` (a baseline from another night), measurements of another device kind, msprobe
  version or series and changed scenario settings are reported and not compared.

Overhead and disk regress upwards and improve downwards; under the gate's policy an improvement is a status of
its own (the baseline is stale: refresh it). The verdicts here are data; what they read as is
``harness.report.verdicts``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from harness import outcomes
from harness.artifacts.figures import FAMILIES, family, samples_of, structure_names
from harness.artifacts.results import PhaseDoc
from harness.artifacts.rundir import MODES, Mode
from harness.checks import stats
from harness.checks.known_gap import is_gap
from harness.gate.baseline import BLOCKING_ENV, INFO_ENV, OVERHEAD_ENV, Baseline, floor
from harness.gate.numerics.report import NumericsReport
from harness.gate.observe import Observation
from harness.gate.structure import name_diff
from harness.outside import shown

FigureOutcome = Literal["ok", "regressed", "improved", "inconclusive", "new", "missing"]
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
    """A name diff as one line: the first ``MAX_NAMES`` (each shown: a dump's names are the code under test's), then
    how many more."""
    more = f" (+{len(diff) - MAX_NAMES} more)" if len(diff) > MAX_NAMES else ""
    return ", ".join(shown(n) for n in diff[:MAX_NAMES]) + more


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
    return stats.against_tolerance(stats.paired(base_s, head_s), tolerance, policy.min_runs)


@dataclass
class FigureVerdict:
    """One figure of one scenario, both sides' values (one per run) and what was decided."""

    scenario: str
    metric: str
    verdict: FigureOutcome
    base: list[float] = field(default_factory=list)
    head: list[float] = field(default_factory=list)
    tolerance: float | None = None
    judged: bool = True
    decision: stats.Decision | None = None  # the interval behind an overhead verdict
    detail: str = ""  # a structure name change, said in words


@dataclass(frozen=True)
class Crowding:
    """How crowded the runner was for a comparison's runs: their mean wall (``run_s``) against the scenario's quiet
    one (``budgets.overhead.quiet_run_s``), and the load average on its cores when it was measured. Data: worded by
    ``harness.report.verdicts``."""

    run_s: float
    quiet_s: float
    load: float
    cores: int

    CROWDED: ClassVar[float] = 1.5  # runs this much slower than quiet: crowded (the duet's bad nights: ~3x)

    @property
    def ratio(self) -> float:
        return self.run_s / self.quiet_s

    @property
    def crowded(self) -> bool:
        return self.ratio >= self.CROWDED

    def text(self) -> str:
        """The figures, as ``stats.Estimate.text`` gives an interval's: what a line around them says they are."""
        return (
            f"its runs took {self.run_s:.0f} s each against the scenario's quiet {self.quiet_s:.0f} s "
            f"({self.ratio:.1f}x; load {self.load:.1f} on {self.cores} cores)"
        )


@dataclass
class ScenarioVerdict:
    """One scenario judged: its figures, findings (structure names and checks, as lines), notes, errors. Data only:
    what it reads as is ``harness.report.verdicts``'."""

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
    crowding: Crowding | None = None  # the runner's crowding over its runs, where the scenario has a quiet wall

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
        return "improved" if self.policy.improvement_stands and self.of("improved") else "ok"

    @property
    def compared(self) -> bool:
        """A verdict was reached on something measured on both sides (what counts is the policy's)."""
        return self.policy.compared(self)

    def of(self, *verdicts: FigureOutcome) -> list[FigureVerdict]:
        return [f for f in self.figures if f.verdict in verdicts]

    def counts(self) -> tuple[int, int, int]:
        """(within tolerance, decided, reported only): figures of families not decided here are counted apart,
        not as within tolerance (a tier's overhead reported only is no pass)."""
        judged = [f for f in self.figures if f.judged]
        return sum(f.verdict == "ok" for f in judged), len(judged), len(self.figures) - len(judged)


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
            out.findings.append(f"{outcomes.REGRESSED} {name}: {check} check passes on base, fails on head: {shown}")
        elif base_ok and undecided_on:
            shown = "; ".join(undecided_on[0].inconclusive[check][:3])
            out.undecided.append(
                f"{outcomes.INCONCLUSIVE} {name}: {check} check passes on base, undecided on head: {shown}"
            )
        elif not base_ok and not failed_on:
            out.notes.append(f"{check} check fails on base, passes on head")
        elif not base_ok:
            out.notes.append(f"{check} check fails on base and on head: not judged")


Figures = dict[str, list[float]]


@dataclass(frozen=True)
class Policy(ABC):
    """How two sides are judged by ``judge``: what is comparable (``admit``: runs that failed, another environment,
    changed settings), how a figure is decided (``families`` decided, the others reported; the ``exact`` families on
    the medians, ``two_sided``: a change either way regresses; overhead by an interval at the confidences of
    ``harness.checks.stats`` from ``min_runs`` runs a side), whether check verdicts are compared (``checks``), how
    entry names are compared (``names``) and what counts as compared at all (``compared``). The gate
    (``GatePolicy``) and base against head (``ComparePolicy``, which bisect's overhead probe uses too) are the two;
    how bisect decides a commit from what they (or the checks) judged is no policy of the judge's
    (``harness.pipeline.probes.ProbeRule``)."""

    families: Collection[str] = FAMILIES  # decided; the others reported, not judged
    exact: Collection[str] = ("disk", "structure")
    two_sided: Collection[str] = ("structure",)

    checks: ClassVar[bool] = False  # check verdicts are compared (both sides are runs, each with its checks)
    min_runs: ClassVar[int] = 1  # runs a side an overhead change needs before it is called
    improvement_stands: ClassVar[bool] = False  # an improvement is a status of its own (not ok)

    def tolerance(self, scenario: str, metric: str) -> float:
        return floor(metric)

    @abstractmethod
    def admit(self, out: ScenarioVerdict, base: Side, head: Side) -> tuple[Figures, Figures] | None:
        """The figures of each side to decide, or None where ``out`` is already the verdict (errors, crashes, sides
        not comparable): what stands in the way goes into ``out``."""

    @abstractmethod
    def unmatched_tolerance(self, scenario: str, metric: str, base: list[float]) -> float | None:
        """The tolerance said of a figure only one side measured."""

    @abstractmethod
    def told_tolerance(self, tolerance: float, decision: stats.Decision) -> float:
        """The tolerance a decided figure says it was decided against."""

    @abstractmethod
    def names(self, out: ScenarioVerdict, base: Side, head: Side) -> None:
        """Entry names per stage and rank, head against base, into ``out``."""

    @abstractmethod
    def compared(self, v: ScenarioVerdict) -> bool:
        """Whether ``v`` reached a verdict on something both sides measured (none compared is never a pass)."""


def _name_diffs(keys: Collection[str], base: Side, head: Side) -> list[tuple[str, str, list[str]]]:
    """(stage and rank, its metric, the changed names) per key, counts of names either side saw vary ignored."""
    bn, hn = base.names or {}, head.names or {}
    return [
        (k, structure_names(k), name_diff(bn.get(k, {}), hn.get(k, {}), ignore={*base.ignored(k), *head.ignored(k)}))
        for k in keys
    ]


@dataclass(frozen=True)
class GatePolicy(Policy):
    """Now against a baseline (the last good night): only now's runs can fail; environment and settings decide
    whether the sides are comparable at all; the baseline's stored ``tolerances`` (scenario, metric) -> tolerance
    (None: the floors); an improvement says "refresh the baseline"; the samples are one night's each."""

    tolerances: Callable[[str, str], float] | None = None
    across_env: bool = False  # compare even across BLOCKING_ENV (and OVERHEAD_ENV)

    improvement_stands: ClassVar[bool] = True

    @classmethod
    def of(cls, baseline: Baseline, across_env: bool = False, families: Collection[str] = FAMILIES) -> GatePolicy:
        return cls(families=families, tolerances=baseline.tolerance, across_env=across_env)

    def tolerance(self, scenario: str, metric: str) -> float:
        return self.tolerances(scenario, metric) if self.tolerances else floor(metric)

    def admit(self, out: ScenarioVerdict, base: Side, head: Side) -> tuple[Figures, Figures] | None:
        out.errors = [e for o in head.runs for e in o.errors]
        out.crashes = [] if out.errors else [c for o in head.runs for c in o.crashes]
        if out.errors or out.crashes or not self._environment(out, base, head):
            return None
        base_fig, head_fig = base.figures, head.figures
        be, he = base.environment, head.environment
        elsewhere = [
            f"{k} baseline {be.get(k)!r}, now {he.get(k)!r}" for k in OVERHEAD_ENV if k in be and be.get(k) != he.get(k)
        ]
        if elsewhere and not self.across_env:
            out.notes.append(
                f"overhead not compared: {'; '.join(elsewhere)} (step times move with it); dump structure and disk "
                "compared"
            )
            base_fig = {m: v for m, v in base_fig.items() if family(m) != "overhead"}
            head_fig = {m: v for m, v in head_fig.items() if family(m) != "overhead"}
        if base.names is None or head.names is None:
            out.notes.append(
                "dump structure not compared: "
                + ("no dumps in these results" if head.names is None else "the baseline has none")
            )
            base_fig = {m: v for m, v in base_fig.items() if family(m) != "structure"}
            head_fig = {m: v for m, v in head_fig.items() if family(m) != "structure"}
        return base_fig, head_fig

    def _environment(self, out: ScenarioVerdict, base: Side, head: Side) -> bool:
        """The gate's first question: are the sides comparable at all? If not, ``out`` says why."""
        be, he = base.environment, head.environment
        blocking = [
            f"{k} baseline {be.get(k)!r}, now {he.get(k)!r}"
            for k in BLOCKING_ENV
            if k in be and be.get(k) != he.get(k)  # absent: an older baseline
        ]
        info = [f"{k} {be.get(k)} -> {he.get(k)}" for k in INFO_ENV if k in be and be.get(k) != he.get(k)]
        if blocking and not self.across_env:
            out.notes = [f"not compared: {'; '.join(blocking)} (--compare-across-env compares anyway)"]
            out.standing = "environment differs"
            return False
        if blocking:
            out.notes.append(f"compared across environments (--compare-across-env): {'; '.join(blocking)}")
        if info:
            out.notes.append(f"environment changed, compared anyway: {', '.join(info)}")
        if "packages_dir" in be and be.get("packages_dir") != he.get("packages_dir"):
            out.notes.append(
                "disk figures move with the install path: msprobe's stack.json records each frame's source path"
            )
        # keys present in both that differ (a key only one side records is a format change, not a setting)
        bs, hs = base.settings, head.settings
        if diff := [f"{k}: baseline {bs[k]!r}, now {hs[k]!r}" for k in sorted(set(bs) & set(hs)) if bs[k] != hs[k]]:
            out.notes = [f"not compared, refresh the baseline: {'; '.join(diff)}"]
            out.standing = "settings changed"
            return False
        return True

    def unmatched_tolerance(self, scenario: str, metric: str, base: list[float]) -> float | None:
        return self.tolerance(scenario, metric) if base else None

    def told_tolerance(self, tolerance: float, decision: stats.Decision) -> float:
        return tolerance

    def names(self, out: ScenarioVerdict, base: Side, head: Side) -> None:
        """The stages and ranks both sides hold (a missing one is its entries figure's MISSING), unchanged ones
        listed as ok."""
        if base.names is None or head.names is None:
            return
        bn, hn = base.names, head.names
        for k, metric, diff in _name_diffs(sorted(set(bn) & set(hn)), base, head):
            if not diff:
                out.figures.append(FigureVerdict(out.scenario, metric, "ok", tolerance=0.0))
            else:
                detail = f"baseline {len(bn[k])} names, now {len(hn[k])} names: {shown_names(diff)}"
                out.figures.append(FigureVerdict(out.scenario, metric, "regressed", tolerance=0.0, detail=detail))

    def compared(self, v: ScenarioVerdict) -> bool:
        return v.status in JUDGED and bool(v.figures or v.crashes)


@dataclass(frozen=True)
class ComparePolicy(Policy):
    """Head against base, both run here, each side its repeats: errors of either side stop it, a crash leaves the
    checks alone compared; the families' floors; check verdicts compared; an overhead change needs
    ``stats.MIN_RUNS_CHANGE`` runs a side; entry names of every stage and rank either side holds. How many runs it
    makes (``Session.compare``): ``repeats`` a side, then while INCONCLUSIVE one more pair at a time up to
    ``max_repeats`` (None: ``default_max`` within ``budget_s``). Bisect's overhead probe is this policy over overhead
    alone (``harness.pipeline.probes``)."""

    repeats: int = 2  # runs a side a comparison starts with: fewer have no interval
    max_repeats: int | None = None  # runs a side at most (the caller's --max-repeats: no time cap)

    checks: ClassVar[bool] = True
    min_runs: ClassVar[int] = stats.MIN_RUNS_CHANGE
    # Without --max-repeats a comparison still decides: while a scenario is INCONCLUSIVE, one more base/head pair at a
    # time, up to 6 runs a side and as long as the next pair (at the mean cost of the pairs so far) ends within 20
    # minutes of the scenario's first run: what a pull-request job can afford, on every tier, untuned. Two runs a side
    # decided almost nothing (t at 99.9 % with two degrees of freedom is 31.6 wide: A/A of tiny_fsdp_l0 exited 3 after
    # 113.5 s). Measured with these defaults on the shared 2-core machine: A/A tiny_fsdp_l0 PASS at 5 runs a side in
    # 1105 s; at load ~14 a tiny_fsdp_l1 pair cost 452-521 s, so the time cap stopped it at 2 a side (INCONCLUSIVE),
    # where --max-repeats 6 decided base against a waiting commit REGRESSED at 4 a side in 2384 s. An explicit
    # --max-repeats is the caller's choice: the runs cap only, no time cap.
    default_max: ClassVar[int] = 6
    budget_s: ClassVar[int] = 20 * 60
    # Budgets in runs (#85): on a crowded runner (``Crowding.crowded``, against the scenario's quiet wall) the 20
    # minutes held 2-3 runs a side, which decide nothing (the night's duet at 3.5x its cores: [0.22x-5.51x] at 2 a
    # side, INCONCLUSIVE two nights running, a +11 % commit undetected); there pairs are added past the minutes up to
    # this many runs a side (``stats.MIN_RUNS_CHANGE`` and one), the job's own deadline still the bound.
    decisive: ClassVar[int] = stats.MIN_RUNS_CHANGE + 1

    @property
    def cap(self) -> int:
        """Runs a side at most."""
        return max(self.repeats, self.max_repeats or self.default_max)

    @property
    def budget(self) -> float | None:
        """Seconds a scenario's runs may take before no more pairs are added; None: no time cap (``max_repeats``)."""
        return self.budget_s if self.max_repeats is None else None

    @property
    def modes(self) -> tuple[Mode, ...]:
        """The trainings each run takes: off and on where overhead is decided, else the on training alone. Every
        other figure (structure, layout, disk, contents, numerics) is of the on run's dumps; an off run's step times
        feed the overhead ratios only, so where this policy decides no overhead (``budgets.overhead.compare: false``,
        or ``--judge`` without it) an off run would be minutes of start-up that no verdict reads."""
        return MODES if "overhead" in self.families else ("on",)

    def admit(self, out: ScenarioVerdict, base: Side, head: Side) -> tuple[Figures, Figures] | None:
        out.errors = [f"{side}: {e}" for side, s in (("base", base), ("head", head)) for o in s.runs for e in o.errors]
        if not base.runs or not head.runs:
            out.errors.append(f"not run on {'base' if not base.runs else 'head'}")
        if out.errors:
            return None
        if crashed := [side for side, s in (("base", base), ("head", head)) if any(o.crashes for o in s.runs)]:
            out.notes.append(f"figures not compared: {' and '.join(crashed)} crashed (the crash check says where)")
            _checks(out, base.runs, head.runs)
            return None
        return base.figures, head.figures

    def unmatched_tolerance(self, scenario: str, metric: str, base: list[float]) -> float | None:
        return 0.0

    def told_tolerance(self, tolerance: float, decision: stats.Decision) -> float:
        """The tolerance as decided (an improvement: against its mirror)."""
        t = decision.threshold
        return round(t - 1 if decision.outcome != "improved" else 1 / t - 1, 6)

    def names(self, out: ScenarioVerdict, base: Side, head: Side) -> None:
        """Every stage and rank either side holds: a changed name is a finding."""
        for _, metric, diff in _name_diffs(sorted(set(base.names or {}) | set(head.names or {})), base, head):
            if diff:
                out.findings.append(f"{outcomes.REGRESSED} {out.scenario}: {metric} {shown_names(diff)}")

    def compared(self, v: ScenarioVerdict) -> bool:
        judged = any(f.judged and f.verdict not in ("missing", "new") for f in v.figures)
        return not v.errors and (judged or bool(v.findings) or v.checks_judged > 0)


def judge(name: str, base: Side, head: Side, policy: Policy) -> ScenarioVerdict:
    """One scenario, head against base, under ``policy``."""
    out = ScenarioVerdict(name, policy)
    admitted = policy.admit(out, base, head)
    if admitted is None:
        return out
    base_fig, head_fig = admitted
    for m in sorted(set(base_fig) | set(head_fig)):
        b, h = base_fig.get(m, []), head_fig.get(m, [])
        if family(m) not in policy.families:  # reported as measured, a side without it included
            out.figures.append(FigureVerdict(name, m, "ok", b, h, 0.0, judged=False))
        elif not h or not b:
            out.figures.append(
                FigureVerdict(name, m, "missing" if b else "new", b, h, policy.unmatched_tolerance(name, m, b))
            )
        else:
            d = decide(m, base, head, tol := policy.tolerance(name, m), policy)
            out.figures.append(FigureVerdict(name, m, d.outcome, b, h, policy.told_tolerance(tol, d), decision=d))
    policy.names(out, base, head)
    if policy.checks:
        _checks(out, base.runs, head.runs)
    return out


def compare_runs(
    name: str, base: list[Observation], head: list[Observation], families: Collection[str] = FAMILIES
) -> ScenarioVerdict:
    """Base against head: the observations of each side's repeats (results directories). Figures of a family not
    in ``families`` are reported, not judged (dump structure names and checks always are)."""
    return judge(name, Side.of_runs(base), Side.of_runs(head), ComparePolicy(families=families))


@dataclass
class Judgement:
    """Every scenario judged, head against base: a gate (``base`` describes the baseline) or base against head
    (``order``: the run order of one scenario; ``skipped``: scenarios not run here, with why). ``census``: head's
    annotated roles against base's (``harness.targets.census.diff``), findings whether or not a training reached
    them, read first; ``notes``: what the reader must know of both targets (a census that could not be read, the
    stack each side was installed on); ``accepted``: why head's regressions are an intended change (a label);
    ``phases``: where the job's minutes went, phase by phase (its set-up, environments, trainings, judges,
    numerics, reports), not a verdict.
    ``kind`` names which policy judged, for its wording (``harness.report.verdicts``)."""

    kind: Literal["gate", "compare"]
    base: str
    head: str
    scenarios: list[ScenarioVerdict]
    order: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    census: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    accepted: str | None = None
    phases: list[PhaseDoc] = field(default_factory=list)  # where the job's minutes went (``artifacts.results``)

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

    @property
    def exit_code(self) -> int:
        return self.verdict[0]

    def count(self, status: Status) -> int:
        return sum(s.status == status for s in self.scenarios)


def interleaved(repeats: int) -> list[tuple[str, int]]:
    """ABBA: (base 0, head 0), (head 1, base 1), ...: drift over time cancels between the sides."""
    order: list[tuple[str, int]] = []
    for i in range(repeats):
        order += [("base", i), ("head", i)] if i % 2 == 0 else [("head", i), ("base", i)]
    return order
