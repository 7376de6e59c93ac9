"""The statistics compare of numerics: the harness's (``harness.gate.numerics.stats_compare``) against msprobe's own
CLI, on the same input: seconds, MB/s of dump.json per core, peak RSS, and the CSV rows whose cells differ.

Not a test: run by hand. Each compare runs in a fresh child process, so the peak RSS printed is that compare's own
(msprobe's: its process and the workers it forks); MB/s per core is both dump.json files' bytes over the child's
CPU seconds. The harness's compare runs ``--repeat`` times (median and fastest printed: on the shared 2-core machine
one run's CPU time moves by a third), msprobe's once. msprobe's -da (first divergence) is not timed here: it runs
only on a stage that diverges.

    # generated msprobe-format pairs (benchmarks/dump_readers.py's bodies; head: every 7th Norm moved)
    .venv/bin/python benchmarks/numerics_compare.py --sizes 16MB,256MB --msprobe-max 16MB
    # two "on" dump trees, e.g. two runs of real_fsdp_l1
    .venv/bin/python benchmarks/numerics_compare.py --trees BASE/on/dumps HEAD/on/dumps
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from itertools import zip_longest
from pathlib import Path

from dump_readers import STAGE, write_dump
from pydantic import ByteSize, TypeAdapter

NORM = re.compile(r'^(\s*"Norm": )([-0-9.eE+]+)(,?)$')
MOVE_EVERY = 7  # head: one Norm in this many moved by MOVE_BY (inputs and outputs alike: every verdict occurs)
MOVE_BY = (1.05, 1.3, 1.8)  # an output moved by these alone: pass, warning (> 10 %), error (> 50 %)


def _pair(root: Path, size: int) -> tuple[Path, Path]:
    """base and head trees of one ``size``-byte rank each; head's Norms moved line by line (bounded memory)."""
    trees = []
    for name in ("base", "head"):
        rank = root / name / "step_2" / STAGE / "step0" / "rank0"
        rank.mkdir(parents=True)
        (rank / "stack.json").write_text("{}")
        (rank / "construct.json").write_text("{}")
        trees.append(root / name)
    base, head = (t / "step_2" / STAGE / "step0" / "rank0" / "dump.json" for t in trees)
    write_dump(base, size)
    n = 0
    with base.open() as src, head.open("w") as dst:
        for line in src:
            if (m := NORM.match(line.rstrip("\n"))) is not None:
                n += 1
                if n % MOVE_EVERY == 0:
                    # the factor changes every third move: indexed by the move's own count (n // MOVE_EVERY), it
                    # would follow the moved leaf (entries of 3 leaves, 7 = 1 mod 3), an output always by 1.05
                    moved = float(m.group(2)) * MOVE_BY[(n // (MOVE_EVERY * len(MOVE_BY))) % len(MOVE_BY)]
                    line = f"{m.group(1)}{moved!r}{m.group(3)}\n"
            dst.write(line)
    return trees[0], trees[1]


def _child(engine: str, tp: Path, gp: Path, out: Path) -> None:
    """One compare of every step/stage in this fresh process; prints one JSON line ("own", "own_kernel": the
    harness's CPU seconds after its imports, as benchmarks/dump_readers.py times its readers, and those of them in
    the kernel: writing the CSVs and reading the files, which moves most from run to run on this machine)."""
    started = time.monotonic()
    rows = 0
    own_cpu = own_kernel = None
    if engine == "harness":
        from harness.artifacts.reader import DumpTree
        from harness.gate.numerics.compare import _compare_stage
        from harness.gate.numerics.report import StageNumerics

        at, kernel = time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_stime
        head, base = (DumpTree.scan(d).by_stage() for d in (tp, gp))
        for (step, stage), ranks in sorted(head.items()):
            s = StageNumerics(step, stage)
            pairs = [(r, dump, base[(step, stage)][r]) for r, dump in sorted(ranks.items())]
            _compare_stage(s, pairs, out / s.where, [])
            rows += s.rows
        own_cpu = time.process_time() - at
        own_kernel = resource.getrusage(resource.RUSAGE_SELF).ru_stime - kernel
    else:
        from harness.artifacts.reader import DumpTree
        from harness.gate.numerics import msprobe_cli
        from harness.gate.numerics.report import StageNumerics, read_csvs

        for step, stage in sorted(DumpTree.scan(tp).by_stage()):
            s = StageNumerics(step, stage)
            tp_s, gp_s = (str(d / f"step_{step}" / stage / "step0") for d in (tp, gp))
            argv = ["-tp", tp_s, "-gp", gp_s]
            if error := msprobe_cli._msprobe([*argv, "-o", str(out / s.where)]):
                raise SystemExit(f"msprobe compare failed: {error}")
            read_csvs(s, out / s.where, [])
            rows += s.rows
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    print(json.dumps({"seconds": time.monotonic() - started, "rows": rows, "own": own_cpu, "own_kernel": own_kernel,
                      "cpu": own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime,
                      "peak": max(own.ru_maxrss, kids.ru_maxrss) * 1024}))  # fmt: skip


def _run(engine: str, tp: Path, gp: Path, out: Path) -> dict:
    argv = [sys.executable, __file__, "--child", engine, str(tp), str(gp), str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{engine} child failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _differ(ours: Path, theirs: Path) -> tuple[int, int]:
    """(rows whose cells differ, rows compared) over every CSV of the two outputs, paired by rank."""
    differ = total = 0
    for mine in sorted(ours.rglob("compare_result_*.csv")):
        rank = mine.stem.removeprefix("compare_result_")
        (other,) = (theirs / mine.parent.relative_to(ours)).glob(f"compare_result_{rank}_*.csv")
        with mine.open(newline="") as a, other.open(newline="") as b:
            for x, y in zip_longest(csv.reader(a), csv.reader(b)):
                total += 1
                differ += x != y
    return differ, total


def _results(ours: Path) -> str:
    """How many of the harness's CSV rows are pass, warning and error (the generated pairs hold each)."""
    counts: Counter[str] = Counter()
    for path in ours.rglob("compare_result_*.csv"):
        with path.open(newline="") as f:
            counts.update(row["Result"] for row in csv.DictReader(f))
    return ", ".join(f"{counts[r]} {r}" for r in ("pass", "warning", "error"))


def _line(engine: str, r: dict, mb: float) -> str:
    own = (f"  (compare alone {r['own']:.2f}s CPU, {r['own_kernel']:.2f}s of it in the kernel, "
           f"{mb / r['own']:.1f} MB/s per core)") if r["own"] else ""  # fmt: skip
    return (f"  {engine:<8} {r['seconds']:7.1f}s wall {r['cpu']:7.1f}s CPU  {mb / r['cpu']:6.1f} MB/s per core  "
            f"peak RSS {r['peak'] / 2**20:6.0f} MiB  {r['rows']} rows{own}")  # fmt: skip


def _runs(tp: Path, gp: Path, out: Path, repeat: int, mb: float) -> None:
    """The harness's compare ``repeat`` times, each in a fresh child and into an empty dir, as the harness's results
    dir is (not over the last run's CSVs): its median and fastest run (one run's CPU time moves by a third on a
    shared runner)."""
    runs = []
    for _ in range(repeat):
        shutil.rmtree(out, ignore_errors=True)
        runs.append(_run("harness", tp, gp, out))
    runs.sort(key=lambda r: r["own"])
    median, fastest = runs[len(runs) // 2], runs[0]
    print(_line("harness", median, mb) + f"  median of {repeat}", flush=True)
    if repeat > 1:
        print(_line("harness", fastest, mb) + "  fastest", flush=True)


def _compare(title: str, base: Path, head: Path, out: Path, msprobe: bool, repeat: int) -> None:
    mb = sum(p.stat().st_size for d in (base, head) for p in d.rglob("dump.json")) / 1e6
    if not mb:
        raise SystemExit(f"no dump.json under {base} or {head}")
    print(f"== {title}: {mb:.1f} MB of dump.json (both sides)", flush=True)
    _runs(head, base, out / "harness", repeat, mb)
    print(f"  results: {_results(out / 'harness')}", flush=True)
    if msprobe:
        theirs = _run("msprobe", head, base, out / "msprobe")
        print(_line("msprobe", theirs, mb), flush=True)
        differ, total = _differ(out / "harness", out / "msprobe")
        print(f"  rows whose CSV cells differ: {differ} of {total} (header included)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs=2, type=Path, metavar=("BASE", "HEAD"), help="two on-dump trees")
    ap.add_argument("--sizes", default="", help="generated dump.json sizes per side, comma-separated (16MB,256MB)")
    ap.add_argument("--msprobe-max", default="16MB", help="run msprobe too up to this size per side (its RSS grows "
                    "~40x the dump: 731 MB on 16.9 MB)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=5, help="the harness's compare this many times (default 5)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        engine, *paths = args.child
        _child(engine, *(Path(p) for p in paths))
        return 0
    limit = TypeAdapter(ByteSize).validate_python(args.msprobe_max)
    out = Path(tempfile.mkdtemp(prefix="numerics-bench-"))
    try:
        if args.trees:
            base, head = args.trees
            _compare(f"{head} against {base}", base, head, out / "trees", msprobe=True, repeat=args.repeat)
        for text in filter(None, args.sizes.split(",")):
            size = TypeAdapter(ByteSize).validate_python(text)
            base, head = _pair(out / text, size)
            _compare(
                f"generated {text} a side", base, head, out / text / "out", msprobe=size <= limit, repeat=args.repeat
            )
            shutil.rmtree(out / text)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
