"""The bad-input table for people: every row of tests/bad_input_rows.py (the three hostile batteries), run as the
tests run it, with the exit code and the line it printed. The rows are the tests (tests/test_bad_input_table.py);
this only prints them. BAD marks a row whose exit or line is not its row's, or that printed a traceback or changed a
file that was there before it ran.

    .venv/bin/python benchmarks/bad_input_table.py            # markdown table on stdout
    .venv/bin/python benchmarks/bad_input_table.py "^3\\.10 "  # only the rows whose "class name" matches a regex
"""

from __future__ import annotations

import contextlib
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from bad_input_rows import CLASSES, ROWS, files, matches, run_child, run_in_process, shown  # noqa: E402


def main(only: str = "") -> int:
    print("| class | case | exit | s | line |\n|---|---|---|---|---|")
    bad = rows = 0
    for row in ROWS:
        if not re.search(only, f"{row.klass} {row.name}"):
            continue
        rows += 1
        tmp = Path(tempfile.mkdtemp(prefix="badin-"))
        try:
            with contextlib.ExitStack() as stack:
                case = row.make(tmp, stack)
                before = files(tmp)
                started = time.monotonic()
                code, text = (run_child if row.child else run_in_process)(case, tmp)
                seconds = time.monotonic() - started
            lines = shown(text, tmp)
            wrong = [why for why, failed in (
                (f"exit {code}, not {row.code}", code != row.code), ("not its line", not matches(row.line, lines)),
                ("a traceback", "Traceback" in text),
                ("changed a file", [p for p, d in before.items() if files(tmp).get(p) != d]),
            ) if failed]  # fmt: skip
            said = next((ln for ln in lines if matches(row.line, [ln])), lines[-1] if lines else "(nothing)")
            bad += bool(wrong)
            mark = f" BAD ({'; '.join(wrong)})" if wrong else ""
            cell, name = said.replace("|", "\\|")[:240], row.name.replace("|", "/")
            print(f"| {row.klass} | {name} | {code}{mark} | {seconds:.1f} | `{cell}` |", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    classes = len({r.klass for r in ROWS if re.search(only, f"{r.klass} {r.name}")})
    print(f"\n{rows} rows in {classes} of {len(CLASSES)} classes, {bad} BAD")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
