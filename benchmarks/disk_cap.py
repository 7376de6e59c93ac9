"""The dump cap under a burst: the runaway scenario (msprobe's tensor task, five profiled steps, a 1 MB budget: cap
2 MB) run N times through `harness run`, and the tree each run left against the cap. By hand, on a quiet machine:

    .venv/bin/python benchmarks/disk_cap.py              # 10 runs at the scenario's own write rate
    .venv/bin/python benchmarks/disk_cap.py --rate 4     # its sequences 4x as long: about 4x the bytes a second

First one run without a cap (a 1 GB budget) measures the write rate: the on run's dump bytes over its five profiled
steps' time (verl's timing_s/step). Then each capped run prints how the cap was held (`dump cap ... held: ...` on a
size-bounded tmpfs, or `... polled, not held: ...`), the tree it left and its overshoot past the cap, and the
monitor's line; the last line gives the largest tree and overshoot over the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from builders import write_scenario  # noqa: E402
from test_long_runs import RUNAWAY  # noqa: E402

CAP = 2_000_000  # 2 x budgets.disk.max_total 1MB


def scenario(rate: int, uncapped: bool) -> dict[str, Any]:
    """The runaway scenario; ``rate`` 4: prompts and responses 4x as long (every activation tensor 4x the bytes)."""
    doc = {**RUNAWAY, "workload": dict(RUNAWAY["workload"])}
    if rate == 4:
        doc["workload"].update(prompt_length=64, response_length=64)
    elif rate != 1:
        raise SystemExit("--rate is 1 or 4")
    if uncapped:
        doc["budgets"] = {**doc["budgets"], "disk": {"max_total": "1GB", "max_per_step": None}}
    return doc


def harness_run(work: Path, name: str, doc: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], Path]:
    write_scenario(work, name=name, **doc)
    argv = [sys.executable, "-m", "harness", "run", str(work / "scenarios" / f"{name}.yaml"), "--results",
            str(work / "res"), "--timing", "record"]  # fmt: skip
    proc = subprocess.run(argv, cwd=work, capture_output=True, text=True, check=False, timeout=900)
    return proc, work / "res" / name / "on"


def tree_bytes(dumps: Path) -> int:
    return sum(p.stat().st_size for p in dumps.rglob("*") if p.is_file() and not p.is_symlink())


def write_rate(rate: int) -> str:
    with tempfile.TemporaryDirectory(prefix="disk-cap-") as tmp:
        _, on = harness_run(Path(tmp), "burst_uncapped", scenario(rate, uncapped=True))
        steps: dict[int, dict[str, Any]] = {}
        for line in (on / "metrics.jsonl").read_text().splitlines():
            rec = json.loads(line)
            steps.setdefault(rec["step"], {}).update(rec["data"])
        seconds = sum(steps[s]["timing_s/step"] for s in RUNAWAY["precision_debugger"]["steps"])
        total = tree_bytes(on / "dumps")
    return f"{total / seconds / 1e6:.1f} MB/s ({total / 1e6:.1f} MB in the 5 profiled steps' {seconds:.2f} s, uncapped)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rate", type=int, default=1, help="1: the scenario's write rate; 4: about 4x")
    args = parser.parse_args()
    print(f"write rate x{args.rate}: {write_rate(args.rate)}", flush=True)
    largest, how = 0, ""
    for n in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="disk-cap-") as tmp:
            proc, on = harness_run(Path(tmp), "burst", scenario(args.rate, uncapped=False))
            left = tree_bytes(on / "dumps")
            said = (proc.stdout + proc.stderr).replace(tmp, "$T")
            how = next((ln.split(": ", 1)[1] for ln in said.splitlines() if "burst on: dump cap" in ln), "?")
            stop = next((ln.strip() for ln in said.splitlines() if "disk: stopped the on run" in ln), "(not stopped)")
        largest = max(largest, left)
        print(f"run {n}: exit {proc.returncode}, left {left / 1e6:.2f} MB, overshoot {(left - CAP) / 1e6:+.2f} MB; "
              f"{stop[:200]}", flush=True)  # fmt: skip
    print(f"{how}\nlargest tree {largest / 1e6:.2f} MB of cap {CAP / 1e6:.2f} MB: largest overshoot "
          f"{(largest - CAP) / 1e6:+.2f} MB over {args.runs} runs at x{args.rate} the write rate")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
