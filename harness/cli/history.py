"""``python -m harness history``: the nightly's overhead decided across nights (docs/history.md).

``append HISTORY RESULTS_DIR`` adds a night, ``check HISTORY`` runs the change-point detector over every overhead
series (exit 1 a confirmed regression, 3 a suspected one waiting for nights, 2 bad input or nothing compared, 0
none), ``accept HISTORY CHANGE --reason TEXT`` acknowledges an intended change. Each that writes writes the history
whole to a new file renamed over the old one, under a lock beside it (two nightlies of one history never lose a
night); a reader (``check``, ``publish``) takes no lock: the file it opens is a whole one, old or new, and a history
on a read-only place (a read-only mount, a branch checked out read only) is read as any other. A place that cannot
take the lock or the file is one line naming the history, exit 2 (``safeio.cannot_write``)."""

from __future__ import annotations

import argparse
import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from harness.history import checkdoc
from harness.history.detect import CONFIRM_NIGHTS, Settings
from harness.history.night import night_of, web_url
from harness.history.store import KEEP_NIGHTS, History, HistoryError, add
from harness.history.verdict import accept, check_history
from harness.safeio import cannot_write, output_path


@contextlib.contextmanager
def _writing(history: Path) -> Iterator[None]:
    """The lock of a history being written (``.HISTORY.lock`` beside it)."""
    lock = FileLock(str(history.with_name(f".{history.name}.lock")))
    try:
        lock.acquire()
    except OSError as exc:  # a read-only or another user's place (the history's, named), or the lock a link
        named = lock.lock_file if exc.errno == errno.ELOOP else f"HISTORY {history}"
        raise cannot_write(Path(lock.lock_file), exc, named=named) from None
    try:
        yield
    finally:
        lock.release()


def cmd_append(args: argparse.Namespace) -> int:
    path = output_path(args.history, "HISTORY", [args.night, *([args.duet] if args.duet else [])])
    verl_repo = Path(args.verl_repo) if args.verl_repo else None
    duet = Path(args.duet) if args.duet else None
    night = night_of(Path(args.night), args.date, args.runner, verl_repo, args.run_url, duet)
    with _writing(path):
        history, lines = add(History.read(path), night, args.keep)
        history.write(path)
    for line in lines:
        print(line)
    if night.duet is not None:
        print(f"duet ({night.duet.mode}): {night.duet.verdict}; {night.duet.lines[-1] if night.duet.lines else ''}")
    print(f"{path}: {len(history.nights)} nights")
    return 0


def _existing(history: str) -> Path:
    path = Path(history)
    if not path.exists():
        raise HistoryError(f"{path}: no such file (append a night first: history append {path} RESULTS_DIR)")
    return path


def cmd_check(args: argparse.Namespace) -> int:
    path = _existing(args.history)
    history = History.read(path)
    verdict = check_history(history, Settings(confirm_nights=args.confirm_nights))
    doc = checkdoc.doc_of(verdict, history)
    if args.json:
        doc.write(output_path(args.json, "--json", [path]))
    for line in verdict.lines():
        print(line)
    if args.nightly:
        print(f"history check (nightly): {doc.nightly_verdict}")
        return doc.nightly_exit
    return verdict.exit_code


def cmd_bisects(args: argparse.Namespace) -> int:
    seen: set[str] = set()
    for check in args.checks:
        for scenario, r in checkdoc.read(Path(check)).bisects():
            line = f"{scenario} {r.good} {r.bad}"
            if line not in seen:
                seen.add(line)
                print(line)
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    path = output_path(_existing(args.history), "HISTORY")
    with _writing(path):
        history = accept(History.read(path), args.change, args.reason)
        history.write(path)
    made = history.accepted[-1]
    print(f"accepted {made.change}: '{made.reason}'; later nights stop failing on it")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from harness.report.nights import publish  # matplotlib only when used

    path = _existing(args.history)
    web_url(args.verl_url, "--verl-url")
    out = output_path(args.out, "--out", [path], directory=True)
    history = History.read(path)
    site = publish(history, out, args.verl_url.rstrip("/"))
    print(f"{site.index}: {len(site.pages)} scenarios, {site.charts} charts over {len(history.nights)} nights")
    return 0


def declare(sub: argparse._SubParsersAction) -> None:
    """``history``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
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
    p.set_defaults(func=cmd_append)
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
    p.set_defaults(func=cmd_check)
    p = h.add_parser("bisects", help="the overhead bisects a nightly runs on a confirmed regression: one line each, "
                     "SCENARIO GOOD BAD, from history check --json's file")  # fmt: skip
    p.add_argument("checks", metavar="CHECK_JSON", nargs="+", help="one per history (a bisect they share runs once)")
    p.set_defaults(func=cmd_bisects)
    p = h.add_parser("publish", help="the page of the nights: a static site, one chart a figure over the nights, "
                     "change points marked (docs/history.md)")  # fmt: skip
    p.add_argument("history", metavar="HISTORY")
    p.add_argument("--out", required=True, metavar="DIR", help="the site's directory (index.html, a page a scenario)")
    p.add_argument("--verl-url", default="https://github.com/verl-project/verl", metavar="URL",
                   help="verl's repository on the web: each night's commit linked (default: %(default)s)")  # fmt: skip
    p.set_defaults(func=cmd_publish)
    p = h.add_parser("accept", help="acknowledge an intended change: later nights stop failing on it")
    p.add_argument("history", metavar="HISTORY")
    p.add_argument("change", metavar="CHANGE", help="as the check prints it: SCENARIO:METRIC@NIGHT")
    p.add_argument("--reason", required=True, help="why the change is intended (reports show it)")
    p.set_defaults(func=cmd_accept)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)
