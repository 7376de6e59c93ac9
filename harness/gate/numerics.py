"""Numerics of base against head: msprobe's statistics compare on the two targets' "on" dump trees.

Same seeds, data and steps on both sides, so every API's statistics should match; a change in numerics (a dtype,
an op order, a loss term, a changed default) shows up API by API. For each profiled step and stage dumped on both
sides, one CSV per rank in msprobe's layout lands under the results dir; each row's ``Result`` is msprobe's verdict
on its thresholds (pass, warning, error). The harness computes them itself (``harness.gate.stats_compare``, on the
streaming dump reader: msprobe's compare reads 0.67 MB/s and holds the dumps whole); ``HARNESS_NUMERICS=msprobe``
runs msprobe's own CLI for everything instead (all pairs in one child process: ``harness.gate.msprobe_compare``).
Rows of entries the scenario lists in ``expect.nonfinite_ok`` (NaN statistics that are expected) are counted apart.
Where a stage diverges, msprobe's own first-divergence analysis (``compare -da``, ``msprobe.core.compare.find_first``)
names the first diverging API; the first non-pass row in execution order is
given too (with its statistics on both sides), and stands alone where ``-da`` finds nothing on its thresholds.

With two runs of base, base against itself is the determinism self-check: where it drifts, head's numbers are
reported, not judged.
"""

from __future__ import annotations

import csv
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from harness.errors import InfraError
from harness.gate import stats_compare
from harness.scenario.blocks import NumericsScope

ENGINES = ("harness", "msprobe")

RESULTS = ("pass", "warning", "error")
STATS = ("max", "min", "mean", "l2norm")
_RANK = re.compile(r"(?:rank|proc)\d+")
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
        new, old = self.sides
        if self.status == "missing":
            return f"{self.where} dumped on {old}, missing on {new}{self.detail}: not compared"
        if self.status == "new":
            return f"{self.where} dumped on {new} only{self.detail}: not compared"
        if self.status == "error":
            return f"{self.where}: compare failed: {self.detail}"
        counts = ", ".join(f"{self.counts[r]} {r}" for r in RESULTS)
        text = f"{self.where}: {self.rows} rows, {counts}"
        text += f" (+{self.nonfinite_ok} nonfinite_ok rows counted apart)" if self.nonfinite_ok else ""
        if self.first:
            how = "msprobe -da" if self.first_da else f"first non-pass row; msprobe -da names none{self.detail}"
            text += f"; first diverging API {self.first_api} ({how}): {self.first.text()}"
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

    def findings(self, scenario: str) -> list[str]:
        """Regressions, one line each: a stage missing on head, and numerics beyond msprobe's thresholds."""
        out = [f"MISSING {scenario}: numerics {s.line()}" for s in self.head_vs_base.stages if s.status == "missing"]
        if self.judged:
            out += [f"REGRESSED {scenario}: numerics {s.line()}" for s in self.head_vs_base.diverged]
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
        out += [f"numerics {s.line()}" for s in hb.stages if s.status in ("new", "error")]
        clean = [s for s in hb.stages if s.status == "compared" and not s.diverged]
        if clean:
            apart = sum(s.nonfinite_ok for s in clean)
            out.append(
                f"numerics: {len(clean)} of {len(hb.stages)} step/stage dumps match base ({sum(s.rows for s in clean)} "
                f"rows all pass{f', {apart} nonfinite_ok rows counted apart' if apart else ''})"
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
            out += [(f"{key}.first", s.first_api)] if s.first else []
        return out

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"judged": self.judged}


def _dumped(dumps: Path) -> dict[tuple[int, str], set[str]]:
    """(step, stage) -> rank dirs, for the ``step_N/<stage>/step0/rank*`` dirs of a dump tree."""
    out: dict[tuple[int, str], set[str]] = {}
    for step0 in sorted(dumps.glob("step_*/*/step0")) if dumps.is_dir() else []:
        step = step0.parent.parent.name.removeprefix("step_")
        if step.isdigit() and step0.is_dir() and not step0.is_symlink():
            out[(int(step), step0.parent.name)] = {r.name for r in step0.iterdir() if (r / "dump.json").is_file()}
    return out


def _step_stage(dump: Path) -> tuple[int, str]:
    """(step, stage) of ``.../step_N/<stage>/step0/rankR/dump.json``; (0, "dump") for a file elsewhere."""
    parts = dump.parts
    if len(parts) >= 5 and parts[-5].startswith("step_") and parts[-5][5:].isdigit() and parts[-3] == "step0":
        return int(parts[-5][5:]), parts[-4]
    return 0, "dump"


def _run_msprobe(doc: dict[str, Any], work: Path, python: str) -> tuple[list[dict[str, Any]], int]:
    """Every job in one child process (its log: ``work/msprobe.log``); per job its error, and the peak RSS."""
    work.mkdir(parents=True, exist_ok=True)
    jobs_file, result_file = work / "jobs.json", work / "result.json"
    jobs_file.write_text(json.dumps(doc))
    result_file.unlink(missing_ok=True)
    argv = [python, "-m", "harness.gate.msprobe_compare", str(jobs_file), str(result_file)]
    with (work / "msprobe.log").open("w") as log:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False, cwd=work)
    if proc.returncode != 0 or not result_file.is_file():
        raise InfraError(f"msprobe compare exited with {proc.returncode}: see {work / 'msprobe.log'}")
    result = json.loads(result_file.read_text())
    return result["jobs"], int(result["peak_rss_bytes"])


def count_row(
    stage: StageNumerics,
    rank: str,
    name: str,
    result: str,
    cells: Callable[[], Mapping[str, Any]],
    nonfinite_ok: list[re.Pattern[str]],
) -> None:
    """One CSV row into ``stage``'s counts; the first non-pass row kept with its statistics on both sides
    (``cells``: the row by column, asked for that row only)."""
    stage.rows += 1
    if result == "pass":
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
        rank = m.group(0) if (m := _RANK.search(path.stem)) else "rank0"  # two files: msprobe names no rank
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                count_row(stage, rank, row["NPU Name"], row.get("Result", ""), partial(dict, row), nonfinite_ok)


def _first_da(out: Path) -> str:
    """msprobe -da's first diverging API (``diff_analyze_*.json``: rank -> nodes), "" when it wrote none."""
    for path in sorted(out.glob("diff_analyze_*.json")):
        for rank, nodes in sorted(json.loads(path.read_text()).items()):
            if nodes:
                return f"{nodes[0].get('op_name', '?')} ({rank.replace('_', '')})"
    return ""


def engine_of(engine: str | None) -> str:
    """The numerics engine: ``engine``, else ``HARNESS_NUMERICS``, else the harness's own compare."""
    chosen = engine or os.environ.get("HARNESS_NUMERICS") or "harness"
    if chosen not in ENGINES:
        raise InfraError(f"HARNESS_NUMERICS={chosen!r}: one of {', '.join(ENGINES)}")
    return chosen


def _compare_stage(
    s: StageNumerics, tp: Path, gp: Path, where: Path, patterns: list[re.Pattern[str]], only: set[str] | None = None
) -> None:
    """The harness's compare of one step/stage, rank by rank (msprobe's rank dirs, those in ``only`` if given; two
    dump.json files: one rank, named by its dir), CSVs in ``where``."""
    started = time.monotonic()
    where.mkdir(parents=True, exist_ok=True)
    if tp.is_file():
        ranks = [(tp.parent.name if _RANK.fullmatch(tp.parent.name) else "rank0", tp, gp)]
    else:
        ranks = [(r, tp / r / "dump.json", gp / r / "dump.json")
                 for r in sorted(r.name for r in tp.iterdir() if (r / "dump.json").is_file())
                 if only is None or r in only]  # fmt: skip
    for rank, head, base in ranks:
        path = where / f"compare_result_{rank}.csv"

        def on_row(r: stats_compare.Row, rank: str = rank) -> None:
            count_row(s, rank, r.npu.name, r.result, lambda: r.cells, patterns)

        try:
            stats_compare.compare_files(head, base, path, on_row)
        except (OSError, ValueError) as exc:
            s.status, s.detail = "error", f"{rank}: {exc}"
            break
        if path.is_file():
            s.csvs.append(str(path))
    s.seconds = time.monotonic() - started


def compare_trees(
    pairs: dict[tuple[str, str], tuple[Path, Path]],
    out: Path,
    nonfinite_ok: list[str],
    python: str,
    engine: str | None = None,
    scope: NumericsScope | None = None,
) -> tuple[dict[str, Numerics], float, int]:
    """Each pair of dump trees, named (new, old) as (head, base), compared step/stage by step/stage; CSVs
    under ``out/<new>_vs_<old>/step_N/<stage>/``. Returns the comparisons, the wall time (compare and msprobe's
    -da where a stage diverges) and the peak RSS of the processes that compared. ``engine``: :func:`engine_of`;
    ``scope``: expect.numerics_scope (msprobe's engine compares every rank of a stage it compares)."""
    scope = scope or NumericsScope()
    engine = engine_of(engine)
    patterns = [re.compile(p) for p in nonfinite_ok]
    result: dict[str, Numerics] = {}
    jobs: list[tuple[StageNumerics, Path, list[str]]] = []
    restrict: dict[int, set[str]] = {}  # per stage (by id), the rank dirs scope keeps
    for sides, (head, base) in pairs.items():
        name = "_vs_".join(sides).replace(" ", "")
        num = result[name] = Numerics(name)
        if head.is_file() and base.is_file():  # two dump.json files: one stage, named by its dirs if msprobe's
            s = StageNumerics(*_step_stage(head), sides)
            num.stages.append(s)
            num.dump_bytes += head.stat().st_size + base.stat().st_size
            where = out / name / s.where
            shutil.rmtree(where, ignore_errors=True)
            jobs.append((s, where, ["-tp", str(head), "-gp", str(base), "-o", str(where)]))
            continue
        on_head, on_base = _dumped(head), _dumped(base)
        keys, skipped = sorted(set(on_head) | set(on_base)), []
        if scope.steps == "first" and (both := sorted(set(on_head) & set(on_base))):
            skipped = [f"step_{k[0]}/{k[1]}" for k in keys if k[0] != both[0][0]]
            keys = [k for k in keys if k[0] == both[0][0]]
        only: dict[tuple[int, str], set[str]] = {}
        for k in keys:
            dirs = sorted(on_head.get(k, set()) | on_base.get(k, set()), key=lambda r: int(re.sub(r"\D", "", r) or 0))
            if scope.ranks != "all" and len(dirs) > scope.ranks:
                skipped += [f"step_{k[0]}/{k[1]}/{r}" for r in dirs[scope.ranks :]]
                only[k] = set(dirs[: scope.ranks])
        num.skipped = ", ".join(skipped)
        for step, stage in keys:
            s = StageNumerics(step, stage, sides)
            num.stages.append(s)
            ranks_h, ranks_b = on_head.get((step, stage), set()), on_base.get((step, stage), set())
            if (step, stage) in only:
                ranks_h, ranks_b = ranks_h & only[(step, stage)], ranks_b & only[(step, stage)]
            if ranks_h != ranks_b:
                s.status = "missing" if ranks_b - ranks_h else "new"
                s.detail = f" ({', '.join(sorted(ranks_b ^ ranks_h))})" if ranks_h and ranks_b else ""
                continue
            num.dump_bytes += sum((d / f"step_{step}/{stage}/step0/{r}/dump.json").stat().st_size
                                  for d in (head, base) for r in ranks_h)  # fmt: skip
            tp, gp = (d / f"step_{step}" / stage / "step0" for d in (head, base))
            where = out / name / s.where
            shutil.rmtree(where, ignore_errors=True)  # a rerun into the same results dir: no stale CSVs
            jobs.append((s, where, ["-tp", str(tp), "-gp", str(gp), "-o", str(where)]))
            if (step, stage) in only:
                restrict[id(s)] = only[(step, stage)]
    if not jobs:
        return result, 0.0, 0
    started, work, own_peak = time.monotonic(), out / "msprobe", 0
    if engine == "harness":
        for s, where, argv in jobs:
            _compare_stage(s, Path(argv[1]), Path(argv[3]), where, patterns, restrict.get(id(s)))
        own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        jobs = [j for j in jobs if j[0].diverged and j[0].status == "compared"]  # msprobe -da names the first
        if not jobs:
            return result, time.monotonic() - started, own_peak
    doc = {"nonfinite_ok": nonfinite_ok, "jobs": [
        {"argv": a if engine == "msprobe" else None, "out": str(w), "da_argv": [*a[:-1], str(w / "da"), "-da"]}
        for _, w, a in jobs]}  # fmt: skip
    done, peak = _run_msprobe(doc, work, python)
    for (s, where, _), job in zip(jobs, done, strict=True):
        if job["error"]:
            s.status, s.detail, s.seconds = "error", f"{job['error']} (log: {work / 'msprobe.log'})", job["seconds"]
            continue
        if engine == "msprobe":
            read_csvs(s, where, patterns)
        s.first_da, s.seconds = _first_da(where / "da"), s.seconds + job["seconds"]
        s.detail = f" (msprobe -da failed: {job['da_error']})" if job["da_error"] else ""
    return result, time.monotonic() - started, max(peak, own_peak)


def compare_numerics(
    base: list[Path],
    head: Path,
    out: Path,
    nonfinite_ok: list[str],
    declared_unmatched: bool = False,
    python: str = sys.executable,
    engine: str | None = None,
    scope: NumericsScope | None = None,
) -> NumericsReport:
    """Head's "on" dump tree against base's first; base's second against its first (determinism self-check)."""
    pairs = {("head", "base"): (head, base[0])}
    if len(base) > 1:
        pairs[("base run 2", "base run 1")] = (base[1], base[0])
    engine = engine_of(engine)
    nums, seconds, peak = compare_trees(pairs, out, nonfinite_ok, python, engine, scope)
    report = NumericsReport(nums["head_vs_base"], nums.get("baserun2_vs_baserun1"), declared_unmatched, seconds, peak)
    report.engine = engine
    return report
