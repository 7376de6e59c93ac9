"""Scenario files: every problem is one readable line (file:line: field: what), never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from builders import write_scenario

from harness.cli import main
from harness.scenario.loader import ScenarioError, load_scenario, scenario_files
from harness.scenario.model import Scenario

ROOT = Path(__file__).resolve().parents[1]

BAD = """\
device: cpu
engine: fsdp
world_size: two
steps: 5
workload:
  kind: cpu_ppo
precision_debugger:
  task: statistics
  levle: L1
  level: L3
  steps: [2, 4]
  stages: [actor_compute_log_prob, actor_updte]
budgets:
  overhead:
    max_profiled_ratio: 30
    max_unprofiled_ratio: 2
"""


def test_every_shipped_scenario_is_valid():
    files = scenario_files([ROOT / "scenarios"])
    assert len(files) >= 7
    for f in files:
        assert load_scenario(f).name == f.stem


def test_bad_file_gives_one_line_per_problem(tmp_path):
    path = tmp_path / "bad_case.yaml"
    path.write_text(BAD)
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    assert exc.value.problems == [
        f"{path}:3: world_size: Input should be a valid integer (got 'two')",
        f"{path}:9: precision_debugger.levle: unknown field; did you mean 'level'? (allowed: async_dump, data_mode, "
        "extra_info, finish_hook_ranks, level, list, ranks, scope, stages, steps, strict, summary_mode, task)",
        f"{path}:10: precision_debugger.level: Input should be 'L0', 'L1' or 'mix' (got 'L3')",
        f"{path}:12: precision_debugger.stages.1: Input should be 'actor_compute_log_prob', 'ref_compute_log_prob', "
        "'actor_update', 'compute_values', 'critic_update' or 'compute_rm_score' (got 'actor_updte')",
    ]


@pytest.mark.integration
def test_validate_exits_nonzero_without_traceback(tmp_path):
    (tmp_path / "bad_case.yaml").write_text(BAD)
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "validate", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 4
    assert "precision_debugger.level: Input should be 'L0', 'L1' or 'mix'" in proc.stderr


@pytest.mark.parametrize(
    ("over", "expected"),
    [
        ({"precision_debugger": {"steps": [2, 9]}}, "precision_debugger.steps [9] beyond the 5 training steps"),
        ({"precision_debugger": {"ranks": [3]}}, "ranks [3] do not exist with world_size 2"),
        (
            {"precision_debugger": {"stages": ["compute_values"]}},
            "stages ['compute_values'] need a critic: set workload.critic: true",
        ),
        ({"budgets": {"disk": {"max_total": "lots"}}}, "budgets.disk.max_total: could not parse value and unit"),
        ({"expect": {"required_patterns": {"actor_update": ["("]}}}, "is not a valid regex"),
        ({"steps": 2, "precision_debugger": {"steps": [2]}}, "no unprofiled step after the 1 warmup step(s)"),
    ],
)
def test_cross_field_problems(tmp_path, over, expected):
    with pytest.raises(ScenarioError) as exc:
        load_scenario(write_scenario(tmp_path, **over))
    assert expected in str(exc.value)
    assert str(exc.value).startswith(str(tmp_path / "scenarios" / "tiny_case.yaml") + ":")


def test_yaml_syntax_error_and_bad_name(tmp_path):
    broken = tmp_path / "broken_case.yaml"
    broken.write_text("engine: fsdp\nsteps: [1, 2\n")
    with pytest.raises(ScenarioError, match=r"broken_case.yaml:\d+: YAML syntax error"):
        load_scenario(broken)
    named = write_scenario(tmp_path, name="Bad-Name")
    with pytest.raises(ScenarioError, match="scenario names are lowercase"):
        load_scenario(named)


def test_published_schema_is_current(tmp_path):
    out = tmp_path / "schema.json"
    assert main(["schema", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == json.loads((ROOT / "scenarios" / "scenario.schema.json").read_text()), (
        "regenerate: python -m harness schema -o scenarios/scenario.schema.json"
    )
    assert Scenario.model_json_schema()["additionalProperties"] is False
