"""harness/config.py is the one place the harness reads its settings: no other module reads a ``HARNESS_*`` variable,
each is read when asked (a test's ``monkeypatch.setenv`` counts), a bad value is one line naming it, and
docs/configuration.md's table is the module's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from harness import config
from harness.errors import InfraError

ROOT = Path(__file__).resolve().parents[1]
HARNESS = ROOT / "harness"
DOC = ROOT / "docs" / "configuration.md"


def _constants(files: list[Path]) -> dict[str, str]:
    """Every module-level ``NAME = "HARNESS_..."`` of ``files``: a read through such a name is a read of it."""
    out = {}
    for path in files:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                text = node.value.value
                out |= {t.id: text for t in node.targets if isinstance(t, ast.Name) and isinstance(text, str)}
    return {k: v for k, v in out.items() if v.startswith("HARNESS_")}


def stray_reads(files: list[Path]) -> list[str]:
    """``file:line: NAME`` for each read of a ``HARNESS_*`` variable (``os.environ[...]``, ``.get(...)``,
    ``os.getenv(...)``, ``... in os.environ``, by its literal name or a constant holding it) in ``files``."""
    constants = _constants(files)

    def name(key: ast.expr) -> str | None:
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.startswith("HARNESS_"):
            return key.value
        return constants.get(key.id) if isinstance(key, ast.Name) else None

    found = []
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            key, source = None, ""  # the name read, and what it is read from
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                if node.func.attr in ("get", "getenv"):
                    key, source = node.args[0], ast.unparse(node.func)
            elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
                key, source = node.slice, ast.unparse(node.value)
            elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
                key, source = node.left, ast.unparse(node.comparators[0])
            if key is not None and ("environ" in source or source.endswith("getenv")) and (var := name(key)):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}:{node.lineno}: {var}")
    return found


def test_no_module_but_config_reads_a_harness_variable() -> None:
    files = [p for p in HARNESS.rglob("*.py") if p != HARNESS / "config.py"]
    assert stray_reads(files) == [], "read these through harness/config.py (declare the variable there)"


def test_the_scan_finds_each_kind_of_read(tmp_path: Path) -> None:
    module = tmp_path / "reader.py"
    module.write_text(
        'import os\nWAIT_ENV = "HARNESS_WAIT"\n'
        'a = os.environ.get("HARNESS_A")\nb = os.environ["HARNESS_B"]\nc = os.getenv(WAIT_ENV)\n'
        'd = "HARNESS_D" in os.environ\nos.environ["HARNESS_E"] = "set for a child, not read"\n'
        'f = os.environ.get("PATH")\n'
    )
    assert stray_reads([module]) == [f"{module}:3: HARNESS_A", f"{module}:4: HARNESS_B", f"{module}:5: HARNESS_WAIT",
                                     f"{module}:6: HARNESS_D"]  # fmt: skip


def test_a_variable_is_read_when_asked_and_empty_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.LOCK_WAIT_S.name, raising=False)
    assert config.LOCK_WAIT_S.get() == 3600.0
    monkeypatch.setenv(config.LOCK_WAIT_S.name, "5")
    assert config.LOCK_WAIT_S.get() == 5.0
    monkeypatch.setenv(config.LOCK_WAIT_S.name, "")
    assert config.LOCK_WAIT_S.get() == 3600.0
    monkeypatch.setenv(config.VERL.name, "")  # a target's SPEC: empty is said, not read as "the pinned release"
    assert config.VERL.get() == "" and config.VERL.get({}) is None
    assert config.HEAVY.get({config.HEAVY.name: "1"}) and not config.HEAVY.get({config.HEAVY.name: "yes"})


@pytest.mark.parametrize(
    "var, text, line",
    [
        (config.LOCK_WAIT_S, "inf", "HARNESS_LOCK_WAIT_S='inf': not a number of seconds"),
        (config.DEADLINE, "0", "HARNESS_DEADLINE='0': expected a positive number of seconds"),
        (config.HEAVY_SLOTS, "2.5", "HARNESS_HEAVY_SLOTS='2.5': not a whole number of slots (unset it for as many as "
         "the host affords)"),
        (config.DUMP_PAD, "x", "HARNESS_TEST_DUMP_PAD='x': not a whole number of copies"),
    ],
)  # fmt: skip
def test_a_bad_value_is_one_line_naming_the_variable(var: config.Var[object], text: str, line: str) -> None:
    with pytest.raises(InfraError) as exc:
        var.get({var.name: text})
    assert str(exc.value) == line


def table() -> str:
    rows = [f"| `{v.name}` | {v.doc.replace('|', '/')} |" for v in config.VARIABLES]
    return "\n".join(["| variable | what it does; its default |", "|---|---|", *rows])


def test_the_docs_table_is_the_modules() -> None:
    assert len({v.name for v in config.VARIABLES}) == len(config.VARIABLES)
    assert table() in DOC.read_text(), f"docs/configuration.md: replace its table with\n{table()}"
