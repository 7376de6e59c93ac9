"""The embedded workload's spec.json: what the harness (``cpu_ppo``) asks of one training run and the training
program (``train``) reads back, through this one model (no torch or verl here: the harness imports it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from harness.safeio import MB, Versioned


class ProfilerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dialect: str  # harness.targets.dialect: how this verl turns precision_debugger on (tool-config, profiler-config)
    all_ranks: bool
    save_path: str
    steps: list[int]
    stages: list[str]
    config_path: str
    strict: bool = False


class TrainSpec(Versioned):
    """spec.json. Schema 1 (no ``schema_version``) had the same fields."""

    FILE = "spec.json"
    REDO = "the harness writes it again for each run: run the scenario with one harness"
    schema_version: Literal[2] = 2
    engine: str
    world_size: int
    steps: int
    seed: int
    model: dict[str, Any]
    batch_size: int
    prompt_length: int
    response_length: int
    lr: float
    critic: bool
    critic_roles: str
    threads_per_rank: int
    store_path: str
    profiler: ProfilerSpec | None = None
    device: str = "cpu"
    dtype: str = "float32"

    @property
    def cuda(self) -> bool:
        return self.device == "cuda"

    @classmethod
    def load(cls, path: str | Path) -> TrainSpec:
        return cls.read_file(Path(path), MB)
