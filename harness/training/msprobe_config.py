"""msprobe's config.json, written from a scenario's precision_debugger settings."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.scenario.blocks import PrecisionDebuggerSettings


def msprobe_config(pd: PrecisionDebuggerSettings, dump_path: str) -> dict[str, Any]:
    """The config PrecisionDebugger(config_path=...) reads. verl overrides dump_path per stage and step;
    msprobe's own ``step`` filter stays empty because verl's ``global_profiler.steps`` selects steps."""
    task_block: dict[str, Any] = {"scope": pd.scope, "list": pd.list_, "data_mode": pd.data_mode}
    if pd.task == "statistics":
        task_block["summary_mode"] = pd.summary_mode
    return {
        "task": pd.task,
        "dump_path": dump_path,
        "rank": pd.ranks,
        "step": [],
        "level": pd.level,
        "extra_info": pd.extra_info,
        "async_dump": pd.async_dump,
        pd.task: task_block,
    }
