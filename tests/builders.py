"""Builders the tests share: scenario files, msprobe-shaped dump trees and verl file-logger metrics in tmp dirs."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness.scenario.stages import NO_GRAD_STAGES

if TYPE_CHECKING:
    from harness.artifacts.rundir import ScenarioDir
    from harness.scenario.model import Scenario

BASE: dict[str, Any] = {
    "engine": "fsdp",
    "world_size": 2,
    "steps": 5,
    "workload": {"kind": "cpu_ppo"},
    "precision_debugger": {
        "task": "statistics",
        "level": "L1",
        "steps": [2, 4],
        "stages": ["actor_compute_log_prob", "actor_update"],
    },
    "budgets": {
        "overhead": {"max_profiled_ratio": 20, "max_unprofiled_ratio": 1.5},
        "disk": {"max_total": "1MB", "max_per_step": "600KB"},
    },
}


def merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def write_scenario(dir: Path, name: str = "tiny_case", **over: Any) -> Path:
    path = dir / "scenarios" / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(merge(BASE, over), sort_keys=False))
    return path


def tensor(mx: float = 1.0, mn: float = -1.0, mean: float = 0.1, norm: float = 2.0) -> dict[str, Any]:
    return {
        "type": "torch.Tensor",
        "dtype": "torch.float32",
        "shape": [4, 8],
        "Max": mx,
        "Min": mn,
        "Mean": mean,
        "Norm": norm,
        "requires_grad": True,
    }


def dump_doc(level: str, stage: str, n: int = 4) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for i in range(n):
        if level in ("L1", "mix"):
            data[f"Functional.linear.{i}.forward"] = {
                "input_args": [tensor()],
                "input_kwargs": {},
                "output": [tensor()],
            }
            if stage not in NO_GRAD_STAGES:
                data[f"Functional.linear.{i}.backward"] = {"input": [tensor()], "output": [tensor()]}
        if level in ("L0", "mix"):
            data[f"Module.model.layers.{i}.Qwen2DecoderLayer.forward.0"] = {
                "input_args": [tensor()],
                "output": [tensor()],
            }
            if stage not in NO_GRAD_STAGES:
                data[f"Module.model.layers.{i}.Qwen2DecoderLayer.backward.0"] = {
                    "input": [tensor()],
                    "output": [tensor()],
                }
    return {"task": "statistics", "level": level, "framework": "pytorch", "dump_data_dir": None, "data": data}


def write_dump(root: Path, step: int, stage: str, rank: int, level: str = "L1") -> Path:
    d = root / f"step_{step}" / stage / "step0" / f"rank{rank}"
    d.mkdir(parents=True)
    (d / "dump.json").write_text(json.dumps(dump_doc(level, stage)))
    (d / "stack.json").write_text("{}")
    (d / "construct.json").write_text("{}")
    return d


def write_metrics(path: Path, times: dict[int, float], stage_scale: float = 0.2) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps(
            {
                "step": n,
                "data": {
                    "timing_s/step": t,
                    "timing_s/old_log_prob": t * stage_scale,
                    "timing_s/update_actor": t * stage_scale,
                },
            }
        )
        for n, t in times.items()
    ]
    path.write_text("\n".join(lines) + "\n")


def default_signals() -> None:
    """``preexec_fn`` for a child a test signals: the dispositions a terminal gives. A shell's background job
    inherits SIGINT ignored and ``nohup`` SIGHUP, and an ignored signal is inherited (the harness keeps it so)."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def write_good_case(tmp: Path) -> tuple[Scenario, ScenarioDir]:
    """A scenario (``tmp/scenarios/tiny_case.yaml``) and a complete, correct set of artifacts in ``tmp/results``, as
    a successful pair of runs leaves them."""
    from harness.artifacts.record import ExecResult, RunRecord
    from harness.artifacts.rundir import ScenarioDir
    from harness.scenario.loader import load_scenario

    scenario = load_scenario(write_scenario(tmp))
    sdir = ScenarioDir(tmp / "results" / scenario.name)
    dumps = sdir.run("on").dumps
    for step in scenario.precision_debugger.steps:
        for stage in scenario.precision_debugger.stages:
            for rank in range(scenario.world_size):
                write_dump(dumps, step, stage, rank)
    write_metrics(sdir.run("off").metrics, {n: 1.0 for n in range(1, 6)})
    write_metrics(sdir.run("on").metrics, {1: 1.0, 2: 8.0, 3: 1.1, 4: 9.0, 5: 1.05}, stage_scale=0.3)
    for mode, wall in (("off", 5.2), ("on", 20.4)):  # how each run ended, as its executor records it
        RunRecord(mode=mode, executor="local", argv=["python"], result=ExecResult(exit_code=0, wall_s=wall)).write(
            sdir.run(mode).record
        )
    return scenario, sdir


def reuse_argv(scenario: Scenario, sdir: ScenarioDir) -> list[str]:
    """``run --reuse`` of a good case: its trainings.json written as an earlier session leaves it (the checks, no
    training)."""
    from harness.artifacts.record import ExecResult, RunRecord
    from harness.targets.spec import pinned_target
    from harness.training.runs import TrainingsRecord, fingerprint

    ok = ExecResult(exit_code=0, wall_s=1.0)
    records = {m: RunRecord(mode=m, executor="local", argv=["python"], result=ok) for m in ("off", "on")}
    TrainingsRecord(session="earlier", fingerprint=fingerprint(scenario, pinned_target()), records=records).write(
        sdir.trainings_record
    )
    results = sdir.root.parent
    return ["run", str(results.parent / "scenarios" / f"{scenario.name}.yaml"), "--results", str(results), "--reuse"]


def comparing(monkeypatch: Any, observe: Any, numerics: Any = None) -> Any:
    """A session whose comparison (``Session.compare``) trains and reads nothing: each run's observation is
    ``observe(scenario, where)`` (it may raise what a run raises), the targets' environments and census stand-ins,
    the numerics ``numerics`` (default: none). Returns (the session, a target both sides may be)."""
    import harness.pipeline.session as sm
    from harness.artifacts.dumpfacts import DumpReads
    from harness.targets.census import Census
    from harness.targets.spec import Package

    env = type("Env", (), {"label": lambda self: "env", "describe": lambda self: "verl", "python": None})()
    monkeypatch.setattr(sm.Session, "env", lambda self, target, of="": env)
    monkeypatch.setattr(sm, "census_of", lambda target, env: Census(source="verl"))  # no source: the same census
    monkeypatch.setattr(sm, "add_numerics", numerics or (lambda *args: None))  # msprobe's compare of real dumps
    monkeypatch.setattr(
        sm.Session,
        "_evaluated",
        lambda self, scenario, env, where, *run: sm.Judged([], None, observe(scenario, where), DumpReads(where)),  # type: ignore[arg-type]
    )
    pkg = Package(name="verl", kind="release", version="0.9.1")
    target = type("T", (), {"describe": lambda self: "verl", "verl": pkg})()
    return sm.Session(Path("unused-results"), say=lambda line: None), target
