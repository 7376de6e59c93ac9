"""Numerics of base against head: msprobe's statistics compare on the two targets' "on" dump trees.

Same seeds, data and steps on both sides, so every API's statistics should match; a change in numerics (a dtype,
an op order, a loss term, a changed default) shows up API by API. For each profiled step and stage dumped on both
sides, one CSV per rank in msprobe's layout lands under the results dir; each row's ``Result`` is msprobe's verdict
on its thresholds (pass, warning, error). The harness computes them itself (``stats_compare``, on the
streaming dump reader: msprobe's compare reads 0.67 MB/s and holds the dumps whole); ``HARNESS_NUMERICS=msprobe``
runs msprobe's own CLI for everything instead (all pairs in one child process: ``msprobe_cli``).
Rows of entries the scenario lists in ``expect.nonfinite_ok`` (NaN statistics that are expected) are counted apart.
Where a stage diverges, msprobe's own first-divergence analysis (``compare -da``, ``msprobe.core.compare.find_first``)
names the first diverging API; the first non-pass row in execution order is
given too (with its statistics on both sides), and stands alone where ``-da`` finds nothing on its thresholds.

With two runs of base, base against itself is the determinism self-check: where it drifts, head's numbers are
reported, not judged.
"""

from __future__ import annotations

import re
import resource
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from harness import config
from harness.artifacts.dumpfile import DumpFile
from harness.artifacts.reader import DumpTree, step_stage
from harness.errors import InfraError
from harness.gate.numerics import stats_compare
from harness.gate.numerics.msprobe_cli import first_da, run_msprobe
from harness.gate.numerics.report import RANK, Numerics, NumericsReport, StageNumerics, count_row, read_csvs
from harness.safeio import in_place
from harness.scenario.blocks import NumericsScope

ENGINES = ("harness", "msprobe")


def _dumped(dumps: Path) -> dict[tuple[int, str], set[str]]:
    """(step, stage) -> rank dirs, of a dump tree as ``DumpTree`` reads it: a rank dir or dump.json that is a link is
    not there (not followed: a stage of linked ranks was "compared", 0 rows, and matched base). The root itself may
    be a link (the CLI's argument): it is resolved, nothing under it followed."""
    return {k: set(ranks) for k, ranks in DumpTree.scan(dumps.resolve()).by_stage().items()}


def engine_of(engine: str | None) -> str:
    """The numerics engine: ``engine``, else ``HARNESS_NUMERICS``, else the harness's own compare."""
    chosen = engine or config.NUMERICS.get() or "harness"
    if chosen not in ENGINES:
        raise InfraError(f"HARNESS_NUMERICS={chosen!r}: one of {', '.join(ENGINES)}")
    return chosen


def _compare_stage(
    s: StageNumerics,
    ranks: list[tuple[str, Path, Path]],
    where: Path,
    patterns: list[re.Pattern[str]],
    dump_of: Callable[[Path], DumpFile] = DumpFile,
) -> None:
    """The harness's compare of one step/stage, rank by rank (its name, head's and base's dump.json), CSVs in
    ``where``."""
    started = time.monotonic()
    where.mkdir(parents=True, exist_ok=True)
    for rank, head, base in ranks:
        path = where / f"compare_result_{rank}.csv"

        def on_row(r: stats_compare.CsvRow, rank: str = rank) -> None:
            count_row(s, rank, r.npu.name, r.result, lambda: r.cells, patterns, matched=r.bench is not None)

        before = s.rows
        try:
            n = stats_compare.compare_files(head, base, path, on_row, dump_of)  # on_row: those not passing or alone
        except (OSError, ValueError) as exc:
            s.status, s.detail = "error", f"{rank}: {exc}"
            break
        passed = n - (s.rows - before)
        s.rows += passed
        s.counts["pass"] += passed
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
    dump_of: Callable[[Path], DumpFile] = DumpFile,
) -> tuple[dict[str, Numerics], float, int]:
    """Each pair of dump trees, named (new, old) as (head, base), compared step/stage by step/stage; CSVs
    under ``out/<new>_vs_<old>/step_N/<stage>/``. Returns the comparisons, the wall time (compare and msprobe's
    -da where a stage diverges) and the peak RSS of the processes that compared. ``engine``: :func:`engine_of`;
    ``scope``: expect.numerics_scope (msprobe's engine compares every rank of a stage it compares); ``dump_of``: each
    dump.json as the harness's engine reads it (held open by the session whose checks read it)."""
    scope = scope or NumericsScope()
    engine = engine_of(engine)
    patterns = [re.compile(p) for p in nonfinite_ok]
    result: dict[str, Numerics] = {}
    jobs: list[tuple[StageNumerics, Path, list[str]]] = []
    ranks: dict[int, list[tuple[str, Path, Path]]] = {}  # per stage (by id), the harness's: each rank's two dump.json
    for sides, (head, base) in pairs.items():
        name = "_vs_".join(sides).replace(" ", "")
        num = result[name] = Numerics(name)
        if head.is_file() and base.is_file():  # two dump.json files: one stage, named by its dirs if msprobe's
            s = StageNumerics(*(step_stage(head) or (0, "dump")), sides)
            num.stages.append(s)
            ranks[id(s)] = [(head.parent.name if RANK.fullmatch(head.parent.name) else "rank0", head, base)]
            num.dump_bytes += head.stat().st_size + base.stat().st_size
            where = in_place(out, out / name / s.where)
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
            where = in_place(out, out / name / s.where)
            shutil.rmtree(where, ignore_errors=True)  # a rerun into the same results dir: no stale CSVs
            jobs.append((s, where, ["-tp", str(tp), "-gp", str(gp), "-o", str(where)]))
            ranks[id(s)] = [(r, tp / r / "dump.json", gp / r / "dump.json") for r in sorted(ranks_h)]
    if not jobs:
        return result, 0.0, 0
    started, work, own_peak = time.monotonic(), in_place(out, out / "msprobe"), 0  # msprobe's log and work files
    if engine == "harness":
        for s, where, _ in jobs:
            _compare_stage(s, ranks[id(s)], where, patterns, dump_of)
        own_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        jobs = [j for j in jobs if j[0].diverged and j[0].status == "compared"]  # msprobe -da names the first
        if not jobs:
            return result, time.monotonic() - started, own_peak
    doc = {"nonfinite_ok": nonfinite_ok, "jobs": [
        {"argv": a if engine == "msprobe" else None, "out": str(w), "da_argv": [*a[:-1], str(w / "da"), "-da"]}
        for _, w, a in jobs]}  # fmt: skip
    done, peak = run_msprobe(doc, work, python)
    for (s, where, _), job in zip(jobs, done, strict=True):
        if job["error"]:
            s.status, s.detail, s.seconds = "error", f"{job['error']} (log: {work / 'msprobe.log'})", job["seconds"]
            continue
        if engine == "msprobe":
            read_csvs(s, where, patterns)
        s.first_da, s.seconds = first_da(where / "da"), s.seconds + job["seconds"]
        s.detail = f" (msprobe -da failed: {job['da_error']})" if job["da_error"] else ""
    return result, time.monotonic() - started, max(peak, own_peak)


def compare_numerics(
    base: list[Path],
    head: Path,
    out: Path,
    nonfinite_ok: list[str],
    python: str = sys.executable,
    engine: str | None = None,
    scope: NumericsScope | None = None,
    dump_of: Callable[[Path], DumpFile] = DumpFile,
) -> NumericsReport:
    """Head's "on" dump tree against base's first; base's second against its first (determinism self-check).
    Whether head's numbers are declared to differ (expect.numerics_match: false) is the caller's to set on the
    report (``declared_unmatched``)."""
    pairs = {("head", "base"): (head, base[0])}
    if len(base) > 1:
        pairs[("base run 2", "base run 1")] = (base[1], base[0])
    engine = engine_of(engine)
    nums, seconds, peak = compare_trees(pairs, out, nonfinite_ok, python, engine, scope, dump_of)
    report = NumericsReport(nums["head_vs_base"], nums.get("baserun2_vs_baserun1"), False, seconds, peak)
    report.engine = engine
    return report
