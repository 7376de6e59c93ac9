"""Builders for the gate and report tests: results directories as the harness leaves them, made by hand."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from builders import write_dump

ENV: dict[str, Any] = {
    "python": "3.11.7",
    "machine": "x86_64",
    "verl": "0.9.1",
    "mindstudio-probe": "26.2.0",
    "torch": "2.13.0+cpu",
    "torch_npu": None,
    "transformers": "5.10.4",
    "device": "cpu",
    "executor": "local",
    "packages_dir": "/opt/venv/lib/python3.11/site-packages",
}
SETTINGS: dict[str, Any] = {
    "engine": "fsdp",
    "world_size": 2,
    "steps": 5,
    "workload": "cpu_ppo",
    "precision_debugger": {"task": "statistics", "level": "L1", "steps": [2, 4], "stages": ["actor_update"]},
}


JITTER = (0.98, 1.0, 1.0, 1.02)  # one run's samples (2 steps x 2 ranks) around its figure
WALL = itertools.count()  # each results dir its own trainings, as real runs: a copy is refused as one run twice


def figures(profiled: float = 10.0, unprofiled: float = 1.0, stage: float = 12.0, disk: int = 1_000_000) -> dict:
    """overhead and disk check figures of a run with profiled steps 2 and 4."""
    times_off = {n: 0.1 for n in range(1, 6)}
    times_on = {n: 0.1 * (profiled if n in (2, 4) else unprofiled) for n in range(1, 6)}
    overhead: dict[str, Any] = {}
    for n in range(1, 6):
        overhead[f"overhead.step{n}"] = round(times_on[n] / times_off[n], 3)
        overhead[f"time_off.step{n}_s"] = times_off[n]
        overhead[f"time_on.step{n}_s"] = round(times_on[n], 4)
    overhead |= {
        "overhead.wall.profiled": profiled,
        "overhead.wall.unprofiled": unprofiled,
        "overhead.wall.stage.actor_update": stage,
    }
    for metric, steps in (
        ("overhead.wall.profiled", (2, 4)),
        ("overhead.wall.unprofiled", (3, 5)),
        ("overhead.wall.stage.actor_update", (2, 4)),
    ):
        for (n, r), jitter in zip([(n, r) for n in steps for r in (0, 1)], JITTER, strict=True):
            overhead[f"overhead.sample.{metric.removeprefix('overhead.')}.step{n}.rank{r}"] = overhead[metric] * jitter
    diskf = {
        "disk.total_bytes": disk,
        "disk.step2_bytes": disk // 2,
        "disk.step4_bytes": disk // 2,
        "disk.stage.actor_update_bytes": disk // 2,
        "disk.rank0_bytes": disk // 2,
        "disk.rank1_bytes": disk // 2,
    }
    return {"overhead": overhead, "disk": diskf}


def write_results(
    results: Path,
    name: str = "tiny_case",
    env: dict[str, Any] | None = None,
    settings: dict[str, Any] | None = None,
    exit_code: int = 0,
    dumps: bool = True,
    **fig: Any,
) -> Path:
    """``<results>/<name>/results.json`` (plus an msprobe-shaped dump tree unless ``dumps=False``)."""
    sdir = results / name
    sdir.mkdir(parents=True, exist_ok=True)
    figs = figures(**fig)
    doc = {
        "scenario": name,
        "session": "s",
        "settings": settings or SETTINGS,
        "environment": env or ENV,
        "runs": {
            m: {"argv": ["python"], "executor": "local", "exit_code": exit_code, "wall_s": 1.0 + next(WALL) / 1000}
            for m in ("off", "on")
        },
        "checks": {
            "overhead": {"passed": True, "problems": [], "notes": [], "figures": figs["overhead"]},
            "disk": {"passed": True, "problems": [], "notes": [], "figures": figs["disk"]},
        },
    }
    (sdir / "results.json").write_text(json.dumps(doc))
    if dumps:
        for step in (2, 4):
            for rank in (0, 1):
                write_dump(sdir / "on" / "dumps", step, "actor_update", rank)
    return sdir
