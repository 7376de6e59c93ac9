"""Reports: the markdown summary, the PNG per scenario, verl's doc tables, and the report CLI."""

from __future__ import annotations

import json
from pathlib import Path

from gate_builders import ENV, write_results

from harness.cli import main
from harness.gate.against_baseline import gate
from harness.gate.baseline import Baseline, build
from harness.gate.files import GateDoc
from harness.gate.observe import observe_dir
from harness.report import verdicts
from harness.report.build import build_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def gated(baseline: Baseline, results: Path) -> GateDoc:
    """What ``gate --json`` writes for one results dir."""
    observations = observe_dir(results)
    return verdicts.gate_doc(gate(baseline, observations), baseline, observations, [results])


def test_summary_has_one_table_per_run_with_verdicts_and_changes(tmp_path):
    for i, profiled in enumerate((11.95, 12.0, 12.05, 11.98, 12.02)):
        write_results(tmp_path / f"cal{i}", profiled=profiled)
    baseline = build([tmp_path / f"cal{i}" for i in range(5)], calibrate=True)
    write_results(tmp_path / "pr", profiled=40.0)
    write_results(tmp_path / "pr", name="new_case")
    write_results(tmp_path / "nightly", profiled=12.0)
    runs = [tmp_path / "pr", tmp_path / "nightly"]
    rep = build_report(runs, tmp_path / "out", [gated(baseline, r) for r in runs])
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
    assert "No gate given" in md
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
    assert main(["report", str(tmp_path / "r"), "--gate", str(tmp_path / "nope.json")]) == 2


def test_report_shows_what_the_gate_decided_from_its_file_of_this_or_the_previous_schema(tmp_path, capsys):
    """``report --gate``: the gate's verdicts as its JSON holds them (``--compare-across-env`` included), never
    judged again; a gate file of schema 1 (before schema versions) still reads, another schema is one line."""
    for run in ("cal0", "cal1"):
        write_results(tmp_path / run)
    write_results(tmp_path / "r", disk=2_000_000, env={**ENV, "mindstudio-probe": "26.3.0"})
    b, g = str(tmp_path / "b.json"), tmp_path / "g.json"
    assert main(["calibrate", str(tmp_path / "cal0"), str(tmp_path / "cal1"), "-o", b]) == 0
    assert main(["gate", "--baseline", b, "--results", str(tmp_path / "r"), "--json", str(g)]) == 2  # not compared
    assert main(["report", str(tmp_path / "r"), "--gate", str(g), "--out", str(tmp_path / "o1")]) == 0
    assert "⚠️ not compared: other environment" in (tmp_path / "o1" / "summary.md").read_text()
    argv = ["gate", "--baseline", b, "--results", str(tmp_path / "r"), "--json", str(g), "--compare-across-env"]
    assert main(argv) == 1
    assert main(["report", str(tmp_path / "r"), "--gate", str(g), "--out", str(tmp_path / "o2")]) == 0
    md = (tmp_path / "o2" / "summary.md").read_text()
    assert "❌ regressed" in md and "- `REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB" in md
    doc = json.loads(g.read_text())
    assert doc["schema_version"] == 2 and doc["results"] == [str((tmp_path / "r").resolve())]
    previous = {  # what the harness before schema versions wrote
        "exit_code": doc["exit_code"],
        "verdict": doc["verdict"],
        "scenarios": [
            {"scenario": s["scenario"], "status": s["status"], "notes": s["notes"], "crashes": s["crashes"],
             "metrics": [f | {"scenario": s["scenario"], "detail": "", "decision": None} for f in s["figures"]]}
            for s in doc["scenarios"]
        ],
    }  # fmt: skip
    g.write_text(json.dumps(previous))
    assert main(["report", str(tmp_path / "r"), "--gate", str(g), "--out", str(tmp_path / "o3")]) == 0
    md1 = (tmp_path / "o3" / "summary.md").read_text()
    assert "❌ regressed" in md1 and "- `REGRESSED tiny_case: disk.total_bytes baseline 1.00 MB now 2.00 MB" in md1
    assert "not named by the gate's file (schema 1)" in md1
    g.write_text(json.dumps(doc | {"schema_version": 3}))
    capsys.readouterr()
    assert main(["report", str(tmp_path / "r"), "--gate", str(g), "--out", str(tmp_path / "o4")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"BASELINE ERROR: {g}: gate JSON written by schema 3, this harness reads schemas 1 and 2: re-run gate --json "
        "with this harness"
    ]
    g.write_text(json.dumps(doc))  # a gate of another results dir says nothing about this one
    assert main(["report", str(tmp_path / "cal0"), "--gate", str(g), "--out", str(tmp_path / "o5")]) == 2
    assert "judged none of these results dirs" in capsys.readouterr().err
