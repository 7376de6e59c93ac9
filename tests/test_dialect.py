"""The precision_debugger dialect is read from the target's own code: the fields of its tool and profiler
configs (as verl's history has them: b4c826332 #5186, f8b0dd26c #5986 to main) and what its DistProfiler does on
rank 1; a verl that matches neither is API drift, an error, never a FAIL."""

from __future__ import annotations

import pytest

from harness.errors import InfraError
from harness.targets.dialect import decide, dialect_of

PROFILER = ["tool", "enable", "all_ranks", "ranks", "save_path", "tool_config", "global_tool_config"]
AT_5186 = ["_target_", "name", "enable", "config_path", "data_dir", "steps", "stages", "strict"]  # b4c826332
AT_5986 = ["_target_", "name", "config_path", "steps", "stages", "strict"]  # f8b0dd26c .. main


def test_verl_5186_turns_the_tool_on_itself_on_rank_0_only() -> None:
    d = decide({"tool_fields": AT_5186, "profiler_fields": PROFILER, "every_rank": False})
    assert d.name == "tool-config" and d.all_ranks
    assert d.line().startswith("precision_debugger dialect: tool-config (verl #5186: on with ")
    assert "because PrecisionDebuggerToolConfig has config_path, data_dir, enable, stages, steps, strict" in d.line()


def test_verl_5986_and_after_is_the_profiler_configs() -> None:
    d = decide({"tool_fields": AT_5986, "profiler_fields": PROFILER, "every_rank": True})
    assert d.name == "profiler-config" and not d.all_ranks
    assert "dumps in ProfilerConfig.save_path/step_N/STAGE" in d.line() and "(no enable or data_dir)" in d.line()


@pytest.mark.parametrize(
    "probe",
    [
        {"tool_fields": ["config_path", "stages", "strict", "enable"], "profiler_fields": PROFILER, "every_rank": True},
        {"tool_fields": AT_5986, "profiler_fields": ["tool", "enable"], "every_rank": True},
        {"tool_fields": ["config_path", "collect_stages", "strict"], "profiler_fields": PROFILER, "every_rank": True},
        {"error": "ImportError: cannot import name 'DistProfiler'"},
    ],
)
def test_an_unknown_dialect_is_api_drift(probe: dict) -> None:
    with pytest.raises(InfraError, match=r"\(API drift\)"):
        decide(probe)


@pytest.mark.integration
def test_the_pinned_verl_is_asked_in_its_own_interpreter() -> None:
    """verl 0.9.1 (the project venv's): #5986's dialect, every rank, decided by running its DistProfiler."""
    d = dialect_of(None)
    assert d.name == "profiler-config" and d.every_rank
