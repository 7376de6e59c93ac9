"""Reports: the markdown summary, the PNG per scenario, verl's doc tables, and the report CLI."""

from __future__ import annotations

import json

from gate_builders import write_results

from harness.cli import main
from harness.gate.baseline import build
from harness.report import build_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_summary_has_one_table_per_run_with_verdicts_and_changes(tmp_path):
    for i, profiled in enumerate((11.95, 12.0, 12.05, 11.98, 12.02)):
        write_results(tmp_path / f"cal{i}", profiled=profiled)
    baseline = build([tmp_path / f"cal{i}" for i in range(5)], calibrate=True)
    write_results(tmp_path / "pr", profiled=40.0)
    write_results(tmp_path / "pr", name="new_case")
    write_results(tmp_path / "nightly", profiled=12.0)
    rep = build_report([tmp_path / "pr", tmp_path / "nightly"], tmp_path / "out", baseline)
    md = rep.summary.read_text()
    assert md.count("| scenario | level | profiled-step overhead | unprofiled ratio | disk per step |") == 2
    row = next(line for line in md.splitlines() if line.startswith("| tiny_case | L1 statistics | 40.00x"))
    assert "| 1.00x | 0.50 MB |" in row and "❌ regressed" in row
    assert "overhead +233% · disk/step ±0% · structure same" in row
    assert "🆕 new (no baseline yet)" in md
    assert "`REGRESSED tiny_case: overhead.wall.profiled baseline 12.00x now 40.00x (+233%)" in md
    assert "now/baseline 3.33x [" in md  # the interval behind the verdict
    ok_row = next(line for line in md.splitlines() if line.startswith("| tiny_case | L1 statistics | 12.00x"))
    assert "✅ ok" in ok_row
    assert "msprobe 26.2.0" in md and "cpu/x86_64" in md
    # several runs: one folder of plots per run
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in rep.pngs) == [
        "nightly/tiny_case.png",
        "pr/new_case.png",
        "pr/tiny_case.png",
    ]
    for png in rep.pngs:
        data = png.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 20_000  # a real figure, not an empty canvas


def test_without_a_baseline_the_summary_says_so(tmp_path):
    write_results(tmp_path / "r")
    md = build_report([tmp_path / "r"], tmp_path / "out").summary.read_text()
    assert "No baseline given" in md
    assert "| tiny_case | L1 statistics | 10.00x | 1.00x | 0.50 MB | ✅ 2/2 | no baseline | - |" in md


def test_failed_checks_show_up_under_the_table(tmp_path):
    sdir = write_results(tmp_path / "r")
    doc = json.loads((sdir / "results.json").read_text())
    doc["checks"]["disk"] |= {"passed": False, "problems": ["all dumps: 9.00 MB > budgets.disk.max_total 6.00 MB"]}
    (sdir / "results.json").write_text(json.dumps(doc))
    md = build_report([tmp_path / "r"], tmp_path / "out").summary.read_text()
    assert "❌ disk" in md
    assert "- tiny_case disk check: all dumps: 9.00 MB > budgets.disk.max_total 6.00 MB" in md


def test_doc_tables_have_the_verl_guide_columns(tmp_path):
    write_results(tmp_path / "r", profiled=9.0)
    tables = build_report([tmp_path / "r"], tmp_path / "out").tables.read_text()
    assert "### Time overhead" in tables and "### Disk usage" in tables
    assert "| Run | Model | Profiled steps | Measured step time |" in tables
    assert "| Level | Model | Stages | Scope | Disk usage |" in tables
    assert "| Baseline (tiny_case) | `cpu_ppo` | None | about `0.1 s/step` in steady state |" in tables
    assert "| L1 (tiny_case) | `cpu_ppo` | `step 2` | `0.9 s` (9.0x) |" in tables
    assert "| L1 (tiny_case) | `cpu_ppo` | non-profiled later steps | about `0.1 s/step` |" in tables
    assert "total for `step_2` and `step_4` | `1.00 MB` |" in tables


def test_report_cli(tmp_path, capsys):
    write_results(tmp_path / "r")
    assert main(["report", str(tmp_path / "r"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "summary: " in out and "tiny_case.png" in out
    assert (tmp_path / "out" / "tiny_case.png").is_file()
    assert main(["report", str(tmp_path / "r"), "--baseline", str(tmp_path / "nope.json")]) == 2
