"""Reports people read: the markdown summary, a PNG per scenario, verl's doc tables, merged JUnit."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from harness.gate.baseline import Baseline
from harness.gate.observe import Observation, observe_dir
from harness.gate.verdicts import gate
from harness.report.doc_tables import doc_tables
from harness.report.plots import plot_scenario
from harness.report.summary import summary_markdown
from harness.safeio import write_atomic


@dataclass
class Report:
    summary: Path
    tables: Path
    pngs: list[Path] = field(default_factory=list)


def build_report(results: list[Path], out: Path, baseline: Baseline | None = None) -> Report:
    """Write ``summary.md``, ``tables.md`` and ``<scenario>.png`` (``<run>/<scenario>.png`` for several runs)."""
    out.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, dict[str, Observation]]] = [(str(r), observe_dir(r)) for r in results]
    gates = [gate(baseline, obs) if baseline else None for _, obs in runs]
    pngs: list[Path] = []
    tables = []
    for (label, observations), r in zip(runs, results, strict=True):
        png_dir = out if len(results) == 1 else out / Path(r).name
        for name, obs in sorted(observations.items()):
            pngs.append(plot_scenario(obs, png_dir / f"{name}.png"))
        tables.append(f"## {label}\n\n" + doc_tables(list(observations.values())))
    summary = out / "summary.md"
    write_atomic(summary, summary_markdown(runs, gates, png_dir=out))
    tables_md = out / "tables.md"
    write_atomic(tables_md, "\n".join(tables))
    return Report(summary, tables_md, pngs)
