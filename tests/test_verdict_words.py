"""Verdict words are spelt in harness/outcomes.py alone: every other module of the harness says them through its
constants, so a word is changed in one place and no line of a report drifts from the exit it stands for.

A string literal (an f-string's text included, docstrings not) that is a verdict word, or opens with one (after
spaces, punctuation or console markup such as ``[red]``), is a verdict said outside outcomes.py. Prose that names a
word mid-sentence ("find the first FAIL") and labels that end in one ("TARGET ERROR") are not verdicts.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from harness import outcomes

ROOT = Path(__file__).resolve().parents[1]
OPENS = re.compile(r"^[\W_]*(?:\[[^\]]*\])?(" + "|".join(map(re.escape, outcomes.VERDICT_WORDS)) + r")\b")
# errors.py sits beside outcomes.py in the lowest layer and may not import it: its base label is held equal below.
OWN = {"harness/outcomes.py", "harness/errors.py"}


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def spelt(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line: WORD in 'literal'`` for each verdict word a module spells instead of naming outcomes'."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    name = path.relative_to(root).as_posix()
    found = [
        (node.lineno, f"{name}:{node.lineno}: {m.group(1)} in {node.value!r}: use harness.outcomes.{m.group(1)}")
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        if (m := OPENS.match(node.value))
    ]
    return [line for _, line in sorted(found)]


def test_no_module_but_outcomes_spells_a_verdict_word() -> None:
    modules = [p for p in sorted((ROOT / "harness").rglob("*.py")) if p.relative_to(ROOT).as_posix() not in OWN]
    found = [line for p in modules for line in spelt(p)]
    assert not found, "\n".join(found)


def test_the_check_catches_a_planted_literal(tmp_path: Path) -> None:
    planted = tmp_path / "harness" / "planted.py"
    planted.parent.mkdir()
    planted.write_text(
        '"""A docstring may say PASS."""\n'
        'LINE = f"{1}: INCONCLUSIVE after 2 runs"\n'
        'COLOURED = "[red]FAIL[/] x"\n'
        'PROSE = "find the first FAIL"\n'
        'LABEL = "TARGET ERROR"\n'
        'SAID = "REGRESSED"\n'
    )
    found = spelt(planted, tmp_path)
    assert [line.split(" in ")[0] for line in found] == [
        "harness/planted.py:2: INCONCLUSIVE",
        "harness/planted.py:3: FAIL",
        "harness/planted.py:6: REGRESSED",
    ], found


def test_the_error_label_beside_outcomes_is_its_word() -> None:
    from harness.errors import HarnessError

    assert HarnessError.label == outcomes.ERROR
