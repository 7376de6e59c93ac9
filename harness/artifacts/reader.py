"""Reading what runs leave on disk: verl file-logger metrics and msprobe dump trees."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from harness.artifacts.dumpfile import file_kind, open_regular
from harness.errors import MetricsError
from harness.scenario.stages import TIMER_TO_STAGE


@dataclass(frozen=True)
class Metrics:
    """Per-step data of one run, as verl's FileLogger wrote it (``{"step": N, "data": {...}}`` lines)."""

    steps: dict[int, dict[str, Any]]

    @classmethod
    def read(cls, path: Path) -> Metrics:
        steps: dict[int, dict[str, Any]] = {}
        try:
            with open_regular(path) as f:
                lines = f.read().splitlines()
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

    def rank_times(self, clock: str) -> dict[str, dict[tuple[int, int], float]]:
        """``{"step" or stage: {(step, rank): seconds}}`` where the workload logs each rank's own seconds per timer
        (``<clock>_s/<timer>/rank<R>``, the embedded workload): ``cpu`` (the process's CPU time), ``wall`` (the
        stage's wall time on that rank, before the barrier that waits for the others), ``wait`` (its thread's time
        runnable but without a core, from schedstat; absent where the kernel has none). Empty for verl's trainer
        (wall time only, rank 0's view)."""
        out: dict[str, dict[tuple[int, int], float]] = {}
        for step, data in self.steps.items():
            for key, v in data.items():
                if (m := RANK_KEY_RE.match(key)) and m["clock"] == clock:
                    out.setdefault(TIMER_TO_STAGE.get(m["timer"], m["timer"]), {})[(step, int(m["rank"]))] = float(v)
        return out


RANK_KEY_RE = re.compile(r"^(?P<clock>cpu|wall|wait)_s/(?P<timer>[^/]+)/rank(?P<rank>\d+)$")
DUMP_DIR_RE = re.compile(r"^step_(?P<step>\d+)/(?P<stage>[^/]+)/step0/(?:rank(?P<rank>\d+)|proc(?P<pid>\d+))$")
LEAF_DEPTH = 3  # step_N/<stage>/step0/rank<R>: the leaf dirs, three levels below a step dir


@dataclass(frozen=True)
class DumpDir:
    step: int
    stage: str
    rank: int | None  # None: msprobe wrote proc{pid} (torch.distributed not initialised)
    path: Path
    files: frozenset[str]
    bytes: int
    not_regular: dict[str, str] = field(default_factory=dict)  # file name -> kind (FIFO, symlink, ...)


@dataclass
class DumpTree:
    """Every ``step_N/stage/step0/rank{R}`` directory under a save_path, and whatever else is there.

    Symlinks are never followed: a step dir linked to ``/`` is a stray path, not a walk of the whole disk, and
    a save_path that is itself a link (out of the run dir) is not scanned at all."""

    root: Path
    dirs: list[DumpDir] = field(default_factory=list)
    strays: list[str] = field(default_factory=list)  # paths that fit no dump-dir shape
    link: str | None = None  # where the root points when it is a symlink (then nothing under it is read)

    def by_stage(self) -> dict[tuple[int, str], dict[str, Path]]:
        """(step, stage) -> {rank dir's name: its dump.json}, for the dump dirs whose dump.json is a regular file of
        its own (a link, or a directory of that name, is not there)."""
        out: dict[tuple[int, str], dict[str, Path]] = {}
        for d in self.dirs:
            ranks = out.setdefault((d.step, d.stage), {})
            if "dump.json" in d.files and "dump.json" not in d.not_regular:
                ranks[d.path.name] = d.path / "dump.json"
        return out

    @classmethod
    def scan(cls, root: Path) -> DumpTree:
        tree = cls(root)
        if root.is_symlink():
            tree.link = os.readlink(root)
            return tree
        if not root.is_dir():
            return tree
        for step_dir in sorted(root.iterdir()):
            if not _real_dir(step_dir):
                tree.strays.append(step_dir.name)
                continue
            leaves = _leaf_dirs(step_dir, root, tree.strays)
            if not leaves:
                tree.strays.append(step_dir.name + "/")
            for leaf in sorted(leaves):
                rel = leaf.relative_to(root).as_posix()
                if m := DUMP_DIR_RE.match(rel):
                    tree.dirs.append(_dump_dir(m, leaf))
                else:
                    tree.strays.append(rel)
        return tree


def step_stage(dump: Path) -> tuple[int, str] | None:
    """(step, stage) of a dump.json at ``.../step_N/<stage>/step0/rank<R>/dump.json``; None elsewhere."""
    m = DUMP_DIR_RE.match("/".join(dump.parent.parts[-LEAF_DEPTH - 1 :]))
    return (int(m["step"]), m["stage"]) if m else None


def _real_dir(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _leaf_dirs(step_dir: Path, root: Path, strays: list[str]) -> list[Path]:
    """The dirs ``LEAF_DEPTH`` levels below a step dir; symlinks on the way are strays, not followed."""
    level = [step_dir]
    for _ in range(LEAF_DEPTH):
        below = [p for d in level for p in d.iterdir()]
        strays += sorted(p.relative_to(root).as_posix() for p in below if p.is_symlink())
        level = [p for p in below if _real_dir(p)]
    return level


def _dump_dir(m: re.Match[str], leaf: Path) -> DumpDir:
    kinds = {p.name: file_kind(p.lstat().st_mode) for p in leaf.iterdir()}
    return DumpDir(
        step=int(m["step"]),
        stage=m["stage"],
        rank=int(m["rank"]) if m["rank"] is not None else None,
        path=leaf,
        files=frozenset(kinds),
        bytes=_regular_bytes(leaf),
        # a directory too: one named dump.json is no dump (the dump's own subdirs are named otherwise)
        not_regular={name: kind for name, kind in kinds.items() if kind != "regular file"},
    )


def _regular_bytes(top: Path) -> int:
    """Bytes of the regular files under ``top``, symlinks not followed (a link to a big file is not a dump)."""
    total = 0
    for dirpath, _, names in os.walk(top):
        for name in names:
            st = os.lstat(os.path.join(dirpath, name))
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
    return total


def iter_tensors(value: Any, where: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every tensor-statistics record (a dict with ``type`` ending in Tensor) inside a dump entry."""
    if _is_tensor(value):
        return iter([(where, value)])
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(value, dict | list):
        _collect_tensors(value, where, found)
    return iter(found)


def _is_tensor(value: Any) -> bool:
    return isinstance(value, dict) and str(value.get("type", "")).endswith("Tensor")


def _collect_tensors(container: dict | list, where: str, found: list[tuple[str, dict[str, Any]]]) -> None:
    """Plain recursion into a list, one call per container that is not a tensor: nested generators and a call
    per tensor or leaf cost more than the checks of what they find (the contents check's hot loop)."""
    is_dict = isinstance(container, dict)
    items = container.items() if isinstance(container, dict) else enumerate(container)
    for k, v in items:
        if not isinstance(v, dict | list):
            continue
        path = (f"{where}.{k}" if where else str(k)) if is_dict else f"{where}[{k}]"
        if isinstance(v, dict) and str(v.get("type", "")).endswith("Tensor"):  # _is_tensor inlined: hot
            found.append((path, v))
        else:
            _collect_tensors(v, path, found)
