"""Every figure's name, built and parsed in one place, with its family (what the gate judges it as) and unit.

Checks write figures under these names (results.json, JUnit properties); the gate, the baselines and the
reports read them back through ``parse``. A renamed figure is a change here only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeGuard

Family = Literal["overhead", "disk", "structure"]
FAMILIES: tuple[Family, ...] = ("overhead", "disk", "structure")
Unit = Literal["ratio", "bytes", "seconds", "count", "text"]

DISK_TOTAL = "disk.total_bytes"
# The clock of an overhead ratio. ``wall``, gated: the time the user pays, blocked time (sleeps, locks, I/O, syncs)
# included, less only the time the rank's thread was runnable but had no core (``checks.overhead``); ``cpu``,
# recorded beside it: the process's CPU time, blind to every slowdown that waits. The names before the wall clock
# (``overhead.profiled``, ``overhead.stage.<stage>``: CPU time) are no longer gated, so a stored baseline holding
# them shows the wall figures as new, not its CPU figures as missing.
Clock = Literal["wall", "cpu"]


def overhead(label: str, clock: Clock = "wall") -> str:
    """``profiled`` or ``unprofiled``: the statistic of the on/off ratios over those steps."""
    return f"overhead.{clock}.{label}"


OVERHEAD_PROFILED = overhead("profiled")
OVERHEAD_UNPROFILED = overhead("unprofiled")
# The first profiled step on its own: msprobe's one-time set-up (its hooks, its dump dirs) on top of a profiled step.
# The history keeps it apart from the profiled step's series (``harness.history.store.first_apart``); no check writes
# it, so the gate and base against head (which pair samples by step) never see it.
FIRST_PROFILED = overhead("first_profiled")


def overhead_step(step: int) -> str:
    return f"overhead.step{step}"


def overhead_stage(stage: str, clock: Clock = "wall") -> str:
    return f"overhead.{clock}.stage.{stage}"


def overhead_sample(metric: str, step: int, rank: int) -> str:
    """One sample of an overhead ratio (``overhead.wall.profiled``, ``overhead.wall.stage.<stage>``): on/off at one
    step on one rank. Recorded, not gated itself: the statistics decide its figure from these
    (``harness.checks.stats``)."""
    return f"overhead.sample.{metric.removeprefix('overhead.')}.step{step}.rank{rank}"


def overhead_interval(metric: str) -> str:
    """The text of an overhead ratio's interval (``6.28x [5.83x-7.00x], 4 samples, noise ±10%``), for reports."""
    return f"overhead.interval.{metric.removeprefix('overhead.')}"


def samples_of(metric: str, figures: Mapping[str, object]) -> dict[str, float]:
    """A figure's samples among ``figures``, keyed ``step<N>.rank<R>`` (empty when it has none)."""
    prefix = f"overhead.sample.{metric.removeprefix('overhead.')}."
    return {
        name.removeprefix(prefix): float(v)
        for name, v in figures.items()
        if name.startswith(prefix) and isinstance(v, int | float) and SAMPLE_KEY.match(name.removeprefix(prefix))
    }


def step_of_sample(key: str) -> int:
    """The step of a sample's key (``step4.rank1``: 4); ValueError for a key that is none."""
    if not SAMPLE_KEY.match(key):
        raise ValueError(f"{key!r} is not a sample key (step<N>.rank<R>)")
    return int(key.removeprefix("step").split(".")[0])


def step_time(mode: str, step: int) -> str:
    return f"time_{mode}.step{step}_s"


def outside_steps(mode: str) -> str:
    """A run's wall time minus its step times: start-up (Ray, model set-up), teardown."""
    return f"time_{mode}.outside_steps_s"


def disk_step(step: int) -> str:
    return f"disk.step{step}_bytes"


def disk_stage(stage: str) -> str:
    return f"disk.stage.{stage}_bytes"


def disk_rank(rank: int | None) -> str:
    return f"disk.rank{rank}_bytes" if rank is not None else "disk.proc_bytes"


def disk_node(index: int) -> str:
    """The dumps one node held, the nodes numbered by their lowest rank (``NodesRecord.numbered``)."""
    return f"disk.node{index}_bytes"


def contents_entries(stage: str) -> str:
    return f"contents.entries.{stage}"


def gap_missing(stage: str) -> str:
    return f"gap.{stage}.missing_dirs"


def structure_entries(key: str) -> str:
    """``key`` is a structure key, ``stage/rankR``."""
    return f"structure.{key.replace('/', '.')}.entries"


def structure_names(key: str) -> str:
    return f"structure.{key.replace('/', '.')}.names"


@dataclass(frozen=True)
class Figure:
    """A parsed figure name: what it measures and where (step, stage, rank, run mode where it applies)."""

    name: str
    kind: str  # e.g. "overhead.stage", "disk.step", "time"
    family: Family | None  # gated family; None: recorded, not gated
    unit: Unit
    step: int | None = None
    stage: str | None = None
    rank: int | None = None
    mode: str | None = None


SAMPLE_KEY = re.compile(r"^step\d+\.rank\d+$")
_PATTERNS: list[tuple[re.Pattern[str], str, Family | None, Unit]] = [
    (re.compile(r"^overhead\.interval\..+$"), "overhead.interval", None, "text"),
    (re.compile(r"^overhead\.sample\..+\.step(?P<step>\d+)\.rank(?P<rank>\d+)$"), "overhead.sample", None, "ratio"),
    (re.compile(r"^overhead\.wall\.(?:profiled|unprofiled)$"), "overhead", "overhead", "ratio"),
    (re.compile(r"^overhead\.wall\.first_profiled$"), "overhead.first", "overhead", "ratio"),
    (re.compile(r"^overhead\.wall\.stage\.(?P<stage>.+)$"), "overhead.stage", "overhead", "ratio"),
    (re.compile(r"^overhead\.cpu\.(?:profiled|unprofiled)$"), "overhead.cpu", None, "ratio"),
    (re.compile(r"^overhead\.cpu\.stage\.(?P<stage>.+)$"), "overhead.cpu.stage", None, "ratio"),
    (re.compile(r"^overhead\.step(?P<step>\d+)$"), "overhead.step", None, "ratio"),
    (re.compile(r"^time_(?P<mode>off|on)\.step(?P<step>\d+)_s$"), "time", None, "seconds"),
    (re.compile(r"^time_(?P<mode>off|on)\.outside_steps_s$"), "time.outside_steps", None, "seconds"),
    (re.compile(r"^disk\.total_bytes$"), "disk.total", "disk", "bytes"),
    (re.compile(r"^disk\.step(?P<step>\d+)_bytes$"), "disk.step", "disk", "bytes"),
    (re.compile(r"^disk\.stage\.(?P<stage>.+)_bytes$"), "disk.stage", "disk", "bytes"),
    (re.compile(r"^disk\.(?:rank(?P<rank>\d+)|proc)_bytes$"), "disk.rank", "disk", "bytes"),
    (re.compile(r"^disk\.node\d+_bytes$"), "disk.node", "disk", "bytes"),
    (re.compile(r"^structure\..+\.entries$"), "structure", "structure", "count"),
    (re.compile(r"^contents\.entries\.(?P<stage>.+)$"), "contents.entries", None, "count"),
    (re.compile(r"^gap\.(?P<stage>.+)\.missing_dirs$"), "gap", None, "count"),
]


def parse(name: str) -> Figure:
    """What a figure name means; kind ``other`` (not gated, unit count or text) for anything else."""
    for pattern, kind, fam, unit in _PATTERNS:
        if m := pattern.match(name):
            groups = m.groupdict()
            return Figure(
                name,
                kind,
                fam,
                unit,
                step=int(groups["step"]) if groups.get("step") else None,
                stage=groups.get("stage"),
                rank=int(groups["rank"]) if groups.get("rank") else None,
                mode=groups.get("mode"),
            )
    return Figure(name, "other", None, "count")


def check_figures(figures: Mapping[str, object]) -> Mapping[str, object]:
    """What a results.json or a baseline may hold as figures: a text figure a string; a ratio a number above 0 (it
    is worked on as a logarithm); a gated figure a number of 0 or more; any other a finite number (a figure of a
    name this module does not know, ``regression.status``, also a string). A NaN once passed the gate with numpy
    warnings, was stored as null by ``baseline merge`` and ended ``report`` in a traceback; a string in a gated
    figure made it vanish from the gate. ValueError naming the first figure that is not one."""
    for name, value in figures.items():
        f = parse(name)
        if f.unit == "text":
            ok, want = isinstance(value, str), "text"
        elif f.unit == "ratio":
            ok, want = _finite(value) and value > 0, "a number above 0"
        elif f.family:
            ok, want = _finite(value) and value >= 0, "a number of 0 or more"
        else:
            ok, want = _finite(value) or (f.kind == "other" and isinstance(value, str)), "a finite number"
        if not ok:
            raise ValueError(f"figure {name}: {value!r} is not {want}")
    return figures


def _finite(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def family(name: str) -> Family | None:
    """The gated family of a figure name; None for figures that are kept but not gated."""
    return parse(name).family


def mb(n: float) -> str:
    return f"{n / 1e6:.2f} MB"


def ratio(value: float) -> str:
    return f"{value:.2f}x"


def fmt(name: str, value: float | None) -> str:
    """A figure's value in its unit: ``4.21x``, ``5.37 MB``, ``0.31 s``, ``2332``."""
    if value is None:
        return "-"
    unit = parse(name).unit
    if unit == "ratio":
        return ratio(value)
    if unit == "bytes":
        return mb(value)
    if unit == "seconds":
        return f"{value:.3g} s"
    return f"{value:.0f}"
