"""The overhead bisect (``harness bisect --check overhead``) on a test repository of verl with one real slowdown.

Not a test: each probe is a whole comparison of trainings (minutes). The repository is tests/verl_repo.py's nightly
one: a linear first-parent history of ``--commits`` commits, the first the installed release, one of them
(``--step-at``) making the profiler's start wait before each stage's dump (a slowdown that waits, in every profiled
stage), the others a comment each. Each round bisects the whole range and prints which commit it named (or the
range it narrowed to), how many probes it took, their runs a side and its wall time.

    .venv/bin/python benchmarks/bisect_overhead.py --out B --rounds 5 [--commits 8 --step-at 5 --wait 0.04]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "tiny_fsdp_l1.yaml"
PROBE = re.compile(r"^probe (\d+): ([0-9a-f]{12}) ")
RUN = re.compile(r": (base|head) run (\d+) of ")


def one_round(repo: Path, shas: list[str], results: Path, max_repeats: int | None) -> dict[str, object]:
    argv = [sys.executable, "-m", "harness", "bisect", str(SCENARIO), "--verl-repo", str(repo), "--good", shas[0],
            "--bad", shas[-1], "--check", "overhead", "--results", str(results)]  # fmt: skip
    if max_repeats:
        argv += ["--max-repeats", str(max_repeats)]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    lines = (proc.stdout + proc.stderr).splitlines()
    results.mkdir(parents=True, exist_ok=True)
    (results / "bisect.log").write_text("\n".join(lines) + "\n")
    probed = [m[2] for line in lines if (m := PROBE.match(line))]
    runs = sum(1 for line in lines if RUN.search(line))
    named = next((line.split()[3] for line in lines if line.startswith("first bad commit: ")), None)
    return {
        "exit": proc.returncode,
        "named": named[:12] if named else None,
        "position": shas.index(next(s for s in shas if s.startswith(named[:12]))) + 1 if named else None,
        "probes": probed,
        "runs": runs,
        "wall_s": round(time.monotonic() - started, 1),
        "last": lines[-1] if lines else "",
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--commits", type=int, default=8)
    p.add_argument("--step-at", type=int, default=5)
    p.add_argument(
        "--wait",
        type=float,
        default=0.04,
        help="the slowdown's back-off before each stage's dump, s (0.04: ~+15 %% of the profiled step)",
    )
    p.add_argument("--max-repeats", type=int, help="runs a side a probe may take (default: compare's)")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from verl_repo import make_nightly_repo

    a.out.mkdir(parents=True, exist_ok=False)
    shas = make_nightly_repo(a.out / "verl", a.commits, a.step_at, a.wait)
    print(f"{a.commits} commits, the slowdown ({a.wait} s) at {a.step_at}: {shas[a.step_at - 1][:12]}", flush=True)
    for r in range(1, a.rounds + 1):
        rec = one_round(a.out / "verl", shas, a.out / f"round{r}", a.max_repeats) | {"round": r}
        with (a.out / "rounds.jsonl").open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
