"""``python -m harness history``: the nightly's overhead decided across nights (docs/history.md).

``append HISTORY RESULTS_DIR`` adds a night, ``check HISTORY`` runs the change-point detector over every overhead
series (exit 1 a confirmed regression, 3 a suspected one waiting for nights, 2 bad input or nothing compared, 0
none), ``accept HISTORY CHANGE --reason TEXT`` acknowledges an intended change. Each writes the history whole to a
new file renamed over the old one, under a lock beside it (two nightlies of one history never lose a night)."""

from __future__ import annotations

import argparse
from pathlib import Path

from filelock import FileLock

from harness.history import checkdoc
from harness.history.detect import Settings
from harness.history.night import night_of, web_url
from harness.history.store import History, HistoryError, add
from harness.history.verdict import accept, check_history
from harness.safeio import output_path


def _lock(history: Path) -> FileLock:
    return FileLock(str(history.with_name(f".{history.name}.lock")))


def cmd_append(args: argparse.Namespace) -> int:
    path = output_path(args.history, "HISTORY", [args.results, *([args.duet] if args.duet else [])])
    verl_repo = Path(args.verl_repo) if args.verl_repo else None
    duet = Path(args.duet) if args.duet else None
    night = night_of(Path(args.results), args.date, args.runner, verl_repo, args.run_url, duet)
    with _lock(path):
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
    with _lock(path):
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
    path = _existing(args.history)
    with _lock(path):
        history = accept(History.read(path), args.change, args.reason)
        history.write(path)
    print(f"accepted {args.change}: {args.reason.strip()!r}; later nights stop failing on it")
    return 0


def cmd_publish(args: argparse.Namespace) -> int:
    from harness.report.nights import publish  # matplotlib only when used

    path = _existing(args.history)
    web_url(args.verl_url, "--verl-url")
    out = output_path(args.out, "--out", [path], directory=True)
    with _lock(path):
        history = History.read(path)
    site = publish(history, out, args.verl_url.rstrip("/"))
    print(f"{site.index}: {len(site.pages)} scenarios, {site.charts} charts over {len(history.nights)} nights")
    return 0
