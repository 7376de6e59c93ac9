"""Every command's arguments, in one parser; each command is the module of its name (``harness.cli.<command>``)."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

from harness import config
from harness.artifacts.figures import FAMILIES
from harness.cli import (
    baseline,
    bisect,
    caller,
    compare,
    dry_run,
    duet,
    gate,
    github,
    history,
    image,
    issue,
    junit_merge,
    numerics,
    pair,
    report,
    run,
    schema,
    target,
    validate,
    wheelhouse,
)
from harness.gate.baseline import DEFAULT_RULES
from harness.gate.numerics.compare import ENGINES
from harness.history.detect import CONFIRM_NIGHTS
from harness.history.store import KEEP_NIGHTS
from harness.outcomes import ACCEPT_LABEL
from harness.pipeline import options as shared
from harness.scenario.model import ExecutorSettings
from harness.scenario.settings import EXECUTORS
from harness.targets.spec import SERIES_HELP, TARGET_HELP

DESCRIPTION = """Exit codes: 0 all good; 1 a check failed (or, for gate and compare, a regression); 2 invalid input or
an infrastructure error; 3 INCONCLUSIVE: nothing failed, but the noise left a figure undecided (its line says how
wide the noise was and how many more repeats would decide it); 128+N on signal N (SIGINT, SIGTERM, SIGHUP: the
running training is stopped first)."""


def build() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m harness", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("validate", help="schema-check scenario files (one line per problem)")
    p.add_argument("paths", nargs="+")
    p.set_defaults(func=validate.cmd_validate)
    p = sub.add_parser("run", help="run scenarios (trainings off and on, then checks) into a results dir")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results")
    shared.add(
        p.add_argument,
        (
            shared.EXECUTOR, shared.RAY_ADDRESS, shared.REUSE, *shared.TARGET, shared.STACK, *shared.WATCH,
            shared.TIMING, shared.HEAVY,
        ),
    )  # fmt: skip
    p.set_defaults(func=run.cmd_run)
    p = sub.add_parser(
        "compare",
        help="base against head: each scenario run for both verl targets, interleaved; exit 1 on a regression, 3 "
        "INCONCLUSIVE (more repeats up to --max-repeats did not decide)",
    )
    p.add_argument("paths", nargs="+")
    p.add_argument("--base", required=True, metavar="SPEC", help=f"the verl before the change: {TARGET_HELP}")
    p.add_argument("--head", required=True, metavar="SPEC", help="the verl with the change (SPEC as --base)")
    p.add_argument("--msprobe", metavar="SPEC", help="the msprobe of both sides: a version or a .whl")
    p.add_argument("--series", help=SERIES_HELP)
    p.add_argument("--results", default="results/compare")
    shared.add(
        p.add_argument,
        (shared.REPEATS, shared.MAX_REPEATS, shared.EXECUTOR, shared.RAY_ADDRESS, shared.STACK, shared.HEAVY),
    )
    p.add_argument(
        "--judge",
        type=_families,
        default=FAMILIES,
        metavar="FAMILY[,FAMILY]",
        help=f"figure families decided ({','.join(FAMILIES)}; default all); others are reported. Checks and dump "
        "entry names are always decided",
    )
    p.add_argument(
        "--accept",
        metavar="REASON",
        default=config.ACCEPT.get(),
        type=_accept_reason,
        help=f"head's regressions are an intended change (REASON: the pull request's label {ACCEPT_LABEL}, who "
        "decided): every finding is still reported, the verdict is ACCEPTED (exit 0) unless an error or an undecided "
        "figure remains; default $HARNESS_ACCEPT",
    )
    p.add_argument(
        "--merge-base",
        action="store_true",
        help="compare head with the merge base of --base and --head (both <repository>@<ref> of one repository): "
        "the pull request's change alone, not what the base branch merged after it branched (a merge commit with "
        "--base its first parent compares as given); a head that is not a descendant of the base is refused",
    )
    p.set_defaults(func=compare.cmd_compare)
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
    p.set_defaults(func=duet.cmd_duet)
    p = sub.add_parser("issue", help="the morning after: the issue of a night that is a verdict on verl")
    p.add_argument("--night", action="append", default=[], metavar="DIR", help="a night's results (outcome.json)")
    p.add_argument("--history", action="append", default=[], metavar="CHECK_JSON", help="a history check's JSON")
    p.add_argument("--title", required=True, help="the issue's title")
    p.add_argument("--run", default="", metavar="URL", help="the night's CI run")
    p.add_argument("--page", action="append", default=[], metavar="URL", help="the page of the nights")
    p.add_argument("--out", required=True, metavar="FILE", help="the issue's body (written only if there is one)")
    p.add_argument("--state", metavar="FILE", help="verdict, green (close the open issue) or undecided (an error)")
    p.set_defaults(func=issue.cmd_issue)
    p = sub.add_parser("caller", help="the workflow verl adds to call this harness, pinned to one of its commits")
    p.add_argument("kind", choices=list(caller.CALLERS), help="pr: the pull-request gates; nightly; multinode")
    p.add_argument("--ref", required=True, help="the harness commit to pin (a ref of this checkout)")
    p.add_argument("--repository", default=caller.HOME, metavar="OWNER/NAME", help="where verl finds the harness")
    p.set_defaults(func=caller.cmd_caller)
    p = sub.add_parser("pair", help="the pair a pull-request gate compares: head and its merge base with --base")
    p.add_argument("--base", required=True, metavar="SPEC", help="<repository>@<ref>: the base branch's commit")
    p.add_argument("--head", required=True, metavar="SPEC", help="<repository>@<ref> of the same repository")
    p.set_defaults(func=pair.cmd_pair)
    p = sub.add_parser("dry-run", help="print what each training would run (image, devices, mounts, env, argv)")
    p.add_argument("paths", nargs="+")
    p.add_argument("--results", default="results", help="the results dir the real run would use (nothing written)")
    p.add_argument("--executor", choices=list(EXECUTORS), help="as run's: describe the runs under this executor")
    shared.add(p.add_argument, (shared.RAY_ADDRESS,))
    shared.add(p.add_argument, (*shared.TARGET, shared.STACK))
    p.set_defaults(func=dry_run.cmd_dry_run)
    p = sub.add_parser("target", help="make (or reuse) the environment of a verl/msprobe under test and describe it")
    shared.add(p.add_argument, (*shared.TARGET, shared.STACK))
    p.add_argument("--json", action="store_true", help="also print the target block results.json records")
    p.add_argument(
        "--stages",
        action="store_true",
        help="list every DistProfiler.annotate role of that verl (file:line) and what its precision_debugger does "
        "with each (read by ast, not imported; no environment made for a checkout, a repository or a wheel)",
    )
    p.add_argument(
        "--trigger", action="store_true", help="the pull-request gate's trigger (paths, changed lines) it implies"
    )
    p.add_argument(
        "--pins",
        action="store_true",
        help="what that verl's own uv.lock pins (its cpu extra) and where each pin comes from; without the lock's "
        "own sources, what the package index gives instead (read, nothing installed)",
    )
    p.set_defaults(func=target.cmd_target)
    p = sub.add_parser("image", help="make container images for the docker executor")
    isub = p.add_subparsers(dest="image_command", required=True)
    p = isub.add_parser("build-cpu", help="import a bare rootfs image that runs this venv (no registry; CI uses it)")
    p.add_argument("--tag", default=ExecutorSettings().options("docker").image)
    p.add_argument("--check", action="store_true", help="then import torch, msprobe, verl and harness inside it")
    p.set_defaults(func=image.cmd_build_cpu)
    p = isub.add_parser("ascend-context", help="the Ascend image's build context for a verl under test, and its build")
    shared.add(p.add_argument, shared.TARGET)
    p.add_argument("--out", required=True, help="an empty dir for the build context")
    p.add_argument("--tag", default="verl-msprobe-harness:ascend-target")
    p.add_argument("--build", action="store_true", help="then run docker build (Ascend runners)")
    p.add_argument("--base-tag", help="the base image's tag to build on (default: Dockerfile.ascend's)")
    p.add_argument(
        "--build-arg",
        action="append",
        default=[],
        type=_key_value,
        metavar="KEY=VALUE",
        help="one more Dockerfile.ascend ARG (VERL_ASCEND_IMAGE, PIP_INDEX_URL, PIP_TRUSTED_HOST, VERL_NO_DEPS_EXTRAS)",
    )
    p.set_defaults(func=image.cmd_ascend_context)
    p = sub.add_parser("schema", help="print (or write) the scenario format's JSON Schema")
    p.add_argument("-o", "--output")
    p.set_defaults(func=schema.cmd_schema)
    p = sub.add_parser(
        "wheelhouse",
        help="the harness's runtime closure as wheels in DIR, for a runner without network (pip install --no-index "
        "--find-links DIR -r DIR/requirements.txt there)",
    )
    p.add_argument("dir", metavar="DIR", help="an empty or new dir")
    p.add_argument(
        "--python-version",
        default=f"{sys.version_info.major}.{sys.version_info.minor}",
        metavar="X.Y",
        help="the runner's Python (default this one's)",
    )
    p.add_argument(
        "--platform",
        action="append",
        default=[],
        metavar="TAG",
        help="the runner's wheel platform tags, e.g. manylinux_2_28_x86_64 (repeatable; default this machine's)",
    )
    p.add_argument("--held", type=Path, metavar="FREEZE", help="the runner's `pip freeze`: what it has is not packed")
    p.set_defaults(func=wheelhouse.cmd_wheelhouse)
    p = sub.add_parser("baseline", help="baselines: merge results directories into one")
    bsub = p.add_subparsers(dest="baseline_command", required=True)
    m = bsub.add_parser("merge", help="merge results dirs (figures averaged) into a baseline file")
    m.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    m.add_argument("-o", "--output", required=True)
    m.add_argument("--tolerances-from", metavar="BASELINE", help="carry calibrated tolerances forward from a baseline")
    _policy_args(m)
    m.set_defaults(func=baseline.cmd_merge)
    p = sub.add_parser("calibrate", help="baseline plus tolerances from N repeated runs of the same scenarios")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument("-o", "--output", required=True)
    _policy_args(p)
    p.set_defaults(func=baseline.cmd_calibrate)
    p = sub.add_parser(
        "gate", help="compare results against a baseline; exit 1 on a regression, 3 when the noise leaves one undecided"
    )
    p.add_argument("--baseline", required=True)
    p.add_argument("--results", required=True, nargs="+", metavar="RESULTS_DIR")
    p.add_argument("--compare-across-env", action="store_true", help="compare even across device kind / msprobe")
    p.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")
    p.add_argument("--judge", type=_families, default=FAMILIES, metavar="FAMILY[,FAMILY]",
                   help=f"figure families decided ({','.join(FAMILIES)}; default all); others are reported (a "
                   "nightly whose duet decides overhead side by side gates disk,structure)")  # fmt: skip
    p.set_defaults(func=gate.cmd_gate)
    p = sub.add_parser("report", help="markdown summary, PNG per scenario and verl's doc tables")
    p.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    p.add_argument(
        "--gate",
        action="append",
        metavar="GATE_JSON",
        help="what `gate --json` decided for these results dirs (repeatable: one per gate run); the report never "
        "judges again",
    )
    p.add_argument("--out", default="report")
    p.set_defaults(func=report.cmd_report)
    p = sub.add_parser("junit-merge", help="merge JUnit files: each testcase once, with its properties")
    p.add_argument("output", metavar="OUT")
    p.add_argument("inputs", nargs="+", metavar="IN")
    p.set_defaults(func=junit_merge.cmd_junit_merge)
    p = sub.add_parser(
        "github",
        help="what a GitHub job publishes of compare.json or a gate's JSON (stdout): annotations (::error lines, "
        "one per finding) or the step summary",
    )
    p.add_argument("what", choices=["annotations", "summary"])
    p.add_argument("json", metavar="JSON", help="compare.json, or the file of `harness gate --json`")
    p.add_argument("--markdown", metavar="MD", help="summary: the report below the verdict (report/summary.md)")
    p.add_argument("--heading", default="", help="summary: a heading above the verdict")
    p.set_defaults(func=github.cmd_github)
    p = sub.add_parser("numerics", help="the numerics report of two runs' dumps: HEAD against BASE")
    p.add_argument("base", help="base's on-dump tree (<results>/<scenario>/on/dumps) or a dump.json")
    p.add_argument("head", help="head's, the same kind")
    p.add_argument("--results", default="numerics-results", help="where the CSVs go (default ./numerics-results)")
    p.add_argument("--nonfinite-ok", action="append", default=[], metavar="REGEX", type=_regex,
                   help="entries whose non-pass rows are counted apart (a scenario's expect.nonfinite_ok)")  # fmt: skip
    p.add_argument(
        "--engine", choices=ENGINES, help="who computes the statistics (default HARNESS_NUMERICS, else harness)"
    )
    p.add_argument("--python", default=sys.executable, type=_executable,
                   help="the python with msprobe, for -da and --engine msprobe")  # fmt: skip
    p.add_argument("--label", default="numerics", help="the name the findings carry (a scenario's)")
    p.set_defaults(func=numerics.cmd_numerics)
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
    p.add_argument("--executor", choices=list(EXECUTORS))
    shared.add(p.add_argument, (shared.RAY_ADDRESS, shared.HEAVY))
    p.add_argument("--msprobe", metavar="SPEC", help="the msprobe of every probe: a version or a .whl")
    p.set_defaults(func=bisect.cmd_bisect)
    _history(sub)
    return parser


def _history(sub: argparse._SubParsersAction) -> None:
    help = "overhead decided across nights: append a night, check for change points, accept an intended change"
    h = sub.add_parser("history", help=f"{help} (docs/history.md)").add_subparsers(
        dest="history_command", required=True
    )
    p = h.add_parser("append", help="add one night: every figure of every scenario of a results dir, its identity")
    p.add_argument("history", metavar="HISTORY", help="the history file (made when absent)")
    # dest night, not results: a command's ``results`` is where a harness bug's traceback is kept, never an input
    p.add_argument("night", metavar="RESULTS_DIR", help="the night's results dir (read, never written)")
    p.add_argument("--date", help="the night's day, YYYY-MM-DD (default: today, UTC)")
    p.add_argument(
        "--runner",
        help="the runner's name (default: the machines each results.json says trained it, else $RUNNER_NAME, else "
        "the host's name)",
    )
    p.add_argument("--verl-repo", metavar="REPO", help="a verl clone: the commit's position in verl's first-parent "
                   "history (default: the target's own repository when it is a local one)")  # fmt: skip
    p.add_argument("--run-url", metavar="URL", help="the CI run's page, linked from the page of the nights "
                   "(default: this GitHub Actions run, from its GITHUB_* variables)")  # fmt: skip
    p.add_argument("--duet", metavar="DUET_DIR", help="the night's duet (harness duet's results dir): its head runs "
                   "join the night's, its base runs and verdict are recorded with it")  # fmt: skip
    p.add_argument("--keep", type=_positive, default=KEEP_NIGHTS, metavar="N",
                   help=f"nights kept: the oldest past N are pruned, and said (default {KEEP_NIGHTS})")  # fmt: skip
    p.set_defaults(func=history.cmd_append)
    p = h.add_parser("check", help="change points of every overhead series: exit 1 a confirmed regression, 3 a "
                     "suspected one, 2 bad input or nothing compared, 0 none")  # fmt: skip
    p.add_argument("history", metavar="HISTORY")
    p.add_argument("--confirm-nights", type=_positive, default=CONFIRM_NIGHTS, metavar="K",
                   help=f"further nights a change point stays significant over to be confirmed (default "
                   f"{CONFIRM_NIGHTS})")  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="the verdict, each change point's commit range and the bisects a "
                   "nightly runs on it (typed, versioned: what workflows read)")  # fmt: skip
    p.add_argument("--nightly", action="store_true", help="exit as a nightly's history job does: a "
                   "suspected regression warns (0), every series at its first night: started (0)")  # fmt: skip
    p.set_defaults(func=history.cmd_check)
    p = h.add_parser("bisects", help="the overhead bisects a nightly runs on a confirmed regression: one line each, "
                     "SCENARIO GOOD BAD, from history check --json's file")  # fmt: skip
    p.add_argument("checks", metavar="CHECK_JSON", nargs="+", help="one per history (a bisect they share runs once)")
    p.set_defaults(func=history.cmd_bisects)
    p = h.add_parser("publish", help="the page of the nights: a static site, one chart a figure over the nights, "
                     "change points marked (docs/history.md)")  # fmt: skip
    p.add_argument("history", metavar="HISTORY")
    p.add_argument("--out", required=True, metavar="DIR", help="the site's directory (index.html, a page a scenario)")
    p.add_argument("--verl-url", default="https://github.com/verl-project/verl", metavar="URL",
                   help="verl's repository on the web: each night's commit linked (default: %(default)s)")  # fmt: skip
    p.set_defaults(func=history.cmd_publish)
    p = h.add_parser("accept", help="acknowledge an intended change: later nights stop failing on it")
    p.add_argument("history", metavar="HISTORY")
    p.add_argument("change", metavar="CHANGE", help="as the check prints it: SCENARIO:METRIC@NIGHT")
    p.add_argument("--reason", required=True, help="why the change is intended (reports show it)")
    p.set_defaults(func=history.cmd_accept)


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a regular expression ({exc})") from None
    return text


def _executable(text: str) -> str:
    """A program to run: a path or a name on PATH that is an executable file (it was only started where a stage
    diverged: a traceback there, a pass where none did)."""
    if (found := shutil.which(text)) is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not an executable file (a path, or a name on PATH)")
    return found


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


def _policy_args(p: argparse.ArgumentParser) -> None:
    defaults = ", ".join(f"{f} k={v.k:g} floor={v.floor:g}" for f, v in DEFAULT_RULES.items())
    p.add_argument("--k", action="append", metavar="FAMILY=K", help=f"noise multiplier per family ({defaults})")
    p.add_argument("--floor", action="append", metavar="FAMILY=F", help="smallest relative tolerance per family")


def _families(text: str) -> tuple[str, ...]:
    if bad := [f for f in text.split(",") if f not in FAMILIES]:
        raise argparse.ArgumentTypeError(f"unknown figure families {bad}; expected some of {', '.join(FAMILIES)}")
    return tuple(text.split(","))


def _accept_reason(text: str) -> str:
    """``--accept``'s reason: printed in the verdict line, so one printable line of reasonable length."""
    if not text.strip() or not text.isprintable() or len(text) > 200:
        raise argparse.ArgumentTypeError(
            f"{text[:60]!r}: the reason an intended change is accepted is one printable line of 1-200 characters "
            f"(e.g. 'label {ACCEPT_LABEL}')"
        )
    return text.strip()


def _key_value(text: str) -> str:
    if "=" not in text or not text.split("=", 1)[0]:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return text


def unprintable(arg: str) -> str:
    """Why an argument is refused before anything reads it: a byte that is not UTF-8 (Python keeps it as a lone
    surrogate) ends a report or a print in a traceback; a line break or another control character, printed in a
    verdict line, could forge one (``--series $'main\\nREGRESSED'``)."""
    try:
        arg.encode()
    except UnicodeEncodeError:
        return f"{os.fsencode(arg)!r} is not UTF-8 (a path with such a byte: rename it)"
    return f"{arg!r} holds a line break or another control character"
