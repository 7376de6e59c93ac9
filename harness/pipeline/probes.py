"""Bisect's probes: what one verl commit is, as the harness judges it, for ``harness.targets.commits.bisect``.

Both probes run in the one session of the whole search (``Session``: each commit's environment made once, every run
made and judged as ``harness run`` and ``harness compare`` make and judge them), each commit's results in
``<results>/<sha12>``, and are decided by one rule (``ProbeRule``):

- the exact probe (``exact_probe``): one run of each scenario at the commit, decided by its checks' outcomes (a
  failure fails it, an undecided check leaves it without an exact verdict);
- the overhead probe (``overhead_probe``): the commit compared against the reference (the known-good endpoint) as
  ``harness compare`` decides it, interleaved pairs (ABBA) with its stopping rule (one more pair while INCONCLUSIVE,
  up to ``max_repeats`` a side, else the compare's default time budget); its overhead figures decide:
  ``fail`` an overhead figure of some scenario REGRESSED against the reference; ``pass`` every overhead figure
  decided and none regressed; ``skip`` undecided within the budget (INCONCLUSIVE), or no timing to judge (a crash,
  no install, the harness failed): the search goes around it and names it, so an undecided range is reported as the
  range it could narrow to, never a guess. Its structure, checks and numerics are reported in its results dir but do
  not decide it: a commit that changes them is bisected with ``--check`` on its own.

Either probe is ``infra`` where the runner failed (asked once more by the search).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from harness import outcomes
from harness.artifacts.figures import family
from harness.errors import HarnessError, InfraError, one_line
from harness.gate.judge import ComparePolicy, FigureVerdict, Judgement
from harness.pipeline.session import Session
from harness.report.verdicts import probe_figure, write_comparison
from harness.scenario.model import Scenario
from harness.targets.commits import NOISY_CHECKS, Commit, Probe, ProbeFn
from harness.targets.environment import TargetEnv
from harness.targets.spec import Target, parse_target
from harness.training.runs import check_target


@dataclass(frozen=True)
class ProbeRule:
    """How bisect decides a commit (a ``Probe``) from what the harness judged at it, the same for both probes: not a
    policy of the judge (``harness.gate.judge.Policy``) but a rule over what the judge, or the checks, decided.

    What counts: the ``checks`` named (None: every exact check, all but ``NOISY_CHECKS``); overhead alone is a
    comparison of the commit against the good one under ``ComparePolicy`` over ``families``, whose judged overhead
    figures decide (its structure, checks and numerics are reported, not deciding). How it is decided: exact checks
    by their outcomes' exit codes (``outcomes.check_exit``), never their words; overhead by the figures' verdicts,
    a regression failing it, no timing or an undecided figure leaving it skipped. How many runs a probe needs: one
    of each scenario for exact checks (the same every run); overhead ``repeats`` a side, then one more pair at a
    time while undecided, up to ``max_repeats`` (None: compare's cap within its time budget)."""

    checks: tuple[str, ...] | None = None
    max_repeats: int | None = None

    families: ClassVar[frozenset[str]] = NOISY_CHECKS  # the figure families an overhead probe's comparison decides
    repeats: ClassVar[int] = ComparePolicy.repeats  # runs a side an overhead probe starts with: fewer have no interval

    @property
    def overhead(self) -> bool:
        """Each probe a comparison against the good commit (``--check overhead``), else one run judged exactly."""
        return self.checks is not None and set(self.checks) == NOISY_CHECKS

    @property
    def policy(self) -> ComparePolicy:
        """The comparison an overhead probe is."""
        return ComparePolicy(families=self.families, repeats=self.repeats, max_repeats=self.max_repeats)

    def counts(self, check: str) -> bool:
        """Whether ``check``'s outcome decides an exact probe."""
        return check not in NOISY_CHECKS if self.checks is None else check in self.checks

    def of_checks(self, judged: Mapping[str, tuple[outcomes.CheckOutcome, str]]) -> Probe:
        """An exact probe from its checks' outcomes (each with its one-line summary): a failure (a FAIL, or an XPASS: a
        declared gap or bug gone) fails it; an undecided check leaves it without an exact verdict (skipped)."""
        said = {name: (outcomes.SHORT_WORDS[o], summary) for name, (o, summary) in judged.items()}
        codes = {name: outcomes.check_exit(o) for name, (o, _) in judged.items()}
        if undecided := [name for name, code in codes.items() if code == outcomes.EXIT_INCONCLUSIVE]:
            return Probe("skip", said, f"{undecided[0]} is {outcomes.INCONCLUSIVE}: no exact verdict")
        return Probe("fail" if outcomes.EXIT_FAIL in codes.values() else "pass", said)

    def of_comparison(self, judgement: Judgement, said: Callable[[FigureVerdict], str]) -> Probe:
        """An overhead probe from its comparison (the reference against the probed commit); ``said``: a figure's
        words after its name (``harness.report.verdicts.probe_figure``)."""
        checks: dict[str, tuple[str, str]] = {}
        regressed = undecided = decided = 0
        no_timing = []
        for sc in judgement.scenarios:
            if sc.crashes or sc.errors:
                no_timing.append(f"{sc.scenario}: {(sc.crashes or sc.errors)[0]}")
                continue
            figures = [f for f in sc.figures if family(f.metric) in self.families and f.judged]
            for f in figures:
                name = f.metric if len(judgement.scenarios) == 1 else f"{sc.scenario}:{f.metric}"
                word = f.verdict.upper() if f.verdict in ("regressed", "inconclusive") else "pass"
                checks[name] = (word, said(f))
            regressed += sum(f.verdict == "regressed" for f in figures)
            undecided += sum(f.verdict == "inconclusive" for f in figures)
            decided += sum(f.verdict not in ("inconclusive", "missing", "new") for f in figures)
        if regressed:
            return Probe("fail", checks)
        if no_timing:
            return Probe("skip", checks, f"no timing to judge ({'; '.join(no_timing)})")
        if undecided:
            why = f"overhead undecided: {undecided} figure(s) {outcomes.INCONCLUSIVE} within the budget"
            return Probe("skip", checks, why, undecided=True)
        if not decided:
            return Probe("skip", checks, "no overhead figure was compared")
        return Probe("pass", checks)


@dataclass(frozen=True)
class Bisected:
    """What every probe of one search shares: the session it runs in, the verl repository whose commits it probes,
    the scenarios, the rule, the msprobe of every commit (None: the pinned one)."""

    session: Session
    repo: str
    scenarios: list[Scenario]
    rule: ProbeRule
    msprobe: str | None = None

    def target(self, sha: str) -> Target:
        return parse_target(f"{self.repo}@{sha}", self.msprobe)

    def installed(self, commit: Commit) -> tuple[Target, TargetEnv] | Probe:
        """The commit's target and environment, the API every scenario's workload drives checked in it; a skipped
        probe where it cannot be installed or drifted."""
        try:
            target = self.target(commit.sha)
            env = self.session.env(target)  # installed once per commit, for the whole search
            for s in self.scenarios:
                check_target(s, env)
        except HarnessError as exc:
            return Probe("skip", why=f"cannot be installed or API drift: {one_line(exc)}")
        return target, env


def exact_probe(bisected: Bisected) -> ProbeFn:
    """One run of each scenario at a commit, judged as ``harness run`` judges it and decided by the rule (its checks'
    outcomes); each commit's results in ``<results>/<sha12>``."""
    rule, scenarios, session = bisected.rule, bisected.scenarios, bisected.session

    def probe(commit: Commit) -> Probe:
        installed = bisected.installed(commit)
        if isinstance(installed, Probe):
            return installed
        _, env = installed
        judged: dict[str, tuple[outcomes.CheckOutcome, str]] = {}
        for s in scenarios:
            try:
                _, found = session.evaluate(s, env, session.results / commit.sha[:12])
            except InfraError as exc:
                return Probe("infra", why=one_line(exc).splitlines()[0])
            except HarnessError as exc:  # the harness's own code or the environment failed: no verdict on verl
                return Probe("skip", why=one_line(exc).splitlines()[0])
            for r in found:
                if not rule.counts(r.check):
                    continue
                outcome = outcomes.check_outcome(r, expected_failure=bool(r.xfail_reason))
                name = r.check if len(scenarios) == 1 else f"{s.name}:{r.check}"
                judged[name] = (outcome, r.problems[0] if r.problems else r.summary)
                if outcomes.check_exit(outcome) == outcomes.EXIT_INCONCLUSIVE:
                    return rule.of_checks(judged)  # the other scenarios cannot make it exact
        return rule.of_checks(judged)

    return probe


def overhead_probe(bisected: Bisected, reference: str) -> ProbeFn:
    """A probe comparing each commit against ``reference`` (a sha: the known-good endpoint, whose own probe is the
    reference itself), its comparison in ``<results>/<sha12>`` (with its compare.json and compare.txt), run and
    decided as the rule says (its families, repeats and max_repeats)."""
    base = bisected.target(reference)

    def probe(commit: Commit) -> Probe:
        if commit.sha == reference:
            return Probe("pass", {"overhead": ("pass", "the reference every probe is compared against")})
        installed = bisected.installed(commit)
        if isinstance(installed, Probe):
            return installed
        head, _ = installed
        where = bisected.session.results / commit.sha[:12]
        try:
            compared = bisected.session.compare(bisected.scenarios, base, head, bisected.rule.policy, where)
        except InfraError as exc:
            return Probe("infra", why=one_line(exc).splitlines()[0])
        except HarnessError as exc:
            return Probe("skip", why=one_line(exc).splitlines()[0])
        comparison = compared.judgement()
        write_comparison(comparison, where)
        return bisected.rule.of_comparison(comparison, probe_figure)

    return probe
