"""``python -m harness duet SCENARIO... --history FILE --verl CLONE``: the night's overhead decided side by side
(``harness.history.duet``; docs/history.md, "The night as a duet"): tonight's verl against the last good night's,
interleaved as compare interleaves, into a results dir laid out as compare's plus ``duet.json`` (what ``history
append --duet`` records). Exit: the comparison's (0, 1 a regression, 3 INCONCLUSIVE, 2 an error); pairs of an
unchanged verl 0; no base (each reason one line) 3: the history alone decides."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.markup import escape

from harness import outcomes
from harness.cli.console import console, live_line, sweep, watching
from harness.errors import HarnessError, ScenarioError, TargetError, one_line
from harness.gate.judge import ComparePolicy
from harness.history.duet import ALONE, DuetDoc, Plan, plan
from harness.history.store import History
from harness.pipeline import options as shared
from harness.pipeline.base_head import SIDES
from harness.pipeline.session import Session
from harness.report import verdicts
from harness.safeio import write_atomic
from harness.scenario.loader import load_scenarios
from harness.scenario.model import Scenario
from harness.targets.spec import SERIES_HELP, Target, git, parse_target
from harness.training.runs import results_dir


def _say(line: str) -> None:
    console.print(escape(line), soft_wrap=True)


def _tonight(args: argparse.Namespace) -> tuple[Target, Path]:
    head = parse_target(args.verl, args.msprobe, args.series, "--verl", args.stack)
    source = head.verl.source
    if not head.verl.commit or not source or "://" in source or head.verl.dirty:
        raise TargetError(
            f"--verl {args.verl}: a duet runs tonight's verl as a commit of a local clone (a checkout dir without "
            "uncommitted changes, or CLONE@REF): the last good night's commit is checked out of the same clone"
        )
    return head, Path(source)


def _base(p: Plan, repo: Path, args: argparse.Namespace, head: Target, session: Session) -> tuple[Plan, Target | None]:
    """The base side's target, its environment made by the session (a base whose environment cannot be made any
    more is one line, and the night is decided by the history alone)."""
    if p.mode == "noise":
        return p, head
    if p.mode == "history":
        return p, None
    base = parse_target(f"{repo}@{p.base_commit}", args.msprobe, args.series, "--verl", args.stack)
    try:
        session.env(base)
    except HarnessError as exc:
        assert p.base_night is not None
        named = f"the last good night {p.base_night.id} ({p.base_night.identity.commit_text()})"
        why = one_line(exc).splitlines()[0]
        line = f"no base for the duet: {named}: its verl cannot be installed any more ({why}): {ALONE}"
        return Plan("history", line), None
    return p, base


def _range(repo: Path, good: str, bad: str, scenarios: list[Scenario]) -> str:
    """A regression's verl commits and how to name the one: the commit itself, or the overhead bisect between them
    (``--heavy`` for a scenario marked heavy, which the bisect refuses without it)."""
    commits = int(str(git("rev-list", "--count", "--first-parent", "--end-of-options", f"{good}..{bad}", cwd=repo)))
    where = f"verl commits {good[:12]}..{bad[:12]} ({commits} commit{'s' if commits != 1 else ''})"
    if commits == 1:
        return f"{where}: the commit: {bad[:12]}"
    bisect = "python -m harness bisect scenarios/{}.yaml --verl-repo VERL --good {} --bad {} --check overhead{}"
    finds = [bisect.format(s.name, good[:12], bad[:12], " --heavy" * s.heavy) for s in scenarios]
    return "; ".join([where] + [f"find the commit: {line}" for line in finds])


def cmd_duet(args: argparse.Namespace) -> int:
    started = time.monotonic()  # what the duet adds to the night, set-up of the base's environment included
    scenarios, problems = load_scenarios(args.paths, args.executor)
    if problems:
        raise ScenarioError(problems)
    head, repo = _tonight(args)
    results = results_dir(args.results)
    session = Session(results, args.executor, watching(live_line(15.0)), heavy=shared.runs_heavy(args.heavy), say=_say)
    runnable = []
    for s in scenarios:
        if reason := session.skip(s):
            _say(f"{outcomes.SKIPPED} {reason}")
        else:
            runnable.append(s)
    history = Path(args.history)
    if not history.exists():
        _say(f"{history}: no such file: the history holds no night yet")
    p = plan(History.read(history), str(head.verl.commit), repo, {s.name: s.digest or "" for s in runnable})
    p, base = _base(p, repo, args, head, session)
    _say(p.line)
    lines = [p.line]
    code, word = outcomes.duet_outcome("history")
    regressed: dict[str, list[str]] = {}
    if base is not None and runnable:
        sweep(runnable)
        policy = ComparePolicy(families={"overhead"}, repeats=args.repeats, max_repeats=args.max_repeats)
        compared = session.compare(runnable, base, head, policy)
        comparison = compared.judgement()
        verdicts.write_comparison(comparison, results)
        from harness.report.compare import write_reports  # matplotlib: only where reports are written

        write_reports(comparison, compared.observed, results / "report")
        observed = compared.observed
        missing = [f"{name} has no {side} run" for name, sides in observed.items() for side in SIDES if not sides[side]]
        if missing:
            errors = [e for s in comparison.scenarios for e in s.errors][:1]
            lines.append(f"the duet holds one side only ({'; '.join(missing)}{': ' if errors else ''}"
                         f"{'; '.join(errors)}): {ALONE}")  # fmt: skip
            p = Plan("history", lines[-1], p.base_commit, p.base_night)
        else:
            said = verdicts.lines(comparison, figures=False)
            lines += [line for line in said if not line.startswith("order per scenario")]
            code, word = outcomes.duet_outcome(p.mode, *comparison.verdict)
            regressed = {
                s.scenario: figures
                for s in comparison.scenarios
                if (figures := [f.metric for f in s.figures if f.judged and f.verdict == "regressed"])
            }
            if code == outcomes.EXIT_FAIL and p.base_commit:
                lines.append(_range(repo, p.base_commit, str(head.verl.commit), runnable))
    elif base is not None:
        lines.append(f"no scenario of the duet runs on this machine: {ALONE}")
        p = Plan("history", lines[-1])
    results.mkdir(parents=True, exist_ok=True)
    DuetDoc(
        mode=p.mode,
        base_commit=p.base_commit if p.mode != "history" else None,
        base_night=p.base_night.id if p.base_night and p.mode != "history" else None,
        exit_code=code,
        verdict=word,
        lines=lines,
        regressed=regressed if p.mode == "duet" else {},
    ).write(results / "duet.json")
    text = [f"duet ({p.mode}): {word}: {lines[0] if p.mode != 'history' else lines[-1]}", *lines[1:]]
    write_atomic(results / "duet.txt", "\n".join(text) + "\n")
    for line in lines[1:]:
        print(line)
    print(f"duet: {word}")
    print(f"wall {time.monotonic() - started:.1f}s")
    print(f"duet.json, duet.txt in {results}")
    return code


def declare(sub: argparse._SubParsersAction) -> None:
    """``duet``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser(
        "duet",
        help="the night's overhead side by side: tonight's verl against the last good night's (read from the "
        "history), interleaved as compare; exit as compare, 3 when no base could be had (docs/history.md)",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument("--history", required=True, metavar="FILE", help="the history of nights (absent: none yet)")
    p.add_argument("--verl", required=True, metavar="SPEC", help="tonight's verl: a clean checkout, or CLONE@REF "
                   "(the last good night's commit is checked out of the same clone)")  # fmt: skip
    p.add_argument("--msprobe", metavar="SPEC", help="the msprobe of both sides: a version or a .whl")
    p.add_argument("--series", help=SERIES_HELP)
    p.add_argument("--results", default="results/duet")
    shared.add(p.add_argument, (shared.REPEATS, shared.MAX_REPEATS, shared.EXECUTOR, shared.STACK, shared.HEAVY))
    p.set_defaults(func=cmd_duet)
