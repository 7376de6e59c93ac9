"""``python -m harness history``: the nightly's overhead decided across nights (docs/history.md).

``append HISTORY RESULTS_DIR`` adds a night, ``check HISTORY`` runs the change-point detector over every overhead
series (exit 1 a confirmed regression, 3 a suspected one waiting for nights, 2 bad input or nothing compared, 0
none), ``accept HISTORY CHANGE --reason TEXT`` acknowledges an intended change. Each that writes writes the history
whole to a new file renamed over the old one, under a lock beside it (two nightlies of one history never lose a
night); a reader (``check``, ``publish``) takes no lock: the file it opens is a whole one, old or new, and a history
on a read-only place (a read-only mount, a branch checked out read only) is read as any other. A place that cannot
take the lock or the file is one line naming the history, exit 2 (``safeio.cannot_write``).

``night`` and ``fetch`` are what a nightly's history job runs (``.ci/history``, their thin caller): the history kept
in a store between nights (``harness.history.stores``: a git branch, or a directory), a night appended, checked,
published and saved back there; the history file as the store holds it now, for the duet."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import errno
import io
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock

from harness import outcomes
from harness.cli import github
from harness.errors import HarnessError, one_line, unexpected
from harness.history import checkdoc
from harness.history.detect import CONFIRM_NIGHTS, Settings
from harness.history.night import night_of, web_url
from harness.history.store import KEEP_NIGHTS, History, HistoryError, add
from harness.history.stores import Checkout, Directory, GitBranch, HistoryStore, Moved, Refused, Unreadable
from harness.history.verdict import accept, check_history
from harness.job import command
from harness.outside import redact
from harness.safeio import cannot_write, output_path, write_atomic


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



TITLE = "precision_debugger history"  # the title of the history job's own annotations


class _Job:
    """What a history job publishes besides its output: annotations (printed, and kept in RESULTS/annotations.txt
    for the job's artifact) and the step summary; every line redacted as it is stored, as it is printed."""

    def __init__(self, results: Path, summary: Path | None) -> None:
        self.results, self.summary = results, summary
        results.mkdir(parents=True, exist_ok=True)
        (results / "annotations.txt").write_text("")

    def annotate(self, line: str) -> None:
        print(line)
        with open(self.results / "annotations.txt", "a", encoding="utf-8") as f:
            f.write(redact(line) + "\n")

    def summarize(self, text: str) -> None:
        if self.summary is not None:
            self.summary.parent.mkdir(parents=True, exist_ok=True)
            with open(self.summary, "a", encoding="utf-8") as f:
                f.write(redact(text))

    def error(self, message: str) -> int:
        """One error annotation and the summary's line; the exit of a job that records nothing."""
        self.annotate(f"::error title={TITLE}::{message}")
        self.summarize(f"❌ **ERROR**: {message}\n\n")
        return outcomes.EXIT_ERROR

    def notice(self, message: str) -> None:
        self.annotate(f"::notice title={TITLE}::{message}")


def _step(argv: list[str]) -> tuple[int, str, str]:
    """One ``python -m harness`` command of the history job run here, as its own process ran it before (its exit,
    stdout and stderr, each redacted): a bad input or a failed step is its one line and exit 2, never the job's end."""
    parser = argparse.ArgumentParser(prog="python -m harness")
    sub = parser.add_subparsers(dest="command", required=True)
    declare(sub)
    github.declare(sub)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            args = parser.parse_args(argv)
            code = args.func(args)
        except SystemExit as exc:  # argparse's refusal: its usage line on stderr
            code = exc.code if isinstance(exc.code, int) else outcomes.EXIT_ERROR
        except HarnessError as exc:
            print(one_line(exc), file=sys.stderr)
            code = outcomes.EXIT_ERROR
        except Exception as exc:  # a harness bug in a step: its line, exit 2, as its own process said it
            print(unexpected(exc), file=sys.stderr)
            code = outcomes.EXIT_ERROR
    return code, redact(out.getvalue()), redact(err.getvalue())


def _last(text: str) -> str:
    lines = text.splitlines()
    return lines[-1] if lines else ""


def _store(args: argparse.Namespace) -> HistoryStore:
    if args.directory:
        return Directory(Path(args.directory))
    if not args.branch:
        raise HistoryError("--git REMOTE needs --branch BRANCH: the branch of REMOTE the history is kept on")
    return GitBranch(args.git, args.branch)


def cmd_night(args: argparse.Namespace) -> int:
    """The nightly's history job: each FILE=RESULTS_DIR[:DUET_DIR] appended to its history FILE in a copy of the
    store, each FILE checked (``check --nightly --json``: annotations, summary) and its page published (docs/ beside
    it), the bisects the checks plan written, and the copy saved only if the store is where it was taken. Exit: the
    worst of the checks' nightly exits (``outcomes.steps_exit``), 2 when a night could not be appended or saved."""
    store, results = _store(args), Path(args.results)
    job = _Job(results, Path(args.summary) if args.summary else results / "step-summary.md")
    if not args.pairs:
        return job.error(
            "no night's results to append (the nightly's jobs kept none): this night is not recorded; the nightly's "
            "own jobs say why"
        )
    job.summarize(f"## precision_debugger: the history of nights ({store.title})\n\n")
    try:
        copy = store.checkout(results / "branch")
    except Unreadable as exc:
        return job.error(f"{exc}: this night is not recorded; a runner or token problem, not a verdict on verl")
    except Refused as exc:
        return job.error(f"{exc} (this night is not recorded)")
    if copy.note:
        job.notice(f"{copy.note}: this night starts it")
    codes = [outcomes.EXIT_PASS]
    files: list[str] = []
    appended: list[str] = []
    for pair in args.pairs:
        file, has_dir, night = pair.partition("=")
        if not has_dir or not file or "/" in file or file.startswith("."):
            return job.error(f"{pair}: not FILE=RESULTS_DIR[:DUET_DIR] with FILE a plain name (cpu.json)")
        night, has_duet, duet = night.partition(":")
        argv = ["history", "append", str(copy.work / file), night]
        argv += ["--verl-repo", args.verl_repo] if args.verl_repo else []
        argv += ["--duet", duet] if has_duet else []
        code, out, err = _step(argv)
        print(out, end="")
        (results / "append.err").write_text(err)
        if code != outcomes.EXIT_PASS:
            job.error(f"{_last(err)} (night {night} not appended to {file})")
            codes.append(code)
        else:
            appended.append(file)
        if file not in files:
            files.append(file)
    try:
        codes += [_check_and_publish(job, copy, file, file in appended, args.pages_url) for file in files]
    except _Stopped as stop:
        return stop.code
    if checks := sorted(str(p) for p in results.glob("*-check.json")):
        code, out, err = _step(["history", "bisects", *checks])  # the bisect job's plan
        (results / "bisects.txt").write_text(out)
        print(err, end="", file=sys.stderr)
        codes.append(code)
    date = datetime.datetime.now(datetime.UTC).date().isoformat()
    try:
        print(store.save(copy, [*files, "docs"], f"nights of {date}: {' '.join(files)}"))
    except Moved as exc:
        job.error(f"{exc}: this night is not recorded; rerun this job")
        codes.append(outcomes.EXIT_ERROR)
    status = outcomes.steps_exit(codes)
    print(f"history: exit {status}")
    return status


class _Stopped(Exception):
    """A step the history job cannot go on without failed (its annotations, its summary): the job ends with its
    exit, nothing saved."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def _check_and_publish(job: _Job, copy: Checkout, file: str, appended: bool, pages_url: str | None) -> int:
    """``file`` checked, its verdict annotated and summarized, its page published into the copy's docs/ where this
    night appended to it: the check's and the page's exit (0 where the copy holds no such history)."""
    if not (copy.work / file).is_file():
        return outcomes.EXIT_PASS
    results, stem = job.results, file.removesuffix(".json")
    doc = results / f"{stem}-check.json"
    code, out, err = _step(["history", "check", str(copy.work / file), "--nightly", "--json", str(doc)])
    (results / f"{stem}-check.txt").write_text(out)
    print(out, end="")
    print(err, end="", file=sys.stderr)
    if doc.is_file():
        said, lines, err = _step(["github", "annotations", str(doc)])
        for line in lines.splitlines():
            job.annotate(line)
        if said != outcomes.EXIT_PASS:
            print(err, end="", file=sys.stderr)
            raise _Stopped(said)
        said, text, err = _step(["github", "summary", str(doc), "--heading", file])
        job.summarize(re.sub(r"^## ", "### ", text, flags=re.M))
        if said != outcomes.EXIT_PASS:
            print(err, end="", file=sys.stderr)
            raise _Stopped(said)
    else:
        job.error(f"history check of {file} wrote no verdict: {_last(out)}")
    # the page of the nights (docs/history.md), kept with the job's artifact and in the store (docs/, where GitHub
    # Pages serves it from: a link that lasts); a file this night added nothing to keeps its page
    if not appended:
        return code
    site = results / "site" / stem
    published, out, err = _step(["history", "publish", str(copy.work / file), "--out", str(site)])
    print(out, end="")
    print(err, end="", file=sys.stderr)
    if site.is_dir():
        docs = copy.work / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        (docs / ".nojekyll").touch()  # served as written
        shutil.rmtree(docs / stem, ignore_errors=True)
        shutil.copytree(site, docs / stem)
        if pages_url:
            job.summarize(f"The page of the nights: {pages_url}{stem}/\n\n")
    return outcomes.steps_exit([code, published])


def cmd_fetch(args: argparse.Namespace) -> int:
    """The history FILE as the store holds it now, copied to OUT (the nightly's duet reads its last good night from
    it). No store or no FILE yet: no OUT, one notice; the store unreadable: no OUT, one error annotation, exit 0 (the
    night runs; its duet is decided by the history alone, and says so)."""
    file, out = args.file, Path(args.out)
    if not file or "/" in file or file.startswith("."):
        print(f"{file}: not a plain file name (cpu.json)", file=sys.stderr)
        return outcomes.EXIT_ERROR
    store, results = _store(args), Path(args.results)
    job = _Job(results, None)
    if out.is_dir() and not out.is_symlink():
        shutil.rmtree(out)
    else:
        out.unlink(missing_ok=True)
    try:
        got = store.read(file, results / "read")
    except Unreadable as exc:
        why = f"{exc}: tonight's duet has no base, its overhead is decided by the history alone"
        job.annotate(command(outcomes.level(outcomes.EXIT_ERROR), TITLE, why))
        return outcomes.EXIT_PASS
    if got is None:
        job.notice(f"no {file} on {store.where()} yet: tonight's duet has no base (this night starts the history)")
        return outcomes.EXIT_PASS
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, got.data)
    print(f"history: {file} {got.at} read into {out}")
    return outcomes.EXIT_PASS

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
    stores = "the store: --git REMOTE --branch BRANCH (a branch of a git repository) or --directory DIR"
    p = h.add_parser("night", help="a nightly's history job: each night appended to its history in a copy of the "
                     "store, checked, its page published, the copy saved back only if the store did not move "
                     f"meanwhile ({stores}; .ci/history night)")  # fmt: skip
    _store_args(p)
    p.add_argument("--results", required=True, metavar="DIR",
                   help="the job's own files: each check's JSON and text, annotations.txt, bisects.txt (the bisects "
                   "the checks plan), site/FILE/ (each page)")  # fmt: skip
    p.add_argument("--summary", metavar="FILE", help="the step summary, appended to (default DIR/step-summary.md)")
    p.add_argument("--verl-repo", metavar="REPO", help="a verl clone holding the nights' commits (their "
                   "first-parent positions are recorded)")  # fmt: skip
    p.add_argument("--pages-url", metavar="URL", help="where GitHub Pages serves the store's docs/: the summary "
                   "links each history's page")  # fmt: skip
    p.add_argument("pairs", nargs="*", metavar="FILE=RESULTS_DIR[:DUET_DIR]",
                   help="a night's results dir appended to the history FILE (DUET_DIR: its duet, history append "
                   "--duet); several to one FILE: one night")  # fmt: skip
    p.set_defaults(func=cmd_night)
    p = h.add_parser("fetch", help=f"the history FILE as the store holds it now, copied to OUT ({stores}; "
                     ".ci/history fetch)")  # fmt: skip
    _store_args(p)
    p.add_argument("--results", required=True, metavar="DIR", help="the job's own files (annotations.txt)")
    p.add_argument("file", metavar="FILE", help="the history's name in the store (cpu.json)")
    p.add_argument("out", metavar="OUT", help="where it is copied (none: no such history yet, or none readable)")
    p.set_defaults(func=cmd_fetch)


def _store_args(p: argparse.ArgumentParser) -> None:
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--git", metavar="REMOTE", help="a git repository (a URL or a path) holding the history on "
                       "--branch")  # fmt: skip
    where.add_argument("--directory", metavar="DIR", help="a directory holding the history files")
    p.add_argument("--branch", metavar="BRANCH", help="with --git: the branch the history is kept on")


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)
