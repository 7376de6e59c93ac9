"""``python -m harness bisect``: the first bad (or, with ``--find fix``, the first good) verl commit between two refs.

Exit codes as everywhere in the harness (``harness.outcomes``): 0 the commit is found; 2 bad input (refs not in
order, an endpoint that already has the other verdict or none, not a verl repository) or an error; 3 skipped
commits next to the flip leave several candidates (the lines name them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness import outcomes
from harness.checks import CHECKS
from harness.checks.known_gap import gap_name
from harness.errors import HarnessError, InfraError, ScenarioError, one_line
from harness.gate.judge import BisectPolicy
from harness.pipeline import options as shared
from harness.pipeline.overhead_probe import overhead_probe
from harness.pipeline.session import Session
from harness.scenario.loader import load_scenarios
from harness.scenario.model import Scenario
from harness.targets.commits import (
    NOISY_CHECKS,
    BisectError,
    Commit,
    EndpointUndecided,
    Probe,
    ProbeFn,
    bisect,
    first_parent,
)
from harness.targets.environment import ensure_env
from harness.targets.spec import parse_target
from harness.training.monitor import Watch
from harness.training.runs import check_target, results_dir


def _scenarios(paths: list[str], session: Session) -> list[Scenario]:
    """The scenarios named, each one ``session`` runs (``Session.skip``: device, heavy, cluster, as every front end
    decides), else bad input: a bisect of a scenario that does not run here has nothing to probe."""
    scenarios, problems = load_scenarios(paths, session.executor)
    if problems:
        raise ScenarioError(problems)
    for s in scenarios:
        if reason := session.skip(s):
            raise BisectError(f"{s.name} is not run here ({reason}): nothing to bisect")
    return scenarios


def _policy(scenarios: list[Scenario], wanted: list[str], max_repeats: int | None = None) -> BisectPolicy:
    """The checks named (crash first: a crash leaves every other check unjudged), or every exact one;
    ``overhead`` alone for an overhead bisect (each probe a comparison against the good commit)."""
    if NOISY_CHECKS & set(wanted):
        if set(wanted) != NOISY_CHECKS:
            raise BisectError(
                f"--check {', '.join(wanted)}: overhead is bisected on its own (each probe a comparison of timings); "
                "bisect the exact checks in a run of their own"
            )
        if blind := [s.name for s in scenarios if not s.budgets.overhead.compare]:
            raise BisectError(
                f"--check overhead: {', '.join(blind)}: the tier does not decide overhead base against head "
                "(budgets.overhead.compare: false): nothing to bisect; use a scenario whose tier decides it"
            )
        if max_repeats is not None and max_repeats < BisectPolicy.repeats:
            raise BisectError(
                f"--max-repeats {max_repeats}: too small for one interleaved pair of the comparison each probe is "
                f"(at least {BisectPolicy.repeats} runs a side: one run a side has no interval, so every probe would "
                "be undecided)"
            )
        return BisectPolicy(tuple(sorted(NOISY_CHECKS)), max_repeats)
    known = [*CHECKS, *(gap_name(g) for s in scenarios for g in s.expect.known_gaps)]
    if unknown := [w for w in wanted if w not in known]:
        raise BisectError(f"--check {', '.join(unknown)}: no such check (expected one of {', '.join(known)})")
    return BisectPolicy(("crash", *[w for w in wanted if w != "crash"]) if wanted else None)


def training_probe(
    repo: str, scenarios: list[Scenario], policy: BisectPolicy, results: Path, executor: str | None,
    msprobe: str | None,
) -> ProbeFn:  # fmt: skip
    """One harness run of the scenarios at a commit (``<repo>@<sha>``), decided as ``policy`` says (its checks'
    outcomes); each commit's results in ``results/<sha12>``."""

    def probe(commit: Commit) -> Probe:
        try:
            env = ensure_env(parse_target(f"{repo}@{commit.sha}", msprobe))  # installed once per commit
            for s in scenarios:
                check_target(s, env)  # the API the workload drives
        except HarnessError as exc:
            return Probe("skip", why=f"cannot be installed or API drift: {one_line(exc)}")
        judged: dict[str, tuple[outcomes.CheckOutcome, str]] = {}
        for s in scenarios:
            try:
                session = Session(results / commit.sha[:12], executor, Watch.configure())
                _, found = session.evaluate(s, env)
            except InfraError as exc:
                return Probe("infra", why=one_line(exc).splitlines()[0])
            except HarnessError as exc:  # the harness's own code or the environment failed: no verdict on verl
                return Probe("skip", why=one_line(exc).splitlines()[0])
            for r in found:
                if not policy.counts(r.check):
                    continue
                outcome = outcomes.check_outcome(r, expected_failure=bool(r.xfail_reason))
                name = r.check if len(scenarios) == 1 else f"{s.name}:{r.check}"
                judged[name] = (outcome, r.problems[0] if r.problems else r.summary)
                if outcomes.check_exit(outcome) == outcomes.EXIT_INCONCLUSIVE:
                    return policy.of_checks(judged)  # the other scenarios cannot make it exact
        return policy.of_checks(judged)

    return probe


def _how(policy: BisectPolicy) -> str:
    if policy.overhead:
        return "(each probe compared against the good commit, interleaved pairs until decided)"
    return "(overhead only with --check overhead: timing)"


def cmd_bisect(args: argparse.Namespace) -> int:
    # what runs here, decided before any results dir is made (bad input writes nothing)
    scenarios = _scenarios(args.paths, Session(Path(args.results), args.executor, heavy=shared.runs_heavy(args.heavy)))
    policy = _policy(scenarios, args.check, args.max_repeats)
    old, new = (args.good, args.bad) if args.find == "bad" else (args.bad, args.good)
    names = ("--good", "--bad") if args.find == "bad" else ("--bad", "--good")
    commits = first_parent(args.verl_repo, old, new, *names)
    results = results_dir(args.results)
    repo = str(Path(args.verl_repo).expanduser().resolve())
    print(
        f"bisect ({'first bad' if args.find == 'bad' else 'first good: the fix'}): {len(commits)} commits on the "
        f"first-parent history {commits[0].sha[:12]}..{commits[-1].sha[:12]}; scenarios "
        f"{', '.join(s.name for s in scenarios)}; checks {', '.join(policy.checks or ['all but overhead'])} "
        f"{_how(policy)}; results in {results}",
        flush=True,
    )
    if policy.overhead:
        reference = commits[0].sha if args.find == "bad" else commits[-1].sha  # the good endpoint
        say = lambda line: print(f"  {line}", flush=True)  # noqa: E731  (a probe's own progress, indented)
        probe = overhead_probe(repo, scenarios, reference, results, args.executor, args.msprobe, policy, say)
    else:
        probe = training_probe(repo, scenarios, policy, results, args.executor, args.msprobe)
    try:
        outcome = bisect(commits, probe, args.find, say=lambda line: print(line, flush=True))
    except EndpointUndecided as exc:  # the noise, not the input: INCONCLUSIVE
        print(f"{outcomes.INCONCLUSIVE}: {exc}")
        return outcomes.EXIT_INCONCLUSIVE
    for line in outcome.lines():
        print(line)
    return outcomes.EXIT_PASS if outcome.found else outcomes.EXIT_INCONCLUSIVE
