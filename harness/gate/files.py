"""What the judge decided, as files: the gate's JSON (``gate --json``) and ``compare.json``.

``report`` reads the gate's file and never judges again, so a summary says what the gate said (``gate
--compare-across-env`` included). Each is one model, every field declared, with its schema version (``safeio.
Versioned``): schema 1 is what harnesses before schema versions wrote.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict

from harness.artifacts import figures as fig
from harness.artifacts.results import PhaseDoc
from harness.errors import BaselineError
from harness.gate.baseline import Baseline
from harness.gate.judge import ScenarioVerdict, Status, rel_change
from harness.gate.observe import Observation
from harness.safeio import MB, InputError, Versioned


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")


def disk_per_step(obs: Observation) -> float | None:
    values = [v for _, v in obs.parsed("disk.step")]
    return statistics.fmean(values) if values else None


def _pct(base: float | None, now: float | None) -> str:
    if base is None or now is None:
        return "?"
    c = rel_change(base, now)
    if not math.isfinite(c):
        return "new"
    return "±0%" if abs(c) < 0.005 else f"{100 * c:+.0f}%"


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) else None


def change_against(obs: Observation | None, g: ScenarioVerdict, baseline: Baseline) -> str:
    """The few changes a reader wants first: profiled overhead, disk per step, and whether the structure moved."""
    if obs is None or g.status in ("new scenario", "error"):
        return "-"
    sb = baseline.scenarios.get(obs.scenario)
    if sb is None:
        return "-"
    base_obs = Observation(obs.scenario, sb.settings, sb.environment, sb.figures, None)
    parts = [
        f"overhead {_pct(_num(sb.figures.get(fig.OVERHEAD_PROFILED)), _num(obs.figures.get(fig.OVERHEAD_PROFILED)))}",
        f"disk/step {_pct(disk_per_step(base_obs), disk_per_step(obs))}",
    ]
    structure = [m for m in g.figures if m.metric.startswith("structure.") and m.verdict != "ok"]
    if any(m.metric.startswith("structure.") for m in g.figures):
        parts.append(f"structure {'changed (' + str(len(structure)) + ')' if structure else 'same'}")
    return " · ".join(parts)


class GateFigure(_Doc):
    metric: str
    verdict: str
    base: float | None = None
    now: float | None = None
    tolerance: float | None = None
    line: str


class GateScenario(_Doc):
    scenario: str
    status: Status
    notes: list[str] = []
    errors: list[str] = []
    crashes: list[str] = []
    figures: list[GateFigure] = []  # every figure not within tolerance, with its line
    change: str = "-"  # against the baseline, in a few words (the summary's column)
    reproduce: str = ""  # the command that reproduces its findings on a developer's machine


class GateBaselineDoc(_Doc):
    created: str
    commit: str | None = None
    environment: dict[str, Any] = {}


class GateDoc(Versioned):
    """The gate's verdicts. Schema 1 (no ``schema_version``) held only the verdicts (``metrics``, no baseline, no
    results dirs): enough to read, not enough to say which results dirs it judged."""

    FILE = "gate JSON"
    REDO = "re-run gate --json with this harness"
    schema_version: Literal[2] = 2
    exit_code: int
    verdict: str
    results: list[str] = []  # the results dirs judged (resolved)
    baseline: GateBaselineDoc | None = None
    scenarios: list[GateScenario]

    @classmethod
    def upgrade(cls, doc: dict[str, Any]) -> dict[str, Any]:
        def scenario(s: Any) -> Any:
            if not isinstance(s, dict) or not isinstance(s.get("metrics", []), list):
                return s
            keep = ("metric", "verdict", "base", "now", "tolerance", "line")
            figures = [{k: m[k] for k in keep if k in m} if isinstance(m, dict) else m for m in s["metrics"]]
            rest = {k: v for k, v in s.items() if k != "metrics"}
            if rest.get("status") == "error":  # schema 1 said a run's errors as its notes
                rest["errors"], rest["notes"] = rest.get("notes", []), []
            return rest | {"figures": figures}

        scenarios = doc.get("scenarios")
        return doc | {"scenarios": [scenario(s) for s in scenarios] if isinstance(scenarios, list) else scenarios}

    @classmethod
    def read(cls, path: Path) -> GateDoc:
        try:
            return cls.read_file(path, 64 * MB)
        except InputError as exc:
            raise BaselineError(f"{path}: {exc}") from None


class CompareFigure(_Doc):
    scenario: str
    metric: str
    verdict: str
    base: list[float] = []
    head: list[float] = []
    tolerance: float | None = None
    judged: bool = True
    decision: dict[str, Any] | None = None
    detail: str = ""
    line: str
    ratio: str


class CompareScenario(_Doc):
    scenario: str
    status: Status
    findings: list[str] = []
    undecided: list[str] = []
    notes: list[str] = []
    errors: list[str] = []
    figures: list[CompareFigure] = []
    numerics: dict[str, Any] | None = None
    reproduce: str = ""  # the command that reproduces its findings on a developer's machine
    crowding: str = ""  # how crowded the runner was against the scenario's quiet wall, as a line (schema 4)


class CompareDoc(Versioned):
    """compare.json: every figure of both sides and every verdict, and where the job's minutes went (``phases``).
    Schema 3: the same fields but the phases (read as none); schema 2 had no census findings, targets' notes or
    acceptance either (read as none)."""

    FILE = "compare.json"
    REDO = "re-run compare with this harness"
    schema_version: Literal[4] = 4
    base: str
    head: str
    order: list[str]
    exit_code: int
    verdict: str
    skipped: list[str] = []
    census: list[str] = []  # head's annotated roles against base's: findings, read first
    notes: list[str] = []
    accepted: str | None = None
    head_lines: list[str] = []  # what the reader reads first (report.verdicts.head_lines), as the console said
    scenarios: list[CompareScenario]
    phases: list[PhaseDoc] = []

    @classmethod
    def of(cls, doc: object) -> Self:
        """Schema 2 reads as schema 3, which reads as this one."""
        if isinstance(doc, dict) and doc.get("schema_version") == 2 and type(doc["schema_version"]) is int:
            doc = {**doc, "schema_version": 3}
        return super().of(doc)
