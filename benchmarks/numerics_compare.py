"""Time and peak memory of the numerics comparison (msprobe compare, -da where a stage diverges) per MB of dump.

Not a test: run by hand. Two modes, each comparison in a fresh child process (``harness.gate.numerics``), so the
peak RSS printed (msprobe's process and the workers it forks) is that comparison's own:

    # two "on" dump trees, e.g. two runs of the largest scenario that runs here (real_fsdp_l1, 2 ranks)
    .venv/bin/python benchmarks/numerics_compare.py --trees BASE/on/dumps HEAD/on/dumps
    # generated msprobe-format dumps (benchmarks/dump_readers.py), identical and with one value moved (-da runs)
    .venv/bin/python benchmarks/numerics_compare.py --sizes 16MB,64MB

The first job of a child pays for importing msprobe and torch; the per-stage seconds after it are msprobe's own.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from dump_readers import STAGE, write_dump
from pydantic import ByteSize, TypeAdapter

from harness.gate.numerics import compare_trees

NARROW = [r"^Tensor\.narrow\.\d+\.(forward|backward)$"]


def _report(title: str, pairs: dict[tuple[str, str], tuple[Path, Path]], out: Path) -> None:
    nums, seconds, peak = compare_trees(pairs, out, NARROW, sys.executable)
    print(f"== {title}: {seconds:.1f}s wall in one child, peak RSS {peak / 2**20:.0f} MiB")
    for num in nums.values():
        for s in num.stages:
            mb = sum(Path(c).stat().st_size for c in s.csvs) / 1e6
            print(f"  {num.label:<22} {s.line()[:150]}")
            print(f"  {'':<22} {s.seconds:.2f}s msprobe for this pair, CSV {mb:.1f} MB")
        print(f"  {num.label:<22} {num.dump_bytes / 1e6:.1f} MB of dump.json (both sides), {num.rows} rows")


def _generated(root: Path, size: int) -> tuple[Path, Path, Path, Path]:
    """A tiny warm-up pair and a pair of ``size`` bytes whose head moves one Max (so -da runs too)."""
    trees = []
    for name, n in (("warm_base", 4096), ("warm_head", 4096), ("base", size), ("head", size)):
        rank = root / name / "step_2" / STAGE / "step0" / "rank0"
        write_dump(rank / "dump.json", n)
        for extra in ("stack.json", "construct.json"):
            (rank / extra).write_text("{}")
        trees.append(root / name)
    head = trees[3] / "step_2" / STAGE / "step0" / "rank0" / "dump.json"
    text = head.read_text()
    output = text.index('"output"')  # an output's Max and Norm: what msprobe's summary compare judges
    for key in ('"Max": ', '"Norm": '):
        at = text.index(key, output) + len(key)
        text = text[:at] + "1000.0" + text[text.index(",", at) :]
    head.write_text(text)
    return trees[0], trees[1], trees[2], trees[3]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", nargs=2, type=Path, metavar=("BASE", "HEAD"), help="two on-dump trees")
    ap.add_argument("--sizes", default="", help="generated dump.json sizes, comma-separated (e.g. 16MB,64MB)")
    args = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="numerics-bench-"))
    try:
        if args.trees:
            base, head = args.trees
            _report(f"{head} against {base}", {("head", "base"): (head, base)}, out / "trees")
        for text in filter(None, args.sizes.split(",")):
            size = TypeAdapter(ByteSize).validate_python(text)
            wb, wh, b, h = _generated(out / text, size)
            pairs = {("warm", "up"): (wh, wb), ("same", "base"): (b, b), ("moved", "base"): (h, b)}
            _report(f"generated {text} dump.json", pairs, out / text / "out")
            shutil.rmtree(out / text)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
