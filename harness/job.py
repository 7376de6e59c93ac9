"""``python3 -m harness.job``: the one command every workflow step and .ci script ends through, so what a CI job does
with an exit is decided once, by ``harness.outcomes``' table of job outcomes:

    python3 -m harness.job run [--title T] [--minutes M] [--ends-by EPOCH] [--fresh DIR]... [--annotations FILE]
                               [--no-verdict] [--side-effects] [--accept-baseline BOOL] [--record FILE] -- CMD ARGS...
        run CMD; an exit that is no verdict (2, or no harness exit at all) runs it once more where another attempt as
        long as the first fits the M minutes this step has (HARNESS_DEADLINE, the end of those minutes, caps every
        training the step starts; each DIR moved aside to DIR.attempt1 first, so the
        retry starts clean and the artifact keeps both); then one annotation saying what the job does and why
        (PASS, FAIL: a verdict on verl, INCONCLUSIVE: a warning quoting the undecided figures from FILE, ERROR: not a
        verdict on the pull request and what to do), a line in the step summary, ``exit``/``action``/``attempts`` and
        ``baseline`` (``publish`` or ``keep``: whether a night's figures become the next baseline, ``accept-baseline``
        letting a verdict through) in the step's outputs; exits 0 (the job green) or 1 (red). ``--no-verdict``: a
        step that decides nothing about verl (set-up, build, query): any failure is an error, retried once, and a
        pass says nothing. ``--ends-by``: the step ends by then at the latest (the job's deadline, counted from its
        start). ``--side-effects``: never run twice (a push, an issue's comment)
    python3 -m harness.job of CODE...
        one exit for the codes of a job's several steps (``outcomes.steps_exit``), printed (a .ci script exits it);
        a CODE is a number or a word of ``outcomes.CODES`` (``error``: a script's own failure, not the harness's)
    python3 -m harness.job say CODE TITLE MESSAGE
        one annotation at the level the table gives CODE (an error, a warning for INCONCLUSIVE, a notice for a pass)

Standard library only (imports nothing of the harness but ``outcomes``): it runs from a bare checkout before anything
is installed, so the set-up step itself goes through it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from harness import outcomes

TITLE = "precision_debugger job"
DEADLINE_ENV = "HARNESS_DEADLINE"  # harness.training.deadline reads it (this module imports nothing of the harness)


def escape(text: str, prop: bool = False) -> str:
    """A workflow command's data (and, ``prop``, a property value): a line break would end the command early and let
    the rest of a line (verl's own text, a path) be read as a command of its own."""
    out = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return out.replace(":", "%3A").replace(",", "%2C") if prop else out


def unescape(text: str) -> str:
    return text.replace("%0A", "\n").replace("%0D", "\r").replace("%3A", ":").replace("%2C", ",").replace("%25", "%")


def command(level: outcomes.Level, title: str, message: str) -> str:
    return f"::{level} title={escape(title, prop=True)}::{escape(message)}"


def undecided_of(path: Path | None) -> list[str]:
    """The figures a step's annotations (its ``::warning`` lines titled INCONCLUSIVE) say the noise left undecided."""
    if path is None or not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        head, sep, message = line.partition("::")[2].partition("::")
        if sep and head.startswith("warning title=INCONCLUSIVE"):
            out.append(unescape(message))
    return out


def error_of(path: Path | None, code: int) -> str:
    """The step's first error annotation after its verdict line (that one says only what the exit means): the
    reason an attempt that decided nothing is quoted with. Its last stderr line is a progress line of the harness or a
    tool's warning when the harness wrote its error to the summary and the annotations."""
    if path is None or not path.is_file():
        return ""
    verdict = f"(exit {code}: {outcomes.meaning(code)})"
    for line in path.read_text(errors="replace").splitlines():
        head, sep, message = line.partition("::")[2].partition("::")
        if sep and head.startswith("error title=") and not message.endswith(escape(verdict)):
            said = f"{unescape(head.removeprefix('error title='))}: {unescape(message).splitlines()[0]}"
            return said if len(said) <= 400 else said[:399] + "…"
    return ""


def attempt(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``argv`` once, its stderr passed through; its exit (128+N for signal N) and its last non-empty stderr line.
    SIGTERM (the runner cancelling the job) reaches the child, which ends first."""
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, errors="replace", env=env)

    def forward(signum: int, _frame: object) -> None:
        proc.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    last = ""
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            sys.stderr.write(line)
            sys.stderr.flush()
            last = line.strip() or last
        code = proc.wait()
    except KeyboardInterrupt:
        code = proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    return (outcomes.SIGNALLED - code if code < 0 else code), last


def move_aside(fresh: Sequence[Path], attempt_no: int) -> None:
    """What the attempt wrote, kept beside (``DIR.attemptN``) so the next one starts clean."""
    for path in fresh:
        if path.exists():
            target = path.with_name(f"{path.name}.attempt{attempt_no}")
            shutil.rmtree(target, ignore_errors=True)
            path.rename(target)


def publish(
    outcome: outcomes.JobOutcome,
    title: str,
    attempts: int,
    verdicts: bool = True,
    accepted: bool = False,
    record: Path | None = None,
) -> None:
    """The annotation (stdout: the runner reads workflow commands there), the summary line and the step's outputs
    (and ``record``: them as JSON, for a later job: the morning's issue); a step that gives no verdict and passed only
    its outputs."""
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        fields = {"title": title, "code": outcome.code, "action": outcome.action, "line": outcome.line}
        record.write_text(json.dumps(fields, indent=1) + "\n")
    if out := os.environ.get("GITHUB_OUTPUT"):
        # ``baseline`` only where a step gives a verdict: a set-up or query step's own ``baseline`` output (the CPU
        # nightly's axis: the series' artifact name) was overwritten with "keep", and the night found no baseline
        baseline = "publish" if outcomes.publishes_baseline(outcome.code, accepted) else "keep"
        said = f"exit={outcome.code}\naction={outcome.action}\nattempts={attempts}\n"
        with open(out, "a", encoding="utf-8") as f:
            f.write(said + (f"baseline={baseline}\n" if verdicts else ""))
    if not verdicts and outcome.action == "pass":
        return
    print(command(outcome.level, title, outcome.line), flush=True)
    if summary := os.environ.get("GITHUB_STEP_SUMMARY"):
        icon = {"pass": "✅", "warn": "⚠️"}.get(outcome.action, "❌")
        with open(summary, "a", encoding="utf-8") as f:
            f.write(f"\n{icon} **{title}**: {outcome.line}\n")


@dataclasses.dataclass(frozen=True)
class Step:
    """How a step runs under the table (``run``'s options, one value: what the command line of ``run`` says).
    ``ends_by``: the epoch second by which the step must be done so that the job's own end (the uploads after it,
    within its timeout counted from the job's start) still comes: the step's time is the shorter of ``minutes``
    and that. ``side_effects``: a step that pushes or comments is never run twice (a second attempt fails on what the
    first did, "already in the history", and hides why the first failed). ``fresh``: the dirs moved aside before a
    retry; ``annotations``: the step's annotations file (its INCONCLUSIVE figures quoted); ``verdicts``: false for a
    step that decides nothing about verl; ``accepted``: a verdict on verl let through (accept-baseline); ``record``:
    the outcome as JSON for a later job."""

    title: str = TITLE
    minutes: float | None = None
    fresh: Sequence[Path] = ()
    annotations: Path | None = None
    verdicts: bool = True
    accepted: bool = False
    record: Path | None = None
    ends_by: float | None = None
    side_effects: bool = False


def run(
    argv: Sequence[str],
    step: Step = Step(),
    once: Callable[[Sequence[str], dict[str, str]], tuple[int, str]] = attempt,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """The step run under the table: retried once on an error where time allows, then published; the job's exit."""
    started = clock()
    env = dict(os.environ)
    budget = None if step.minutes is None else step.minutes * 60
    if step.ends_by is not None:
        budget = min(budget if budget is not None else float("inf"), step.ends_by - time.time())
    if budget is not None:  # the trainings of the step are capped by what is left of it (harness.training.deadline)
        env[DEADLINE_ENV] = f"{time.time() + budget:.0f}"
    tries = 0
    while True:
        tries += 1
        began = clock()
        code, why = once(argv, env)
        why = error_of(step.annotations, code) or why
        took = clock() - began
        left = None if budget is None else budget - (clock() - started)
        if step.side_effects:
            if outcomes.job_action(code, step.verdicts) == "error" and code <= outcomes.SIGNALLED:
                why = f"{why or 'no error line'} ({outcomes.ONCE})"
            break
        if not outcomes.retries(code, tries, took, left, step.verdicts, why):
            break
        meaning = outcomes.meaning(code, step.verdicts)
        line = f"attempt {tries}: {meaning}: {why or 'no error line'}; running it once more"
        print(command("warning", step.title, line), flush=True)
        move_aside(step.fresh, tries)
    retryable = outcomes.retries(code, 1, took, None, step.verdicts, why)
    if not step.side_effects and retryable and tries == 1 and left is not None:
        why = f"{why or 'no error line'} (no time left for a second attempt: {took / 60:.1f} min, {left / 60:.1f} left)"
    outcome = outcomes.job_outcome(code, tries, why, undecided_of(step.annotations), step.verdicts, step.accepted)
    publish(outcome, step.title, tries, step.verdicts, step.accepted, step.record)
    return outcome.exit


def _code(text: str) -> int:
    if text in outcomes.CODES:
        return outcomes.CODES[text]
    if not (text.isascii() and text.isdigit()) or int(text) > 255:
        words = ", ".join(outcomes.CODES)
        raise argparse.ArgumentTypeError(f"expected an exit code from 0 to 255 or one of {words}, got {text!r}")
    return int(text)


def _bool(text: str) -> bool:
    """A workflow's boolean input as it reaches a shell: true or false (empty: false, an input not given)."""
    if text not in ("true", "false", ""):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text == "true"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python3 -m harness.job", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run", help="run a step under the table of job outcomes")
    r.add_argument("--title", default=TITLE)
    r.add_argument("--minutes", type=float, help="the time this step has in its job (another attempt must fit)")
    r.add_argument("--fresh", type=Path, action="append", default=[], help="a results dir moved aside before a retry")
    r.add_argument("--annotations", type=Path, help="the step's annotations file: its INCONCLUSIVE figures are quoted")
    r.add_argument("--record", type=Path, help="the outcome as JSON (title, code, action, line) for a later job")
    r.add_argument("--no-verdict", dest="verdicts", action="store_false", help="a step that decides nothing about verl")
    r.add_argument("--accept-baseline", type=_bool, default=False,
                   help="a verdict on verl is accepted: the job passes as ACCEPTED and publishes its baseline")
    r.add_argument("--ends-by", type=float, metavar="EPOCH",
                   help="the epoch second the step must end by for its job to end in time (the job's start + budget)")
    r.add_argument("--side-effects", action="store_true", help="a step that pushes or comments: never run twice")
    r.add_argument("argv", nargs=argparse.REMAINDER, help="-- CMD ARGS...")
    o = sub.add_parser("of", help="one exit for a job's several steps")
    o.add_argument("codes", nargs="+", type=_code)
    s = sub.add_parser("say", help="one annotation at the level the table gives an exit")
    s.add_argument("code", type=_code)
    s.add_argument("title")
    s.add_argument("message")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.what == "of":
        print(outcomes.steps_exit(args.codes))
        return outcomes.EXIT_PASS
    if args.what == "say":
        print(command(outcomes.level(args.code), args.title, args.message))
        return outcomes.EXIT_PASS
    cmd = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not cmd:
        print("python3 -m harness.job run: no command after --", file=sys.stderr)
        return outcomes.EXIT_ERROR
    if shutil.which(cmd[0]) is None and not Path(cmd[0]).is_file():
        outcome = outcomes.job_outcome(outcomes.EXIT_ERROR, 1, f"{cmd[0]}: no such command")
        publish(outcome, args.title, 1)
        return outcome.exit
    step = Step(
        args.title, args.minutes, args.fresh, args.annotations, args.verdicts, args.accept_baseline, args.record,
        args.ends_by, args.side_effects,
    )  # fmt: skip
    return run(cmd, step)


if __name__ == "__main__":
    sys.exit(main())
