"""Change points of one series, by a maintained detector: Apache Otava's E-Divisive means with its significance test.

Otava (``otava.analysis.compute_change_points``: Matteson and James's E-Divisive over sliding windows, each
candidate kept when Student's t between the pieces it splits is significant, weak points merged away; Fleming et
al., "Hunter", ICPE 2023) is what MongoDB's CI and Apache projects run on their nightly performance series. Its
release pins numpy 2.2 and scipy < 1.17; its analysis module needs numpy and scipy.stats only, and runs on the
harness's (``.ci/setup`` installs it without its pins; tests/test_history.py pins its output on known series).

A point is a night (the mean of its samples' logarithms): the run is the unit, as everywhere in the harness's
statistics (a run's samples share its process and its minute of load, and move together; ``checks.stats``), so a
night's eight samples are not eight nights of evidence. The samples still make that night's point steadier than one
ratio would be. A change point found is **confirmed** when it is still significant with ``confirm_nights`` nights
after its first night after; before that it is **suspected**. Its size is the geometric mean of the nights after it
over those before it (up to the neighbouring change points), with a Student's t interval over those nights.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import scipy.stats as sps

from harness.errors import EnvironmentProblem
from harness.history.series import Point, Series

# The settings the harness ships, judged by benchmarks/history_power.py (docs/history.md: detections within three
# nights of a +15 % step, false alarms over quiet nights).
MAX_PVALUE = 0.001  # Otava's significance level for a change point
WINDOW = 30  # Otava's sliding window, in nights
CONFIRM_NIGHTS = 2  # further nights a change point must stay significant over to be confirmed
CONFIDENCE = 0.95  # the interval of a change's size: a regression's lower bound is past the tolerance


@dataclass(frozen=True)
class Settings:
    max_pvalue: float = MAX_PVALUE
    window: int = WINDOW
    confirm_nights: int = CONFIRM_NIGHTS
    confidence: float = CONFIDENCE

    def text(self) -> str:
        return (
            f"Otava E-Divisive, p <= {self.max_pvalue:g}, window {self.window} nights, confirmed after "
            f"{self.confirm_nights} further nights, sizes at {self.confidence:.0%}"
        )


@dataclass(frozen=True)
class Change:
    """A change point of a series: between ``before`` (the last night before) and ``after`` (the first after)."""

    series: Series
    at: int  # position in the series of ``after``
    pvalue: float
    size: float  # geometric mean after / before: above 1 is slower
    low: float
    high: float
    nights_before: int
    nights_after: int
    confirmed: bool
    further: int  # nights after ``after``

    @property
    def before(self) -> Point:
        return self.series.points[self.at - 1]

    @property
    def after(self) -> Point:
        return self.series.points[self.at]

    @property
    def name(self) -> str:
        """What ``history accept`` takes: ``<scenario>:<metric>@<first night after>``."""
        return f"{self.series.key.scenario}:{self.series.key.metric}@{self.after.night.id}"

    def size_text(self) -> str:
        return f"{self.size:.2f}x [{self.low:.2f}x-{self.high:.2f}x]"


def _otava() -> Any:
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise EnvironmentProblem(
            "apache-otava is not installed (the change-point detector of `history check`): `bash .ci/setup` "
            "installs it, or `pip install --no-deps apache-otava==0.8.0`"
        ) from None
    return compute_change_points


def _interval(before: list[float], after: list[float], confidence: float) -> tuple[float, float, float]:
    """after/before in logs, with Student's t interval over the nights (one night a side: no spread, unbounded)."""
    delta = statistics.fmean(after) - statistics.fmean(before)
    dof = len(before) + len(after) - 2
    if dof < 1:
        return delta, -math.inf, math.inf
    spread = sum((x - statistics.fmean(s)) ** 2 for s in (before, after) for x in s) / dof
    se = math.sqrt(spread * (1 / len(before) + 1 / len(after)))
    half = float(sps.t.ppf(0.5 + confidence / 2, dof)) * se
    return delta, delta - half, delta + half


def changes(series: Series, settings: Settings) -> list[Change]:
    """The change points Otava finds in ``series`` (two nights at least), oldest first."""
    values = [p.log for p in series.points]
    if len(values) < 2:
        return []
    found, _ = _otava()(values, window_len=settings.window, max_pvalue=settings.max_pvalue)
    cuts = sorted({int(cp.index) for cp in found if 0 < int(cp.index) < len(values)})
    pvalues = {int(cp.index): float(cp.stats.pvalue) for cp in found}
    out = []
    for i, at in enumerate(cuts):
        start = cuts[i - 1] if i else 0
        end = cuts[i + 1] if i + 1 < len(cuts) else len(values)
        delta, lo, hi = _interval(values[start:at], values[at:end], settings.confidence)
        further = len(values) - 1 - at
        out.append(
            Change(
                series=series,
                at=at,
                pvalue=pvalues[at],
                size=math.exp(delta),
                low=math.exp(lo) if math.isfinite(lo) else 0.0,
                high=math.exp(hi) if math.isfinite(hi) else math.inf,
                nights_before=at - start,
                nights_after=end - at,
                confirmed=further >= settings.confirm_nights,
                further=further,
            )
        )
    return out
