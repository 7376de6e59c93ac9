"""The bad-input table as regression tests: every row of tests/bad_input_rows.py (the three hostile batteries, the
same list benchmarks/bad_input_table.py prints) gives its exit code and its line, no traceback, and changes no file
that was there before it ran. In-process where the row can be (``main(argv)``: the harness's whole command line,
argparse included); in a child process where a hang would stop the tests, pytest itself is the command, or a signal or
a mount namespace is the case."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from bad_input_rows import CLASSES, ROWS, Row, files, matches, run_child, run_in_process, shown


def _ids(rows: list[Row]) -> list[str]:
    return [f"{r.klass} {r.name}" for r in rows]


def _check(row: Row, code: int, text: str, tmp: Path, before: dict[str, str]) -> None:
    lines = shown(text, tmp)
    assert "Traceback" not in text, text[-3000:]
    assert code == row.code and matches(row.line, lines), f"exit {code}; printed:\n" + "\n".join(lines[-15:])
    after = files(tmp)
    assert not [p for p, digest in before.items() if after.get(p) != digest], "a file there before was changed"


IN_PROCESS = [r for r in ROWS if not r.child]
CHILD = [r for r in ROWS if r.child]


@pytest.mark.parametrize("row", IN_PROCESS, ids=_ids(IN_PROCESS))
def test_a_bad_input_row(row: Row, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        case = row.make(tmp_path, stack)
        before = files(tmp_path)
        code, text = run_in_process(case, tmp_path)
    _check(row, code, text, tmp_path, before)


@pytest.mark.integration
@pytest.mark.parametrize("row", CHILD, ids=_ids(CHILD))
def test_a_bad_input_row_in_a_child_process(row: Row, tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        case = row.make(tmp_path, stack)
        before = files(tmp_path)
        code, text = run_child(case, tmp_path)
    _check(row, code, text, tmp_path, before)


def test_every_class_of_the_three_batteries_has_three_rows_or_more() -> None:
    counts = {klass: sum(r.klass == klass for r in ROWS) for klass in CLASSES}
    assert {k: n for k, n in counts.items() if n < 3} == {}
    assert {r.klass for r in ROWS} <= set(CLASSES)
    names = [r.name for r in ROWS]
    assert len(names) == len(set(names)), "every row's name once (the table's and the tests' ids)"


@pytest.mark.integration  # a pytest of its own: the summary is the run's
def test_a_run_of_the_table_says_how_many_rows_ran_and_their_minutes() -> None:
    """.ci/run's output says the table's count and minutes, read off the run that tested the rows."""
    import re
    import subprocess
    import sys

    argv = [sys.executable, "-m", "pytest", __file__, "-q", "-p", "no:cacheprovider", "-k", "3.12 or 3.4 "]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, cwd=Path(__file__).parent)
    said = re.search(r"^bad-input table: (\d+) rows ran in \d+\.\d min \(\d+ s of test time\)$", out.stdout, re.M)
    passed = re.search(r"^(\d+) passed", out.stdout, re.M)
    assert said and passed and said[1] == passed[1] and int(said[1]) >= 6, out.stdout[-2000:]
