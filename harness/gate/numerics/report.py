"""Numerics of base against head as judged: per step and stage, the rows compared and their results on msprobe's
thresholds (pass, warning, error), the first divergence, and what a comparison reports (findings, notes, JUnit
properties). Rows come from the harness's own compare (``stats_compare``) or from msprobe's CSVs (``read_csvs``)."""

from __future__ import annotations

import csv
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from harness.gate.numerics.table import N_A
from harness.outcomes import MISSING, NOTHING_COMPARED, REGRESSED
from harness.outside import shown

RESULTS = ("pass", "warning", "error")
STATS = ("max", "min", "mean", "l2norm")
RANK = re.compile(r"(?:rank|proc)\d+")
_ENTRY = re.compile(r"^(.*?\.(?:forward|backward)(?:\.\d+)?)\.(?:input|output|parameters_grad|parameters|kwargs)\b")
csv.field_size_limit(1 << 30)  # NPU_Stack_Info holds a whole stack in one cell


def entry_of(row_name: str) -> str:
    """The dump.json entry a CSV row belongs to: ``Tensor.narrow.0.forward.output.0`` -> ``Tensor.narrow.0.forward``."""
    m = _ENTRY.match(row_name)
    return m.group(1) if m else row_name


@dataclass
class Row:
    """One non-pass CSV row: a tensor of an API call whose statistics moved beyond msprobe's thresholds."""

    name: str
    rank: str
    result: str
    base: dict[str, str]
    head: dict[str, str]

    def text(self) -> str:
        def side(d: dict[str, str]) -> str:
            return " ".join(f"{k} {d.get(k, '-')}" for k in STATS)

        return f"{self.name} ({self.rank}, {self.result}): {side(self.base)} -> {side(self.head)}"


@dataclass
class StageNumerics:
    """One profiled step and stage: what msprobe compared and found. ``status``: compared, missing (dumped on
    base only), new (head only), error (msprobe failed)."""

    step: int
    stage: str
    sides: tuple[str, str] = ("head", "base")  # what the two trees are
    status: str = "compared"
    rows: int = 0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESULTS, 0))
    nonfinite_ok: int = 0  # non-pass rows of entries listed in expect.nonfinite_ok: counted apart, not judged
    unmatched: int = 0  # rows of head with no counterpart on base (msprobe's N/A rows, which it passes): not compared
    first: Row | None = None  # the first non-pass row in execution order (rank by rank)
    first_da: str = ""  # msprobe -da's first diverging API, "" when it names none
    detail: str = ""  # missing ranks, msprobe's error
    csvs: list[str] = field(default_factory=list)
    seconds: float = 0.0  # the compare's wall time on this pair, msprobe's -da included

    @property
    def where(self) -> str:
        return f"step_{self.step}/{self.stage}"

    @property
    def diverged(self) -> int:
        return self.counts["warning"] + self.counts["error"]

    @property
    def first_api(self) -> str:
        return self.first_da or (entry_of(self.first.name) if self.first else "")

    def line(self) -> str:
        """One line: the stage's dir, the entry names and msprobe's error come from the dumps and msprobe (the code
        under test), each shown as one line."""
        new, old = self.sides
        where, detail = shown(self.where), shown(self.detail, 1000)
        if self.status == "missing":
            return f"{where} dumped on {old}, missing on {new}{detail}: not compared"
        if self.status == "new":
            return f"{where} dumped on {new} only{detail}: not compared"
        if self.status == "error":
            return f"{where}: compare failed: {detail}"
        counts = ", ".join(f"{self.counts[r]} {r}" for r in RESULTS)
        text = f"{where}: {self.rows} rows, {counts}"
        text += f" (+{self.nonfinite_ok} nonfinite_ok rows counted apart)" if self.nonfinite_ok else ""
        text += f" (+{self.unmatched} rows with no counterpart on {old}: not compared)" if self.unmatched else ""
        if self.first:
            how = "msprobe -da" if self.first_da else f"first non-pass row; msprobe -da names none{detail}"
            text += f"; first diverging API {shown(self.first_api)} ({how}): {shown(self.first.text(), 1000)}"
        return text


@dataclass
class Numerics:
    """One comparison of two dump trees (head against base, or base against itself)."""

    label: str
    stages: list[StageNumerics] = field(default_factory=list)
    dump_bytes: int = 0  # both trees' dump.json bytes
    skipped: str = ""  # what expect.numerics_scope left out, "" when nothing

    @property
    def rows(self) -> int:
        return sum(s.rows for s in self.stages)

    @property
    def diverged(self) -> list[StageNumerics]:
        return [s for s in self.stages if s.diverged]

    @property
    def clean(self) -> bool:
        return all(s.status == "compared" and not s.diverged for s in self.stages)


@dataclass
class NumericsReport:
    """Head against base, and (with two base runs) base against itself; ``judged`` False: reported only."""

    head_vs_base: Numerics
    determinism: Numerics | None = None
    declared_unmatched: bool = False  # expect.numerics_match: false
    seconds: float = 0.0  # wall time of every comparison, msprobe's -da included
    peak_rss_bytes: int = 0
    engine: str = "harness"  # who computed the statistics compare: the harness, or msprobe (HARNESS_NUMERICS)

    @property
    def judged(self) -> bool:
        return not self.declared_unmatched and (self.determinism is None or self.determinism.clean)

    def nothing_compared(self) -> str:
        """NOTHING COMPARED and why, where no row of head met its counterpart on base: nothing dumped on both sides
        with an entry, or every entry renamed (msprobe passes a row with no counterpart); "" where a row was."""
        both = [s for s in self.head_vs_base.stages if s.status == "compared"]
        if any(s.rows > s.unmatched for s in both):
            return ""
        alone = sum(s.unmatched for s in both)
        why = (f"none of head's {alone} rows has a counterpart on base: every entry renamed" if alone
               else "no step/stage dumped on both sides with an entry to compare")  # fmt: skip
        return f"{NOTHING_COMPARED} ({why})"

    def findings(self, scenario: str) -> list[str]:
        """Regressions, one line each: a stage missing on head, and numerics beyond msprobe's thresholds."""
        out = [f"{MISSING} {scenario}: numerics {s.line()}" for s in self.head_vs_base.stages if s.status == "missing"]
        if self.judged:
            out += [f"{REGRESSED} {scenario}: numerics {s.line()}" for s in self.head_vs_base.diverged]
        return out

    def notes(self) -> list[str]:
        hb, out = self.head_vs_base, []
        if self.declared_unmatched:
            out.append("numerics: not judged (expect.numerics_match: false), reported only")
        if self.determinism is not None and not self.determinism.clean:
            drift = "; ".join(s.line() for s in self.determinism.stages if s.status != "compared" or s.diverged)
            out.append(f"numerics: not judged: base drifts between its own runs (determinism self-check): {drift}")
        elif self.determinism is not None:
            out.append(f"numerics: determinism self-check clean ({self.determinism.rows} rows, base run 2 vs 1)")
        if not self.judged:
            out += [f"numerics (reported) {s.line()}" for s in hb.diverged]
        alone = [s for s in hb.stages if s.status == "compared" and s.rows == s.unmatched > 0]  # none in common
        out += [f"numerics {s.line()}" for s in hb.stages if s.status in ("new", "error") or s in alone]
        clean = [s for s in hb.stages if s.status == "compared" and not s.diverged and s not in alone]
        if clean:
            apart = sum(s.nonfinite_ok for s in clean)
            unmatched = sum(s.unmatched for s in clean)
            out.append(
                f"numerics: {len(clean)} of {len(hb.stages)} step/stage dumps match base "
                f"({sum(s.rows - s.unmatched for s in clean)} rows all pass"
                f"{f', {apart} nonfinite_ok rows counted apart' if apart else ''}"
                f"{f', {unmatched} rows with no counterpart on base not compared' if unmatched else ''})"
            )
        if hb.skipped:
            out.append(f"numerics: not compared (expect.numerics_scope): {hb.skipped}")
        mb = (hb.dump_bytes + (self.determinism.dump_bytes if self.determinism else 0)) / 1e6
        out.append(f"numerics: {self.engine} compare {self.seconds:.1f}s for {mb:.1f} MB of dump.json, peak RSS "
                   f"{self.peak_rss_bytes / 2**20:.0f} MiB")  # fmt: skip
        return out

    def summary(self) -> str:
        """One cell: rows compared, non-pass rows, the first divergence, missing stages."""
        hb = self.head_vs_base
        text = f"{hb.rows} rows, {sum(s.diverged for s in hb.stages)} non-pass"
        text += "".join(f"; first {s.first_api} ({s.where})" for s in hb.diverged[:1])
        text += "".join(f"; {s.where} missing on head" for s in hb.stages if s.status == "missing")
        return text + ("" if self.judged else " (reported, not judged)")

    def properties(self) -> list[tuple[str, str | int]]:
        """JUnit properties: per step/stage, rows compared, non-pass counts and the first divergence."""
        out: list[tuple[str, str | int]] = [("numerics.judged", str(self.judged).lower())]
        for s in self.head_vs_base.stages:
            key = f"numerics.{s.where}"
            out += [(f"{key}.status", s.status), (f"{key}.rows", s.rows)]
            out += [(f"{key}.{r}", s.counts[r]) for r in RESULTS if r != "pass"]
            out += [(f"{key}.nonfinite_ok", s.nonfinite_ok)] if s.nonfinite_ok else []
            out += [(f"{key}.unmatched", s.unmatched)] if s.unmatched else []
            out += [(f"{key}.first", s.first_api)] if s.first else []
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"judged": self.judged}


def count_row(
    stage: StageNumerics,
    rank: str,
    name: str,
    result: str,
    cells: Callable[[], Mapping[str, Any]],
    nonfinite_ok: list[re.Pattern[str]],
    matched: bool = True,
) -> None:
    """One CSV row into ``stage``'s counts; the first non-pass row kept with its statistics on both sides
    (``cells``: the row by column, asked for that row only). ``matched``: the row has a counterpart on base; one
    without is counted apart, whatever msprobe's result (it compared nothing)."""
    stage.rows += 1
    if not matched:
        stage.unmatched += 1
    elif result == "pass":
        stage.counts["pass"] += 1
    elif any(p.search(entry_of(name)) for p in nonfinite_ok):
        stage.nonfinite_ok += 1
    else:
        stage.counts["error" if result != "warning" else "warning"] += 1
        if stage.first is None:
            row = cells()
            base = {k: str(row.get(f"Bench {k}", "")) for k in STATS}
            head = {k: str(row.get(f"NPU {k}", "")) for k in STATS}
            stage.first = Row(name, rank, result or "?", base, head)


def read_csvs(stage: StageNumerics, out: Path, nonfinite_ok: list[re.Pattern[str]]) -> None:
    """Count the rows of msprobe's CSVs in ``out`` (one per rank) into ``stage``; keep the first non-pass row."""
    for path in sorted(out.glob("compare_result_*.csv")):
        stage.csvs.append(str(path))
        rank = m.group(0) if (m := RANK.search(path.stem)) else "rank0"  # two files: msprobe names no rank
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                name, result, matched = row["NPU Name"], row.get("Result", ""), row.get("Bench Name") != N_A
                count_row(stage, rank, name, result, partial(dict, row), nonfinite_ok, matched)
