"""Reading what runs leave on disk: verl file-logger metrics and msprobe dump trees."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.errors import MetricsError
from harness.stages import TIMER_TO_STAGE


@dataclass(frozen=True)
class Metrics:
    """Per-step data of one run, as verl's FileLogger wrote it (``{"step": N, "data": {...}}`` lines)."""

    steps: dict[int, dict[str, Any]]

    @classmethod
    def read(cls, path: Path) -> Metrics:
        steps: dict[int, dict[str, Any]] = {}
        try:
            lines = path.read_bytes().splitlines()
        except OSError as exc:
            raise MetricsError(f"no metrics file {path}: {exc.strerror}") from None
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                rec = orjson.loads(line)
                step, data = int(rec["step"]), rec["data"]
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise MetricsError(f"{path}:{n}: not a verl file-logger line ({exc})") from None
            steps.setdefault(step, {}).update(data)  # verl may log one step in several lines
        return cls(steps)

    def step_times(self) -> dict[int, float]:
        return {s: float(d["timing_s/step"]) for s, d in self.steps.items() if "timing_s/step" in d}

    def stage_times(self) -> dict[str, dict[int, float]]:
        """``{stage: {step: seconds}}`` from verl's stage timers."""
        out: dict[str, dict[int, float]] = {}
        for step, data in self.steps.items():
            for timer, stage in TIMER_TO_STAGE.items():
                if (v := data.get(f"timing_s/{timer}")) is not None:
                    out.setdefault(stage, {})[step] = float(v)
        return out


DUMP_DIR_RE = re.compile(r"^step_(?P<step>\d+)/(?P<stage>[^/]+)/step0/(?:rank(?P<rank>\d+)|proc(?P<pid>\d+))$")


@dataclass(frozen=True)
class DumpDir:
    step: int
    stage: str
    rank: int | None  # None: msprobe wrote proc{pid} (torch.distributed not initialised)
    path: Path
    files: frozenset[str]
    bytes: int


@dataclass
class DumpTree:
    """Every ``step_N/stage/step0/rank{R}`` directory under a save_path, and whatever else is there."""

    root: Path
    dirs: list[DumpDir] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)  # paths that fit no dump-dir shape

    @classmethod
    def scan(cls, root: Path) -> DumpTree:
        tree = cls(root)
        if not root.is_dir():
            return tree
        for step_dir in sorted(root.iterdir()):
            if not step_dir.is_dir():
                tree.strays.append(step_dir.name)
                continue
            leaves = [p for p in step_dir.glob("*/*/*") if p.is_dir()]
            if not leaves:
                tree.strays.append(step_dir.name + "/")
            for leaf in sorted(leaves):
                rel = leaf.relative_to(root).as_posix()
                m = DUMP_DIR_RE.match(rel)
                if not m:
                    tree.strays.append(rel)
                    continue
                size = sum(f.stat().st_size for f in leaf.rglob("*") if f.is_file())
                tree.dirs.append(
                    DumpDir(
                        step=int(m["step"]),
                        stage=m["stage"],
                        rank=int(m["rank"]) if m["rank"] is not None else None,
                        path=leaf,
                        files=frozenset(p.name for p in leaf.iterdir()),
                        bytes=size,
                    )
                )
        return tree


def load_dump_json(path: Path) -> dict[str, Any]:
    """Parse dump.json; orjson first (dumps are big), the stdlib for NaN/Infinity literals orjson rejects."""
    raw = path.read_bytes()
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw)


def iter_tensors(value: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tensor-statistics record (a dict with ``type`` ending in Tensor) inside a dump entry."""
    if isinstance(value, dict):
        if str(value.get("type", "")).endswith("Tensor"):
            yield where, value
            return
        for k, v in value.items():
            yield from iter_tensors(v, f"{where}.{k}" if where else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from iter_tensors(v, f"{where}[{i}]")
