"""Name normalisation and dump structure; the pytest regression item; the test-only fault knobs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from builders import write_dump, write_metrics

from harness.artifacts.dumpfile import normalise
from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import ScenarioDir
from harness.gate.against_baseline import gate_scenario
from harness.gate.baseline import build
from harness.gate.observe import observe_results
from harness.gate.structure import name_diff, structure_of
from harness.pipeline.session import Session
from harness.targets.environment import ensure_env
from harness.targets.spec import pinned_target
from harness.training.runs import fingerprint

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("Functional.linear.3.forward", "Functional.linear.forward"),
        ("Tensor.add_.0.backward", "Tensor.add_.backward"),
        ("Tensor.__matmul__.12.forward", "Tensor.__matmul__.forward"),
        ("Aten.add.Tensor.1.forward", "Aten.add.Tensor.forward"),
        ("Distributed.all_gather_into_tensor.2.forward", "Distributed.all_gather_into_tensor.forward"),
        # module paths keep their layer indices; only the trailing call counter goes
        (
            "Module.model.layers.0.self_attn.q_proj.Linear.forward.0",
            "Module.model.layers.0.self_attn.q_proj.Linear.forward",
        ),
        ("Module.model.layers.2.mlp.Qwen2MLP.backward.1", "Module.model.layers.2.mlp.Qwen2MLP.backward"),
        (
            "Module.model.embed_tokens.Embedding.parameters_grad.0",
            "Module.model.embed_tokens.Embedding.parameters_grad",
        ),
        ("something.else", "something.else"),
    ],
)
def test_normalise_folds_call_counters(name, want):
    assert normalise(name) == want


def test_structure_counts_per_stage_and_rank(tmp_path):
    for rank in (0, 1):
        write_dump(tmp_path, 2, "actor_update", rank)
    write_dump(tmp_path, 2, "actor_compute_log_prob", 0, level="L0")
    s = structure_of(tmp_path)
    assert sorted(s) == ["actor_compute_log_prob/rank0", "actor_update/rank0", "actor_update/rank1"]
    assert s["actor_update/rank0"] == {
        "entries": 8,
        "names": {"Functional.linear.backward": 4, "Functional.linear.forward": 4},
    }
    assert s["actor_compute_log_prob/rank0"]["names"] == {
        f"Module.model.layers.{i}.Qwen2DecoderLayer.forward": 1 for i in range(4)
    }


def test_name_diff_reads_as_removed_added_and_changed_counts():
    base = {"Functional.linear.forward": 4, "Tensor.add_.forward": 2, "Tensor.narrow.forward": 9}
    now = {"Functional.linear.forward": 3, "Torch.matmul.forward": 1, "Tensor.narrow.forward": 1}
    assert name_diff(base, now, ignore={"Tensor.narrow.forward"}) == [
        "Functional.linear.forward x4->x3",
        "-Tensor.add_.forward x2",
        "+Torch.matmul.forward x1",
    ]


def test_names_that_vary_between_calibration_runs_are_not_gated(tmp_path):
    from gate_builders import write_results

    for i in range(2):
        sdir = write_results(tmp_path / f"cal{i}")
        dump = sdir / "on/dumps/step_2/actor_update/step0/rank0/dump.json"
        doc = json.loads(dump.read_text())
        doc["data"].update({f"Tensor.narrow.{j}.forward": {} for j in range(i + 1)})  # 1 call, then 2
        dump.write_text(json.dumps(doc))
    b = build([tmp_path / "cal0", tmp_path / "cal1"], calibrate=True)
    entry = b.scenarios["tiny_case"].structure["actor_update/rank0"]  # type: ignore[index]
    assert entry.unstable == ["Tensor.narrow.forward"]
    assert b.scenarios["tiny_case"].tolerances["structure.actor_update.rank0.entries"] > 0  # 17 vs 18 entries


def _observed(scenario, sdir: ScenarioDir):
    """Every check run and recorded in results.json (as ``harness run`` does), then observed as the gate does."""
    _reusable_runs(scenario, sdir)
    Session(sdir.root.parent, reuse=True, id="now").evaluate(scenario, ensure_env(pinned_target()))
    return observe_results(sdir.results)


def test_observation_of_a_results_dir_holds_every_gated_figure(good_case):
    scenario, ctx = good_case
    obs = _observed(scenario, ctx.dir)
    assert obs.figures["overhead.wall.profiled"] == pytest.approx(72**0.5, abs=1e-3)  # 8x and 9x: their median in logs
    assert obs.figures["disk.total_bytes"] > 0
    assert obs.figures["structure.actor_update.rank1.entries"] == 16
    assert obs.environment["device_kind"].startswith("cpu/")
    assert obs.settings["precision_debugger"]["level"] == "L1"


@pytest.mark.parametrize("name", ["runs.json", "session.json"])
def test_a_results_dir_of_an_earlier_harness_is_reused_from_its_earlier_record(good_case, name):
    """trainings.json was session.json before #84, runs.json before #73: an earlier harness's results dir is still
    re-checked with --reuse (a training here would fail the test: it carries no trains marker), trainings.json
    winning where both are."""
    scenario, ctx = good_case
    _reusable_runs(scenario, ctx.dir)
    old = ctx.dir.trainings_record.rename(ctx.dir.root / name)
    assert ctx.dir.trainings_record_read == old
    Session(ctx.dir.root.parent, reuse=True, id="now").evaluate(scenario, ensure_env(pinned_target()))
    assert observe_results(ctx.dir.results).figures["disk.total_bytes"] > 0
    ctx.dir.trainings_record.write_bytes(old.read_bytes())  # a later session's record, beside the old one
    assert ctx.dir.trainings_record_read == ctx.dir.trainings_record


def _reusable_runs(scenario, sdir: ScenarioDir) -> None:
    """trainings.json as a successful earlier session leaves it, so --harness-reuse checks without training."""
    result = ExecResult(exit_code=0, wall_s=1.0)
    records = {
        m: RunRecord(mode=m, executor="local", argv=["python"], result=result).model_dump() for m in ("off", "on")
    }
    doc = {"session": "earlier", "fingerprint": fingerprint(scenario, pinned_target()), "records": records}
    sdir.trainings_record.write_text(json.dumps(doc))


@pytest.mark.integration
def test_pytest_regression_item_against_a_baseline(tmp_path, good_case):
    scenario, ctx = good_case
    obs = _observed(scenario, ctx.dir)
    # the baseline: this run and a second with the same figures (overhead needs two runs or more to know the
    # run-to-run noise: none here); its own wall times, or it would be refused as a copy of the first
    second = tmp_path / "results2"
    shutil.copytree(tmp_path / "results", second)
    doc = json.loads((second / "tiny_case" / "results.json").read_text())
    for run in doc["runs"].values():
        run["wall_s"] += 1.0
    (second / "tiny_case" / "results.json").write_text(json.dumps(doc))
    baseline = build([tmp_path / "results", second])
    baseline.write(tmp_path / "baseline.json")
    assert gate_scenario(scenario.name, baseline, obs).status == "ok"

    def pytest_run(*extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest", str(tmp_path / "scenarios"), "-p", "no:cacheprovider", "-v", "-rfE"]
        argv += [f"--harness-results={tmp_path / 'results'}", "--harness-reuse", *extra]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False)

    proc = pytest_run(f"--harness-baseline={tmp_path / 'baseline.json'}")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "::regression PASSED" in proc.stdout
    # ten times the overhead on the profiled steps: the regression item fails with the one-line message
    write_metrics(ctx.dir.run("on").metrics, {1: 1.0, 2: 80.0, 3: 1.1, 4: 90.0, 5: 1.05}, stage_scale=0.3)
    proc = pytest_run(f"--harness-baseline={tmp_path / 'baseline.json'}", "-k", "regression")
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert "REGRESSED tiny_case: overhead.wall.profiled baseline 8.48x now 84.85x" in proc.stdout, proc.stdout[-3000:]
    proc = pytest_run(f"--harness-baseline={tmp_path / 'missing.json'}")
    assert proc.returncode == 4 and "--harness-baseline" in proc.stderr


@pytest.mark.integration
def test_an_overhead_item_that_gates_nothing_is_not_a_pass(tmp_path, good_case):
    """Under ``--harness-timing record`` (.ci/run's HARNESS_TIMING=record) every ``::overhead`` item passed green
    while it gated no ratio. It is skipped, its figures in the reason; the other items pass as before."""
    scenario, ctx = good_case
    _reusable_runs(scenario, ctx.dir)
    argv = [sys.executable, "-m", "pytest", str(tmp_path / "scenarios"), "-p", "no:cacheprovider", "-rs", "-q",
            f"--harness-results={tmp_path / 'results'}", "--harness-reuse"]  # fmt: skip
    recorded = subprocess.run([*argv, "--harness-timing=record"], cwd=tmp_path, capture_output=True, text=True)
    assert recorded.returncode == 0 and recorded.stdout.strip().splitlines()[-1].startswith("4 passed, 1 skipped")
    said = "tiny_case::overhead: not gated (--harness-timing record): overhead.wall.profiled 8.49x ["
    assert said in recorded.stdout and "against max 20x: within" in recorded.stdout, recorded.stdout[-2000:]
    gated = subprocess.run([*argv, "--harness-timing=gate"], cwd=tmp_path, capture_output=True, text=True)
    assert gated.returncode == 0 and gated.stdout.strip().splitlines()[-1].startswith("5 passed"), gated.stdout


def test_a_dumps_names_are_shown_as_one_line_each_in_a_name_diff():
    """A dump's names are the code under test's: a name diff in a gate or compare line shows each as one line."""
    from harness.gate.judge import shown_names

    assert shown_names(["Functional.linear.0", "x\n::error title=gate::all good"]) == (
        "Functional.linear.0, x\\n::error title=gate::all good"
    )
