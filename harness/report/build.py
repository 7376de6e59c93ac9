"""``harness report``: the markdown summary, a PNG per scenario and verl's doc tables of results dirs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import BaselineError
from harness.gate.files import GateDoc
from harness.gate.observe import Observation, observe_dir
from harness.report.doc_tables import doc_tables
from harness.report.plots import plot_scenario
from harness.report.summary import summary_markdown
from harness.safeio import write_atomic


@dataclass
class Report:
    summary: Path
    tables: Path
    pngs: list[Path] = field(default_factory=list)


def build_report(results: list[Path], out: Path, gate_docs: Sequence[GateDoc] = ()) -> Report:
    """Write ``summary.md``, ``tables.md`` and ``<scenario>.png`` (``<run>/<scenario>.png`` for several runs).
    ``gate_docs``: what the gate decided; each run is shown with the one that judged its results dir."""
    out.mkdir(parents=True, exist_ok=True)
    runs: list[tuple[str, dict[str, Observation]]] = [(str(r), observe_dir(r)) for r in results]
    judged = {r: g for g in gate_docs for r in g.results}
    anywhere = next((g for g in gate_docs if not g.results), None)  # schema 1 did not say which dirs it judged
    gates = [judged.get(str(Path(r).resolve()), anywhere) for r in results]
    if unused := [g for g in gate_docs if not any(g is j for j in gates)]:
        said = ", ".join(unused[0].results) or "no results dir"
        raise BaselineError(f"--gate: a gate of {said} judged none of these results dirs: gate them, or report those")
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
