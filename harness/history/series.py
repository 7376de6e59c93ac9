"""The history read as series: one per scenario, overhead figure, device kind and processor (CPU model or NPU type).

Step times, and so every overhead ratio, move with the machine: a hosted runner lands on one of several CPU models
night after night. Keyed by what makes two nights comparable, a change of runner starts a series (a model never
seen) or switches to another (one seen before) instead of stepping one series; the runner's own name is shown,
never keyed. A point is one night: its ``ok`` runs' samples (the on/off ratio per step and rank), worked on as
logarithms (x1.15 and /1.15 the same distance). A scenario that crashed or failed that night is no point and is
said; a figure that appears or disappears in a series is said too, and judged on the nights that have it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from harness.artifacts.figures import family
from harness.history.store import History, Identity, Night

Group = tuple[str, str, str]  # scenario, device kind, processor


@dataclass(frozen=True)
class Key:
    scenario: str
    metric: str
    device_kind: str
    processor: str

    def text(self) -> str:
        return f"{self.scenario} {self.metric} ({self.device_kind}, {self.processor})"


@dataclass(frozen=True)
class Point:
    """One night of a series: its place in the history, its samples (logarithms) and its tolerance."""

    index: int  # in History.nights
    night: Night
    logs: tuple[float, ...]
    tolerance: float

    @property
    def log(self) -> float:
        """The night's value: the mean of its samples' logarithms (the geometric mean of its ratios)."""
        return statistics.fmean(self.logs)

    @property
    def identity(self) -> Identity:
        return self.night.identity


@dataclass
class Series:
    key: Key
    points: list[Point] = field(default_factory=list)

    @property
    def tolerance(self) -> float:
        """The newest night's tolerance of the figure: what a change is judged against."""
        return self.points[-1].tolerance


@dataclass
class Reading:
    """Every overhead series of a history, and what a reader is told beside them (crashed nights, figures that
    appear or disappear)."""

    series: dict[Key, Series]
    notes: list[str]


def _logs(night: Night, scenario: str, metric: str) -> tuple[tuple[float, ...], float] | None:
    """The night's samples of ``metric`` (its figure where it recorded none) over its ok runs, and its tolerance."""
    logs: list[float] = []
    tolerance = None
    for run in night.scenarios.get(scenario, []):
        if run.status != "ok" or metric not in run.figures:
            continue
        values = list(run.samples.get(metric, {}).values()) or [run.figures[metric]]
        logs += [math.log(v) for v in values if v > 0]
        tolerance = run.tolerances.get(metric, tolerance)
    return (tuple(logs), tolerance) if logs and tolerance is not None else None


def read(history: History) -> Reading:
    series: dict[Key, Series] = {}
    notes: list[str] = []
    ran: dict[Group, list[int]] = {}  # nights each scenario ran ok on, per machine kind
    for i, night in enumerate(history.nights):
        ident = night.identity
        for scenario, runs in night.scenarios.items():
            group = (scenario, ident.device_kind, ident.processor)
            for run in runs:
                if run.status != "ok":
                    why = "; ".join(run.why) or "no reason recorded"
                    notes.append(f"{scenario}: night {night.id} ({ident.date}) {run.status} (kept, not a point): {why}")
            if any(r.status == "ok" for r in runs):
                ran.setdefault(group, []).append(i)
            metrics = {m for r in runs if r.status == "ok" for m in r.figures if family(m) == "overhead"}
            for metric in sorted(metrics):
                got = _logs(night, scenario, metric)
                if got is None:
                    continue
                key = Key(scenario, metric, ident.device_kind, ident.processor)
                series.setdefault(key, Series(key)).points.append(Point(i, night, got[0], got[1]))
    for key, s in sorted(series.items(), key=lambda kv: kv[0].text()):
        nights = ran[(key.scenario, key.device_kind, key.processor)]
        first, last = s.points[0].index, s.points[-1].index
        if first != nights[0]:
            notes.append(f"{key.text()}: appears at night {s.points[0].night.id} ({s.points[0].identity.date}): "
                         f"judged from there ({len(s.points)} nights)")  # fmt: skip
        if last != nights[-1]:
            notes.append(f"{key.text()}: disappears after night {s.points[-1].night.id} "
                         f"({s.points[-1].identity.date}): judged up to there")  # fmt: skip
    return Reading(series, notes)
