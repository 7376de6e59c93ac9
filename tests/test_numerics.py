"""Numerics of base against head (``harness.gate.numerics``): the harness's compare and msprobe's real one on
msprobe-shaped dump trees (one entry's statistics moved, a stage missing, expected NaN statistics; msprobe -da names
the first diverging API either way), and the verdict logic around it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import tensor, write_dump

from harness.cli import main
from harness.gate.numerics.compare import compare_numerics
from harness.gate.numerics.report import Numerics, NumericsReport, StageNumerics, entry_of
from harness.scenario.blocks import NumericsScope

NARROW = r"^Tensor\.narrow\.\d+\.(forward|backward)$"


def tree(root: Path, stages: tuple[str, ...] = ("actor_update", "ref_compute_log_prob"), nan: bool = False) -> Path:
    """A dump tree as msprobe writes it (step 2, rank 0), each dump led by the narrow entry that reads FSDP's
    uninitialised all-gather buffer (``nan``: NaN statistics, as they may come out)."""
    for stage in stages:
        d = write_dump(root, 2, stage, 0)
        doc = json.loads((d / "dump.json").read_text())
        out = tensor(*[float("nan")] * 4) if nan else tensor()
        doc["data"] = {"Tensor.narrow.0.forward": {"input_args": [tensor()], "input_kwargs": {}, "output": [out]}}
        doc["data"] |= json.loads((d / "dump.json").read_text())["data"]
        (d / "dump.json").write_text(json.dumps(doc))
    return root


def move(root: Path, stage: str, entry: str, **stats: float) -> None:
    path = root / "step_2" / stage / "step0" / "rank0" / "dump.json"
    doc = json.loads(path.read_text())
    doc["data"][entry]["output"][0] |= stats
    path.write_text(json.dumps(doc))


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["harness", "msprobe"])  # msprobe: HARNESS_NUMERICS's switch, every stage
def test_msprobe_names_the_first_diverging_api_and_a_missing_stage(tmp_path: Path, engine: str):
    base1, base2 = tree(tmp_path / "base1"), tree(tmp_path / "base2")
    head = tree(tmp_path / "head", stages=("actor_update",), nan=True)  # no ref_compute_log_prob on head
    move(head, "actor_update", "Functional.linear.2.forward", Max=9.0, Norm=20.0)
    move(head, "actor_update", "Functional.linear.3.forward", Max=7.0, Norm=15.0)
    report = compare_numerics([base1, base2], head, tmp_path / "out", [NARROW], engine=engine)
    assert report.engine == engine

    assert report.judged, report.notes()  # base run 2 matches base run 1 exactly
    findings = report.findings("tiny")
    missing = "MISSING tiny: numerics step_2/ref_compute_log_prob dumped on base, missing on head: not compared"
    assert findings[0] == missing
    assert findings[1].startswith("REGRESSED tiny: numerics step_2/actor_update: ")
    assert "first diverging API Functional.linear.2.forward" in findings[1], findings
    assert "Functional.linear.2.forward.output.0 (rank0, " in findings[1]  # with its statistics on both sides
    assert "max 1.0 " in findings[1] and "-> max 9.0 " in findings[1]
    assert len(findings) == 2
    (stage, gone) = report.head_vs_base.stages
    assert gone.status == "missing" and stage.status == "compared"
    assert stage.diverged >= 2 and stage.nonfinite_ok >= 1  # the NaN narrow rows, counted apart
    assert stage.rows == stage.diverged + stage.nonfinite_ok + stage.counts["pass"]
    assert [Path(c).parent for c in stage.csvs] == [tmp_path / "out" / "head_vs_base" / "step_2" / "actor_update"]
    props = dict(report.properties())
    assert props["numerics.step_2/actor_update.first"].startswith("Functional.linear.2.forward")
    assert props["numerics.step_2/ref_compute_log_prob.status"] == "missing"
    assert report.determinism is not None and report.determinism.clean
    assert [s.status for s in report.determinism.stages] == ["compared", "compared"]
    assert "Functional.linear.2.forward" in report.summary()


def drift_report(declared_unmatched: bool = False) -> NumericsReport:
    moved = StageNumerics(2, "actor_update", rows=10, counts={"pass": 9, "warning": 1, "error": 0})
    drift = StageNumerics(2, "actor_update", ("base run 2", "base run 1"), rows=10)
    drift.counts |= {"pass": 8, "error": 2}
    return NumericsReport(Numerics("head_vs_base", [moved]), Numerics("base", [drift]), declared_unmatched)


def test_a_drifting_base_or_a_declared_mismatch_reports_numerics_without_judging():
    report = drift_report()
    assert not report.judged and report.findings("tiny") == []
    notes = "\n".join(report.notes())
    drifts = "not judged: base drifts between its own runs (determinism self-check): step_2/actor_update: 10 rows"
    assert drifts in notes
    assert "numerics (reported) step_2/actor_update: 10 rows, 9 pass, 1 warning" in notes
    declared = NumericsReport(Numerics("head_vs_base", drift_report().head_vs_base.stages), None, True)
    assert not declared.judged and declared.findings("tiny") == []
    assert "expect.numerics_match: false" in "\n".join(declared.notes())


def test_csv_rows_map_to_dump_entries():
    assert entry_of("Tensor.narrow.0.forward.output.0") == "Tensor.narrow.0.forward"
    assert entry_of("Functional.linear.3.backward.input.1") == "Functional.linear.3.backward"
    assert entry_of("Module.model.layers.0.Qwen2DecoderLayer.forward.0.input.0") == (
        "Module.model.layers.0.Qwen2DecoderLayer.forward.0"
    )
    assert entry_of("Functional.linear.0.forward.parameters.weight") == "Functional.linear.0.forward"


def test_the_numerics_command_reports_two_trees_and_two_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    base = tree(tmp_path / "base")
    head = tree(tmp_path / "head", stages=("actor_update",))
    assert main(["numerics", str(base), str(head), "--results", str(tmp_path / "r"), "--label", "tiny"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "MISSING tiny: numerics step_2/ref_compute_log_prob dumped on base, missing on head: not compared"
    assert "numerics: 1 of 2 step/stage dumps match base (18 rows all pass)" in out
    assert (tmp_path / "r" / "head_vs_base" / "step_2" / "actor_update" / "compare_result_rank0.csv").is_file()
    files = [str(d / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json") for d in (base, head)]
    assert main(["numerics", *files, "--results", str(tmp_path / "f")]) == 0
    assert "numerics: 1 of 1 step/stage dumps match base (18 rows all pass)" in capsys.readouterr().out
    assert main(["numerics", files[0], str(head), "--results", str(tmp_path / "f")]) == 2
    assert "give two dump trees or two dump.json files" in capsys.readouterr().err
    assert main(["numerics", str(base), str(head), "--results", str(base / "out")]) == 2
    assert "overlaps the input" in capsys.readouterr().err


def test_dumps_with_no_entry_compare_nothing_and_a_bad_regex_is_bad_input(tmp_path: Path, capsys):
    """Empty ``data`` on both sides matched "0 rows all pass", exit 0: nothing was compared (exit 2). A regular
    expression that does not compile is the caller's input (one line, exit 2), not a harness error."""
    files = []
    for side in ("base", "head"):
        (tmp_path / side).mkdir()
        (tmp_path / side / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
        files.append(str(tmp_path / side / "dump.json"))
    assert main(["numerics", *files, "--results", str(tmp_path / "r")]) == 2
    assert "NOTHING COMPARED (no step/stage dumped on both sides with an entry to compare)" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["numerics", *files, "--results", str(tmp_path / "r2"), "--nonfinite-ok", "("])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code == 2 and err[-1].endswith("argument --nonfinite-ok: '(' is not a regular expression "
                                                    "(missing ), unterminated subpattern at position 0)")  # fmt: skip


def rename_all(root: Path) -> None:
    """Every entry of every dump under ``root`` renamed: no row of it has a counterpart in another tree."""
    for path in root.rglob("dump.json"):
        doc = json.loads(path.read_text())
        doc["data"] = {f"Renamed.{k}": v for k, v in doc["data"].items()}
        path.write_text(json.dumps(doc))


def test_dumps_with_no_entry_in_common_compare_nothing(tmp_path: Path, capsys):
    """Every head entry renamed: msprobe writes each row with N/A for base and passes it, so this said "28 rows all
    pass", exit 0. Rows with no counterpart are counted apart, and none met is NOTHING COMPARED, exit 2."""
    base, head = tree(tmp_path / "base"), tree(tmp_path / "head")
    rename_all(head)
    assert main(["numerics", str(base), str(head), "--results", str(tmp_path / "r")]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "NOTHING COMPARED (none of head's 28 rows has a counterpart on base: every entry renamed)"
    assert ("numerics step_2/actor_update: 18 rows, 0 pass, 0 warning, 0 error (+18 rows with no counterpart on base: "
            "not compared)") in out  # fmt: skip
    report = compare_numerics([base], head, tmp_path / "r2", [])
    assert [s.unmatched for s in report.head_vs_base.stages] == [18, 10] and not report.findings("tiny")
    head2 = tree(tmp_path / "head2")  # one entry renamed: the rest compared, the renamed one's rows said apart
    path = head2 / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"
    doc = json.loads(path.read_text())
    doc["data"]["Functional.renamed.1.forward"] = doc["data"].pop("Functional.linear.1.forward")
    path.write_text(json.dumps(doc))
    report = compare_numerics([base], head2, tmp_path / "r3", [], engine="harness")
    assert not report.nothing_compared()
    assert (
        "numerics: 2 of 2 step/stage dumps match base (26 rows all pass, 2 rows with no counterpart on base not "
        "compared)" in report.notes()
    )


@pytest.mark.integration
def test_msprobes_own_engine_counts_rows_with_no_counterpart_apart(tmp_path: Path):
    base, head = tree(tmp_path / "base"), tree(tmp_path / "head")
    rename_all(head)
    report = compare_numerics([base], head, tmp_path / "r", [], engine="msprobe")
    assert [s.unmatched for s in report.head_vs_base.stages] == [18, 10]
    assert report.nothing_compared().startswith("NOTHING COMPARED (none of head's 28 rows")


def test_a_python_that_is_not_a_program_is_refused_at_the_edge(tmp_path: Path, capsys):
    """``--python /nonexistent`` was only started where a stage diverged: a harness error (FileNotFoundError), and
    a pass where none did. Now it is the caller's bad input, one line, exit 2, whatever the dumps."""
    base, head = tree(tmp_path / "base"), tree(tmp_path / "head")
    move(head, "actor_update", "Functional.linear.2.forward", Max=9.0, Norm=20.0)
    for python in ("/nonexistent", "T", "T/base/step_2/actor_update/step0/rank0/dump.json"):
        with pytest.raises(SystemExit) as exc:
            given = python.replace("T", str(tmp_path), 1)
            main(["numerics", str(base), str(head), "--results", str(tmp_path / "r"), "--python", given])
        err = capsys.readouterr().err.strip().splitlines()[-1].replace(str(tmp_path), "T")
        said = f"argument --python: {python!r} is not an executable file (a path, or a name on PATH)"
        assert exc.value.code == 2 and err.endswith(said), err
    assert not (tmp_path / "r").exists()


def test_a_link_in_the_output_dir_is_refused_and_nothing_elsewhere_is_deleted(tmp_path: Path, capsys):
    """`numerics --results OUT` with OUT/head_vs_base a link to elsewhere: the CSVs were written through it and a
    stage dir elsewhere deleted (rmtree through the link)."""
    base, head = tree(tmp_path / "base"), tree(tmp_path / "head")
    elsewhere = tmp_path / "elsewhere" / "step_2" / "actor_update"
    elsewhere.mkdir(parents=True)
    (elsewhere / "precious.txt").write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / "head_vs_base").symlink_to(tmp_path / "elsewhere")
    assert main(["numerics", str(base), str(head), "--results", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ERROR: {out / 'head_vs_base'}: a symbolic link in an output dir: outputs are written in place "
                   "only (remove it)"]  # fmt: skip
    assert (elsewhere / "precious.txt").read_text() == "keep" and sorted(p.name for p in elsewhere.iterdir()) == [
        "precious.txt"
    ]


def test_a_linked_stack_json_or_rank_dir_is_not_followed_out_of_the_tree(tmp_path: Path, capsys):
    """A head's stack.json linked to a file outside the tree had its text copied into the CSVs (a pull request's
    dumps could pull a host file into uploaded artifacts), and a rank dir linked out of the tree was compared."""
    base, head = tree(tmp_path / "base"), tree(tmp_path / "head")
    host = tmp_path / "host-secret.json"
    host.write_text(json.dumps({"0": [["Tensor.narrow.0.forward"], ["SECRET-HOST-TEXT"]]}))
    stage = head / "step_2" / "actor_update" / "step0"
    (stage / "rank0" / "stack.json").unlink(missing_ok=True)
    (stage / "rank0" / "stack.json").symlink_to(host)
    outside = tree(tmp_path / "outside") / "step_2" / "actor_update" / "step0" / "rank0"
    (stage / "rank1").symlink_to(outside)
    (base / "step_2" / "actor_update" / "step0" / "rank1").symlink_to(outside)
    out = tmp_path / "out"
    assert main(["numerics", str(base), str(head), "--results", str(out)]) == 0
    capsys.readouterr()
    csvs = sorted(out.rglob("*.csv"))
    assert [p.name for p in csvs if p.parent.name == "actor_update"] == ["compare_result_rank0.csv"]
    assert not any("SECRET-HOST-TEXT" in p.read_text() for p in csvs)


def test_the_scope_compares_the_first_step_and_the_first_ranks_and_says_what_it_skipped(tmp_path: Path):
    for side in ("base", "head"):
        for step in (2, 4):
            for rank in (0, 1, 10):
                write_dump(tmp_path / side, step, "actor_update", rank)
    base, head = tmp_path / "base", tmp_path / "head"
    whole = compare_numerics([base], head, tmp_path / "all", [])
    assert [(s.step, s.rows) for s in whole.head_vs_base.stages] == [(2, 48), (4, 48)]
    assert not any("numerics_scope" in n for n in whole.notes())  # the default skips nothing
    scope = NumericsScope(steps="first", ranks=2)
    report = compare_numerics([base], head, tmp_path / "out", [], scope=scope)
    (stage,) = report.head_vs_base.stages
    assert (stage.step, stage.rows) == (2, 32)
    assert [Path(c).name for c in stage.csvs] == ["compare_result_rank0.csv", "compare_result_rank1.csv"]
    assert "numerics: not compared (expect.numerics_scope): step_4/actor_update, step_2/actor_update/rank10" in (
        report.notes()
    )
