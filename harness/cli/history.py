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
from harness.history.detect import Settings
from harness.history.night import night_of, web_url
from harness.history.store import History, HistoryError, add
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
