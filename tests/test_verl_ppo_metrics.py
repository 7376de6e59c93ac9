"""Metrics from verl's own file logger (not hand-written lines): per-step and per-stage times for the checks."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import torch

from harness import outcomes
from harness.artifacts.reader import Metrics
from harness.artifacts.rundir import ScenarioDir
from harness.checks import CheckContext
from harness.checks.overhead import check_overhead
from harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[1]
# the mapping, spelled out here so that a change of harness.scenario.stages shows up as a failure
STAGE_OF_TIMER = {
    "old_log_prob": "actor_compute_log_prob",
    "ref": "ref_compute_log_prob",
    "values": "compute_values",
    "update_critic": "critic_update",
    "update_actor": "actor_update",
}


def trainer_timer_names() -> set[str]:
    """The ``marked_timer`` names in verl's PPO trainers (v1, main_ppo's default, and the legacy one); read
    from their source, not imported (importing them starts on Ray and every engine)."""
    verl = Path(next(iter(importlib.util.find_spec("verl").submodule_search_locations)))
    names = set()
    for rel in ("trainer/ppo/v1/trainer_base.py", "trainer/ppo/ray_trainer.py"):
        names |= set(re.findall(r'marked_timer\(\s*"(\w+)"', (verl / rel).read_text()))
    return names


def write_with_verl_file_logger(path: Path, steps: dict[int, dict[str, float]], monkeypatch) -> None:
    """What RayPPOTrainer.fit does each step: compute_timing_metrics(batch, timing_raw), Tracking.log; plus
    the separate validation line it logs for the same step."""
    from verl import DataProto
    from verl.trainer.ppo.metric_utils import compute_timing_metrics
    from verl.utils.tracking import Tracking

    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    batch = DataProto.from_dict(
        tensors={"prompt_length": torch.tensor([30.0, 40.0]), "response_length": torch.tensor([50.0, 60.0])}
    )
    tracking = Tracking("verl-msprobe-harness", "test", default_backend=["file"])
    for step, timing_raw in steps.items():
        metrics = {"critic/score/mean": 0.25, **compute_timing_metrics(batch=batch, timing_raw=timing_raw)}
        tracking.log(data=metrics, step=step)
        tracking.log(data={"val-core/openai/gsm8k/reward/mean@1": 0.5}, step=step)
    tracking.finish()


def timings(step_s: float, stage_s: float) -> dict[str, float]:
    return {"step": step_s, "gen": 2.0, "adv": 0.1, **dict.fromkeys(STAGE_OF_TIMER, stage_s)}


def test_the_timers_the_parser_maps_exist_in_verls_trainer():
    assert set(STAGE_OF_TIMER) | {"step"} <= trainer_timer_names()


def test_metrics_read_gives_step_and_stage_times_from_verls_file_logger(tmp_path, monkeypatch):
    path = tmp_path / "metrics.jsonl"
    steps = {n: timings(17.0 + n / 10, 1.5 + n / 100) for n in range(1, 4)}
    write_with_verl_file_logger(path, steps, monkeypatch)

    metrics = Metrics.read(path)
    assert metrics.step_times() == {n: t["step"] for n, t in steps.items()}
    stages = metrics.stage_times()
    for timer, stage in STAGE_OF_TIMER.items():
        assert stages[stage] == {n: t[timer] for n, t in steps.items()}
    assert metrics.steps[2]["val-core/openai/gsm8k/reward/mean@1"] == 0.5  # two lines for one step, merged


@pytest.mark.parametrize(("profiled_s", "passes"), [(165.0, True), (300.0, False)])
def test_overhead_check_on_documented_like_runs(tmp_path, monkeypatch, profiled_s, passes):
    """The L1 scenario's budgets applied to verl-logged runs shaped like verl's table: ~17 s baseline,
    ~165 s per profiled L1 step (9.7x, within 15x); 300 s (17.6x) must fail."""
    scenario = load_scenario(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")
    sdir = ScenarioDir(tmp_path / scenario.name)
    off = {n: timings(17.0, 1.5) for n in range(1, scenario.steps + 1)}
    on = {n: timings(profiled_s if n in scenario.precision_debugger.steps else 17.4, 1.5) for n in off}
    on[1] = timings(40.0, 1.5)  # a slow first step is warmup: not judged
    write_with_verl_file_logger(sdir.run("off").metrics, off, monkeypatch)
    write_with_verl_file_logger(sdir.run("on").metrics, on, monkeypatch)

    result = check_overhead(CheckContext(scenario, sdir))
    assert result.figures["overhead.wall.profiled"] == round(profiled_s / 17.0, 3)
    assert result.figures["overhead.wall.unprofiled"] == round(17.4 / 17.0, 3)
    assert {f"overhead.wall.stage.{s}" for s in STAGE_OF_TIMER.values()} <= set(result.figures)
    assert result.passed is passes, result.problems
    if not passes:
        assert result.problems == [  # verl's trainer logs wall time only: one sample per step
            "overhead.wall.profiled: 17.65x [17.65x-17.65x], 2 samples, noise ±0% against 15x (wall time)"
        ]
    # --harness-timing record (the harness's own CI): the same decisions, in the notes, never a failure
    recorded = check_overhead(CheckContext(scenario, sdir, gate_timing=False))
    assert recorded.passed and recorded.figures == result.figures
    assert recorded.summary.endswith("(not gated (--harness-timing record))")
    decided = f": {'ok' if passes else 'regressed'}, not gated (--harness-timing record)"
    assert any(n.startswith("overhead.wall.profiled: ") and n.endswith(decided) for n in recorded.notes)
    # it gated nothing: not a pass (it passed green before), its figures said where the item is skipped
    assert outcomes.check_outcome(recorded) == "not gated" and outcomes.check_outcome(result) != "not gated"
    x = f"{profiled_s / 17:.2f}x"
    said = f"overhead.wall.profiled {x} [{x}-{x}] against max 15x: "
    assert recorded.not_gated.startswith("not gated (--harness-timing record): ")
    assert said + ("within" if passes else "over") in recorded.not_gated, recorded.not_gated
    # budgets declared provisional (never measured on the device): the same, with why
    provisional = scenario.model_copy(update={"budgets": scenario.budgets.model_copy(update={"provisional": "why"})})
    ungated = check_overhead(CheckContext(provisional, sdir))
    assert ungated.problems == [] and outcomes.check_outcome(ungated) == "not gated"
    assert ungated.not_gated.startswith("provisional budgets, not gated (why): " + said), ungated.not_gated
