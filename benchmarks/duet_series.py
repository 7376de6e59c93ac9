"""The nightly as a duet, end to end: a series of real nights through the nightly's scripts on a linear verl history.

Not a test: every night trains (its own run and the duet's pairs, minutes each). The verl history is
tests/verl_repo.py's nightly repository: ``--nights`` commits on one first-parent line, the first the installed
release, the one at ``--step-at`` a +15 % step of the profiled step's overhead (``--cause wait``: the profiler's start
backs off ``--step-s`` before each stage's dump; ``compute``: the same seconds of CPU, computed), the others a comment
each. Each night is what nightly-cpu.yml runs, here against a bare repository standing in for the history branch:

1. ``.ci/history fetch`` reads the history file (read only) from the branch;
2. ``.ci/cpu-gate nightly`` on that night's verl checkout (its own run, baseline, gate, report, and the duet against
   the last good night read from the history: DUET_HISTORY), the previous published baseline as PREVIOUS;
3. ``.ci/history night`` appends the night with its duet (FILE=RUNS:DUET), checks the history and pushes the branch.

Each night prints one JSON line (its verl commit, the nightly's exit, the duet's mode, verdict and head/base, the
history's exit, the minutes each step took, the duet's own minutes within the nightly) and appends it to
``OUT/series.jsonl``; ``--resume`` goes on from the nights already there. ``--night-scenarios all``: the nights after
the first run the nightly's whole set as nightly-cpu.yml does (night 1, no base, only the duet's scenario), so a night
reads what the duet adds to the whole night.

    .venv/bin/python benchmarks/duet_series.py --out S --nights 12 --step-at 7 --cause wait
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BRANCH = "precision-debugger-history"
FILE = "cpu.json"


def _run(argv: list[str], env: dict[str, str], log: Path) -> tuple[int, float]:
    started = time.monotonic()
    with log.open("w") as out:
        code = subprocess.run(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, check=False).returncode
    return code, round(time.monotonic() - started, 1)


def _git(*argv: str) -> str:
    return subprocess.run(["git", *argv], capture_output=True, text=True, check=True).stdout.strip()


def night(out: Path, repo: Path, bare: Path, i: int, sha: str, previous: Path | None, args: argparse.Namespace) -> dict:
    d = out / f"night{i:02d}"
    d.mkdir(parents=True, exist_ok=True)
    checkout = d / "verl"
    if not checkout.exists():
        _git("-C", str(repo), "worktree", "add", "-q", "--detach", str(checkout), sha)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    env |= {"PYTHON": sys.executable, "GITHUB_STEP_SUMMARY": str(d / "summary.md"), "HARNESS_TIMING": "record"}
    read = d / "nights.json"
    fetch, fetch_s = _run(["bash", ".ci/history", "fetch", str(bare), BRANCH, FILE, str(read)],
                          env | {"RESULTS": str(d / "read")}, d / "fetch.log")  # fmt: skip
    nightly_env = env | {"RESULTS": str(d / "nightly"), "DUET_HISTORY": str(read), "DUET_SCENARIOS": args.scenario,
                         "CPU_GATE_REPEATS": args.repeats}  # fmt: skip
    if previous is not None:
        nightly_env["PREVIOUS"] = str(previous)
    own = [args.scenario] if i == 1 or args.night_scenarios == "duet" else []  # []: the nightly's whole set
    code, nightly_s = _run(["bash", ".ci/cpu-gate", "nightly", str(checkout), "", *own], nightly_env,
                           d / "nightly.log")  # fmt: skip
    walls = [ln for ln in (d / "nightly.log").read_text(errors="replace").splitlines() if ln.startswith("wall ")]
    pair = f"{FILE}={d / 'nightly' / 'runs'}:{d / 'nightly' / 'duet'}"
    history_env = env | {"RESULTS": str(d / "history"), "VERL_REPO": str(repo)}
    history, history_s = _run(["bash", ".ci/history", "night", str(bare), BRANCH, pair], history_env, d / "history.log")
    doc = d / "nightly" / "duet" / "duet.json"
    duet = json.loads(doc.read_text()) if doc.exists() else {}
    runs = len(list((d / "nightly" / "duet").glob("*/r*")))
    check = d / "history" / "cpu-check.json"
    findings = json.loads(check.read_text())["findings"] if check.exists() else []
    return {
        "night": i,
        "sha": sha[:12],
        "fetch": fetch,
        "nightly_exit": code,
        "duet_mode": duet.get("mode"),
        "duet_exit": duet.get("exit_code"),
        "duet_verdict": duet.get("verdict"),
        "duet_line": (duet.get("lines") or [""])[0],
        "duet_runs": runs,
        "history_exit": history,
        "history_findings": [f["line"][:160] for f in findings if f["status"] != "ok"],
        "minutes": {
            "fetch": round(fetch_s / 60, 2),
            "nightly": round(nightly_s / 60, 2),
            "duet": round(float(walls[-1].split()[1].rstrip("s")) / 60, 2) if walls else None,
            "history": round(history_s / 60, 2),
        },
        "dir": str(d),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--nights", type=int, default=12)
    p.add_argument("--step-at", type=int, default=7)
    p.add_argument("--cause", choices=("wait", "compute"), default="wait")
    p.add_argument("--step-s", type=float, default=0.04, help="seconds before each stage's dump (0.04: ~+15 %%)")
    p.add_argument("--scenario", default="scenarios/tiny_fsdp_duet.yaml")
    p.add_argument("--night-scenarios", choices=("duet", "all"), default="duet",
                   help="the night's own runs after night 1: the duet's scenario alone, or the nightly's whole set "
                   "(what nightly-cpu.yml runs: a night's cost with and without its duet)")  # fmt: skip
    p.add_argument("--repeats", default="", help="compare's options for the duet (CPU_GATE_REPEATS)")
    p.add_argument("--resume", action="store_true")
    a = p.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from verl_repo import make_nightly_repo

    from harness.outcomes import publishes_baseline

    repo, bare, log = a.out / "verl", a.out / "history.git", a.out / "series.jsonl"
    if a.resume:
        shas = _git("-C", str(repo), "rev-list", "--first-parent", "--reverse", "main").split()
        done = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    else:
        a.out.mkdir(parents=True, exist_ok=False)
        shas = make_nightly_repo(repo, a.nights, a.step_at, a.step_s, a.cause)
        _git("init", "-q", "--bare", str(bare))
        done = []
    previous = None
    for i, sha in enumerate(shas, 1):
        rec = done[i - 1] if i <= len(done) else night(a.out, repo, bare, i, sha, previous, a)
        base = Path(rec["dir"]) / "nightly" / "baseline" / "baseline.json"
        # the next night's PREVIOUS: this night's baseline where the table publishes it (nightly-cpu.yml)
        previous = base if publishes_baseline(rec["nightly_exit"]) and base.exists() else previous
        if i <= len(done):
            continue
        with log.open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main()
