"""Every documented caller, read as verl's CI would run it: with the inputs it documents it can end green on an
unchanged verl and red on a breaking one (what each decides, whom it tells, in what time)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.artifacts.figures import FAMILIES
from harness.pipeline.base_head import families, structure_order
from harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _inputs(name: str) -> dict:
    return _load(WORKFLOWS / name)[True]["workflow_call"]["inputs"]


def test_the_ascend_gate_decides_what_one_run_a_side_can_and_leaves_overhead_to_the_nightly():
    """verl-compare.yml with the caller's inputs (one scenario, one run a side): base once, head once, no pair added
    while an overhead ratio is undecided (two runs cannot decide one: the old default kept adding pairs to 6 a side,
    past the 40-minute job, or ended INCONCLUSIVE, which failed it); structure, layout, contents, disk, numerics and
    crash decided, overhead reported. The label that accepts an intended change reaches it as it reaches the CPU
    gate."""
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")["jobs"]
    gate = caller["ascend-gate"]["with"]
    inputs = _inputs("verl-compare.yml")
    repeats = gate.get("repeats", inputs["repeats"]["default"])
    paths = sorted(ROOT.glob(gate.get("scenarios", inputs["scenarios"]["default"])))
    assert repeats == 1 and paths
    for path in [*paths, *sorted((ROOT / "scenarios").glob("qwen2_0_5b_*.yaml"))]:
        scenario = load_scenario(path)
        decided = families(scenario, FAMILIES)
        assert decided == {"disk", "structure"}, (path.name, decided)
        assert structure_order(repeats) == [("base", 0), ("head", 0)]
    assert gate["accept"] == caller["cpu-gate"]["with"]["accept"]
    assert _load(WORKFLOWS / "verl-compare.yml")["jobs"]["compare"]["env"]["HARNESS_ACCEPT"] == "${{ inputs.accept }}"
