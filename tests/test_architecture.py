"""docs/architecture.md's table of packages is the code's: every package of ``harness/`` has a row, every module (and
sub-package) of a package is named in its row, and every module a row names exists in that package.

In the table a backticked lowercase name is a module (``name``) or a package (``name/``); anything else that is
backticked (a command, a class, a flag) is not one of those."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "harness"
ROW = re.compile(r"^\| (?:`(?P<package>\w+)/`|top level) \| (?P<text>.+) \|$", re.M)
NAME = re.compile(r"`([a-z_][a-z0-9_]*/?)`")


def _rows() -> dict[str, set[str]]:
    """Each row's names, by package ("" for the top level)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    return {m["package"] or "": set(NAME.findall(m["text"])) for m in ROW.finditer(text)}


def _names(directory: Path, deep: bool) -> set[str]:
    """The modules (``name``) and packages (``name/``) in ``directory``, or anywhere under it."""
    out = set()
    for path in directory.rglob("*") if deep else directory.iterdir():
        if path.suffix == ".py":
            out.add(path.stem)
        elif (path / "__init__.py").is_file():
            out.add(f"{path.name}/")
    return out


def test_every_package_has_a_row_and_every_row_a_package() -> None:
    packages = {p.name for p in HARNESS.iterdir() if (p / "__init__.py").is_file()}
    assert set(_rows()) == packages | {""}


@pytest.mark.parametrize("package", sorted(_rows()), ids=lambda p: p or "top level")
def test_a_row_names_every_module_of_its_package_and_nothing_else(package: str) -> None:
    named = _rows()[package]
    if package:
        directory = HARNESS / package
        assert _names(directory, deep=False) - named - {"__init__"} == set(), "modules the row does not name"
        assert named - _names(directory, deep=True) == set(), "names the row gives that are no module here"
    else:
        modules = {p.stem for p in HARNESS.glob("*.py")} - {"__init__"}
        assert named == modules


def test_no_module_of_the_harness_is_over_600_lines():
    """A module past 600 lines does several jobs (the numerics compare was 1,168 lines doing four): split it by job."""
    lines = {p.relative_to(HARNESS).as_posix(): len(p.read_text().splitlines()) for p in HARNESS.rglob("*.py")}
    assert {name: n for name, n in lines.items() if n > 600} == {}


MOST_PARAMETERS = 8


def test_no_function_of_the_harness_takes_over_8_parameters():
    """A function of 12 parameters (``run_comparison``) was an object not yet named: its parameters become the
    object's (a policy, the session) or a value of their own. ``self`` and ``cls`` are not counted."""
    over = {}
    for path in HARNESS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                a = node.args
                names = [x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if x is not None]
                if len([n for n in names if n not in ("self", "cls")]) > MOST_PARAMETERS:
                    over[f"{path.relative_to(HARNESS).as_posix()}:{node.name}"] = len(names)
    assert over == {}


def test_each_command_declares_its_own_arguments():
    """A 253-line ``parser.build`` held every command's arguments far from the command: now each command's module
    declares its own (``declare``), and what it declares runs that module's functions alone; the parser gathers."""
    import argparse

    from harness.cli import parser

    assert "add_argument" not in (HARNESS / "cli" / "parser.py").read_text()
    for declare in parser.COMMANDS:
        sub = argparse.ArgumentParser().add_subparsers()
        declare(sub)
        funcs, todo = [], list(sub.choices.values())
        while todo:
            p = todo.pop()
            funcs += [p._defaults["func"]] if "func" in p._defaults else []
            todo += [c for a in p._actions if isinstance(a, argparse._SubParsersAction) for c in a.choices.values()]
        assert funcs and {f.__module__ for f in funcs} == {declare.__module__}, declare.__module__
