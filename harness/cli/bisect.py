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
from harness.cli.console import watching
from harness.errors import ScenarioError
from harness.pipeline import options as shared
from harness.pipeline.probes import Bisected, ProbeRule, exact_probe, overhead_probe
from harness.pipeline.session import Session
from harness.scenario import settings
from harness.scenario.loader import load_scenarios
from harness.scenario.model import Scenario
from harness.targets.commits import NOISY_CHECKS, BisectError, EndpointUndecided, bisect, first_parent
from harness.training.runs import results_dir


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


def _rule(scenarios: list[Scenario], wanted: list[str], max_repeats: int | None = None) -> ProbeRule:
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
        if max_repeats is not None and max_repeats < ProbeRule.repeats:
            raise BisectError(
                f"--max-repeats {max_repeats}: too small for one interleaved pair of the comparison each probe is "
                f"(at least {ProbeRule.repeats} runs a side: one run a side has no interval, so every probe would "
                "be undecided)"
            )
        return ProbeRule(tuple(sorted(NOISY_CHECKS)), max_repeats)
    known = [*CHECKS, *(gap_name(g) for s in scenarios for g in s.expect.known_gaps)]
    if unknown := [w for w in wanted if w not in known]:
        raise BisectError(f"--check {', '.join(unknown)}: no such check (expected one of {', '.join(known)})")
    return ProbeRule(("crash", *[w for w in wanted if w != "crash"]) if wanted else None)


def _how(rule: ProbeRule) -> str:
    if rule.overhead:
        return "(each probe compared against the good commit, interleaved pairs until decided)"
    return "(overhead only with --check overhead: timing)"


def cmd_bisect(args: argparse.Namespace) -> int:
    # what runs here, decided before any results dir is made (bad input writes nothing)
    session = Session(Path(args.results), args.executor, heavy=shared.runs_heavy(args.heavy))
    scenarios = _scenarios(args.paths, session)
    rule = _rule(scenarios, args.check, args.max_repeats)
    old, new = (args.good, args.bad) if args.find == "bad" else (args.bad, args.good)
    names = ("--good", "--bad") if args.find == "bad" else ("--bad", "--good")
    commits = first_parent(args.verl_repo, old, new, *names)
    session.results = results_dir(args.results)
    session.watch = watching()
    session.say = lambda line: print(f"  {line}", flush=True)  # a probe's own progress, indented
    repo = str(Path(args.verl_repo).expanduser().resolve())
    print(
        f"bisect ({'first bad' if args.find == 'bad' else 'first good: the fix'}): {len(commits)} commits on the "
        f"first-parent history {commits[0].sha[:12]}..{commits[-1].sha[:12]}; scenarios "
        f"{', '.join(s.name for s in scenarios)}; checks {', '.join(rule.checks or ['all but overhead'])} "
        f"{_how(rule)}; results in {session.results}",
        flush=True,
    )
    bisected = Bisected(session, repo, scenarios, rule, args.msprobe)
    if rule.overhead:
        reference = commits[0].sha if args.find == "bad" else commits[-1].sha  # the good endpoint
        probe = overhead_probe(bisected, reference)
    else:
        probe = exact_probe(bisected)
    try:
        outcome = bisect(commits, probe, args.find, say=lambda line: print(line, flush=True))
    except EndpointUndecided as exc:  # the noise, not the input: INCONCLUSIVE
        print(f"{outcomes.INCONCLUSIVE}: {exc}")
        return outcomes.EXIT_INCONCLUSIVE
    finally:
        session.release()
    for line in outcome.lines():
        print(line)
    return outcomes.EXIT_PASS if outcome.found else outcomes.EXIT_INCONCLUSIVE


def declare(sub: argparse._SubParsersAction) -> None:
    """``bisect``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "bisect",
        help="the first bad (or, --find fix, first good) verl commit between two refs: one run per probe",
    )
    p.add_argument("paths", nargs="+", metavar="SCENARIO")
    p.add_argument("--verl-repo", required=True, metavar="REPO", help="a verl git checkout or bare repository")
    p.add_argument("--good", required=True, metavar="REF", help="a commit whose verdict is pass")
    p.add_argument("--bad", required=True, metavar="REF", help="a commit whose verdict is FAIL")
    p.add_argument(
        "--find",
        choices=["bad", "fix"],
        default="bad",
        help="bad (default): --good is the older ref, find the first FAIL; fix: --bad is the older, find the first "
        "pass",
    )
    p.add_argument(
        "--check",
        action="append",
        default=[],
        metavar="NAME",
        help="judge only this check (and crash); repeatable; default every check but overhead; overhead alone: each "
        "probe a comparison against the good commit (interleaved pairs, compare's stopping rule)",
    )
    p.add_argument(
        "--max-repeats", type=shared.repeats_option, metavar="N",
        help="--check overhead: runs a side a probe may take while undecided (default: compare's, within its time "
        "budget)",
    )  # fmt: skip
    p.add_argument("--results", default="results/bisect", help="each probe's results in RESULTS/<sha12>")
    p.add_argument("--executor", choices=list(settings.EXECUTORS))
    shared.add(p.add_argument, (shared.RAY_ADDRESS, shared.HEAVY))
    p.add_argument("--msprobe", metavar="SPEC", help="the msprobe of every probe: a version or a .whl")
    p.set_defaults(func=cmd_bisect)
