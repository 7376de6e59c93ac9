"""Which precision_debugger configuration dialect the verl under test speaks, decided from its own code.

verl has configured the integration in two ways since it added it, and a harness that speaks only one declares
the other verl broken (``FAIL 0/24 expected dirs``: it never turned the tool on):

- ``tool-config`` (verl #5186, b4c826332): ``PrecisionDebuggerToolConfig`` has ``enable`` (default false),
  ``data_dir`` (where dumps land: ``{data_dir}/step_{N}/{stage}``) and ``steps`` (the step filter; the step is
  the one ``start_profile`` was given); ``DistProfiler`` profiles rank 0 only unless ``all_ranks``.
- ``profiler-config`` (verl #5986, f8b0dd26c, to main): no ``enable`` or ``data_dir``; the profiler block's
  ``enable``/``tool`` turn it on, dumps land under ``ProfilerConfig.save_path/step_{N}/{stage}``, steps are the
  trainer's ``global_profiler.steps`` (the tool's ``steps`` is ignored), and every rank runs it (msprobe's
  config.json filters ranks).

The answer comes from the target's interpreter (``target_probe.dialect``: the dataclasses' fields, and what its
``DistProfiler`` does on rank 1), not from a version string; a verl that matches neither is API drift (an
InfraError, never a FAIL).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from harness.artifacts.crash import declared, missing_module
from harness.errors import EnvironmentProblem, InfraError
from harness.targets.environment import facts_of, probe_dialect
from harness.targets.spec import cache_dir

Name = Literal["tool-config", "profiler-config"]
CACHE_FILE = "harness-dialect.json"
LEGACY = frozenset({"enable", "data_dir", "steps"})
COMMON = frozenset({"config_path", "stages", "strict"})


@dataclass(frozen=True)
class Dialect:
    name: Name
    every_rank: bool  # DistProfiler runs precision_debugger on every rank without all_ranks
    why: str  # the fields that decided it

    @property
    def all_ranks(self) -> bool:
        """Whether the harness must ask for every rank (``ProfilerConfig.all_ranks``): a scenario's ranks all dump."""
        return not self.every_rank

    def line(self) -> str:
        """The dry run's line: which dialect, how it turns precision_debugger on, its steps, its dumps, and why."""
        if self.name == "tool-config":
            how = (
                "verl #5186: on with PrecisionDebuggerToolConfig.enable, steps by its steps (the step start_profile "
                "is given), dumps in its data_dir/step_N/STAGE"
            )
        else:
            how = (
                "verl #5986: on with the profiler block's enable and tool, steps by global_profiler.steps (the "
                "trainer starts the profiler on them), dumps in ProfilerConfig.save_path/step_N/STAGE"
            )
        ranks = (
            "its DistProfiler runs every rank" if self.every_rank else "its DistProfiler runs rank 0 only: all_ranks"
        )
        return f"precision_debugger dialect: {self.name} ({how}; ranks: {ranks}), because {self.why}"


def decide(probe: dict) -> Dialect:
    """The dialect from ``target_probe.dialect``'s answer; InfraError (API drift) when it is neither."""
    if error := probe.get("error"):
        raise InfraError(f"cannot read the target's precision_debugger configuration (API drift): {error}")
    tool, profiler = set(probe["tool_fields"]), set(probe["profiler_fields"])
    every = bool(probe["every_rank"])
    own = sorted(f for f in tool if not f.startswith("_") and f != "name")  # not hydra's _target_, the tool's name
    fields = f"PrecisionDebuggerToolConfig has {', '.join(own)}"
    if tool >= COMMON | LEGACY:
        return Dialect("tool-config", every, f"{fields} (enable, data_dir and steps: #5186's)")
    if tool >= COMMON and not (tool & {"enable", "data_dir"}) and "save_path" in profiler:
        return Dialect("profiler-config", every, f"{fields} (no enable or data_dir) and ProfilerConfig has save_path")
    raise InfraError(
        f"unknown precision_debugger dialect (API drift): {fields}; ProfilerConfig has {', '.join(sorted(profiler))}. "
        "The harness knows tool-config (#5186: enable, data_dir, steps, config_path, stages, strict) and "
        "profiler-config (#5986: config_path, stages, strict; ProfilerConfig.save_path)"
    )


@cache
def dialect_of(python: str | None) -> Dialect:
    """The dialect of the verl ``python`` imports (None: the harness's own). A target environment never changes
    once made, so its answer is kept beside it in the cache (not in it: its tree hash covers what runs); the project
    venv's is asked once per process."""
    own = python in (None, sys.executable)
    kept = None if own else cache_dir() / "probes" / f"{Path(str(python)).parents[1].name}-{CACHE_FILE}"
    try:
        answer = json.loads(kept.read_text()) if kept else None
    except (OSError, ValueError):
        answer = None
    if answer is None:
        answer = probe_dialect(python)
        if kept and "error" not in answer:
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_text(json.dumps(answer))
    if module := missing_module(answer.get("error") or ""):  # a requirement verl added that its environment lacks
        requires = facts_of(python).get("verl_requires", [])
        raise EnvironmentProblem(
            f"the target's verl imports {module!r}, which its environment lacks{declared(requires, [module])}: "
            "targets install --no-deps, so a requirement verl adds must be in the image or the project venv"
        )
    return decide(answer)
