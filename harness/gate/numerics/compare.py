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
from pathlib import Path

from harness import config
from harness.errors import InfraError
from harness.gate.numerics import stats_compare
from harness.gate.numerics.msprobe_cli import first_da, run_msprobe
from harness.gate.numerics.report import RANK, Numerics, NumericsReport, StageNumerics, count_row, read_csvs
from harness.safeio import in_place
from harness.scenario.blocks import NumericsScope

ENGINES = ("harness", "msprobe")


def _dumped(dumps: Path) -> dict[tuple[int, str], set[str]]:
    """(step, stage) -> rank dirs, for the ``step_N/<stage>/step0/rank*`` dirs of a dump tree; a rank dir or dump.json
    that is a link is not there (not followed: a stage of linked ranks was "compared", 0 rows, and matched base)."""
    out: dict[tuple[int, str], set[str]] = {}
    for step0 in sorted(dumps.glob("step_*/*/step0")) if dumps.is_dir() else []:
        step = step0.parent.parent.name.removeprefix("step_")
        if step.isdigit() and step0.is_dir() and not step0.is_symlink():
            out[(int(step), step0.parent.name)] = {r.name for r in step0.iterdir() if _dump_in(r)}
    return out


def _dump_in(rank: Path) -> bool:
    dump = rank / "dump.json"
    return not rank.is_symlink() and not dump.is_symlink() and dump.is_file()


def _step_stage(dump: Path) -> tuple[int, str]:
    """(step, stage) of ``.../step_N/<stage>/step0/rankR/dump.json``; (0, "dump") for a file elsewhere."""
    parts = dump.parts
    if len(parts) >= 5 and parts[-5].startswith("step_") and parts[-5][5:].isdigit() and parts[-3] == "step0":
        return int(parts[-5][5:]), parts[-4]
    return 0, "dump"


def engine_of(engine: str | None) -> str:
    """The numerics engine: ``engine``, else ``HARNESS_NUMERICS``, else the harness's own compare."""
    chosen = engine or config.NUMERICS.get() or "harness"
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
        ranks = [(tp.parent.name if RANK.fullmatch(tp.parent.name) else "rank0", tp, gp)]
    else:
        # a rank dir that is a link (out of the tree) is not followed, on either side
        ranks = [(r, tp / r / "dump.json", gp / r / "dump.json")
                 for r in sorted(r.name for r in tp.iterdir() if not r.is_symlink() and (r / "dump.json").is_file())
                 if (only is None or r in only) and not (gp / r).is_symlink()]  # fmt: skip
    for rank, head, base in ranks:
        path = where / f"compare_result_{rank}.csv"

        def on_row(r: stats_compare.Row, rank: str = rank) -> None:
            count_row(s, rank, r.npu.name, r.result, lambda: r.cells, patterns, matched=r.bench is not None)

        before = s.rows
        try:
            n = stats_compare.compare_files(head, base, path, on_row)  # on_row: those not passing or alone
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
            if (step, stage) in only:
                restrict[id(s)] = only[(step, stage)]
    if not jobs:
        return result, 0.0, 0
    started, work, own_peak = time.monotonic(), in_place(out, out / "msprobe"), 0  # msprobe's log and work files
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
