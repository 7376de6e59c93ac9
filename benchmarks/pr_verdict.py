"""Time to a verl pull request's CPU verdict: ``.ci/cpu-gate pr`` base against head, phase by phase.

Not a test: each case is the CPU gate's whole job (minutes). The pull requests are commits of the test repository
(tests/verl_repo.py) on verl 0.9.1: ``neutral`` (an unchanged head: a comment), ``bad`` (a stage stops dumping),
``annotation`` (a typo in the engine workers' annotation), ``bloat`` (msprobe's level forced to mix), ``wait`` (the
profiler's start sleeps 0.25 s a stage; ``wait_short`` 0.11 s, ~+30 %), ``gc`` (it collects garbage before each
stage: a few per cent in the embedded workload, whose start-up objects are frozen) and ``profile`` (cProfile on in
each dumped stage: CPU time; ``profile_actor`` in the actor's stages only).
Each runs the job as a workflow does, from this checkout (warm: .venv and the targets' environments as they are) or
from a fresh clone with an empty harness cache (``--cold``: .ci/setup makes the venv from pip's configured indexes,
as .ci/run does, a mirror where the lock's indexes are unreachable, then .ci/setup --locked; every target environment
and asset is made again). Phases, from the job's own lines (timestamped as they arrive) and its results: set-up
(.ci/setup --locked), the environment of each side, then per scenario its runs' start-up (outside the steps, off and
on), steps, the rest of each run (launching, checks), numerics, and the reports (after the last numerics to the job's
end).

    .venv/bin/python benchmarks/pr_verdict.py run --out /tmp/prv --cases neutral,bad   # warm, appends results.jsonl
    .venv/bin/python benchmarks/pr_verdict.py run --out /tmp/prv --cases neutral --cold
    .venv/bin/python benchmarks/pr_verdict.py table --out /tmp/prv                      # the markdown table
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from verl_repo import make_verl_repo  # noqa: E402  # the test repository's commits are the pull requests

CASES = ("neutral", "bad", "annotation", "bloat", "wait", "wait_short", "gc", "profile", "profile_actor")
RUN = re.compile(r"^(?P<scenario>\S+): (?P<side>base|head) run (?P<i>\d+) of ")
NUMERICS = re.compile(r"^(?P<scenario>\S+): numerics \(statistics compare\)$")
ENV = re.compile(r"^(?P<side>base|head): .*, (?P<s>[0-9.]+)s\)$")  # TargetEnv.label(): made or reused, in seconds
VERDICT = re.compile(r"^compare: .* -> (?P<verdict>[A-Z ]+)$")


def timed(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[int, list[tuple[float, str]], float]:
    """Run ``argv``, stdout and stderr merged, each line stamped (seconds from the start) as it arrives."""
    started = time.monotonic()
    lines: list[tuple[float, str]] = []
    with (
        log.open("w") as out,
        subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc,
    ):
        assert proc.stdout is not None
        for line in proc.stdout:
            t = time.monotonic() - started
            lines.append((t, line.rstrip("\n")))
            out.write(f"{t:8.1f} {line}")
    return proc.returncode, lines, time.monotonic() - started


def _run_figures(results: Path, scenario: str, side: str, i: int) -> dict[str, float]:
    """One run's wall, start-up and steps, off and on together, from its run.json and results.json."""
    sdir = results / side / f"r{i}" / scenario
    out = {"wall": 0.0, "startup": 0.0}
    for mode in ("off", "on"):
        if (record := sdir / mode / "run.json").is_file():
            out["wall"] += float(json.loads(record.read_text())["result"]["wall_s"])
    if (res := sdir / "results.json").is_file():
        figures = json.loads(res.read_text())["checks"].get("overhead", {}).get("figures", {})
        out["startup"] = sum(float(figures.get(f"time_{m}.outside_steps_s", 0.0)) for m in ("off", "on"))
    out["steps"] = out["wall"] - out["startup"]
    return out


def phases(lines: list[tuple[float, str]], total: float, results: Path) -> dict[str, Any]:
    """Each phase's seconds from the job's stamped lines and its results dir."""
    env: dict[str, float] = {}
    marks: list[tuple[float, str, str, int]] = []  # (time, kind, scenario, run index)
    verdict = ""
    for t, line in lines:
        if m := ENV.match(line):
            env[m["side"]] = float(m["s"])
        elif m := RUN.match(line):
            marks.append((t, m["side"], m["scenario"], int(m["i"]) - 1))
        elif m := NUMERICS.match(line):
            marks.append((t, "numerics", m["scenario"], 0))
        elif m := VERDICT.match(line):
            verdict = m["verdict"].strip()
    first = marks[0][0] if marks else total
    scenarios: dict[str, dict[str, float]] = {}
    reports_from = first
    for n, (t, kind, scenario, i) in enumerate(marks):
        end = marks[n + 1][0] if n + 1 < len(marks) else None
        s = scenarios.setdefault(scenario, {"runs": 0, "startup": 0.0, "steps": 0.0, "rest": 0.0, "numerics": 0.0})
        if kind == "numerics":
            ends = next((tt for tt, line in lines if tt > t), total) if end is None else end
            s["numerics"] += ends - t
            reports_from = ends
            continue
        took = (end if end is not None else total) - t
        fig = _run_figures(results, scenario, kind, i)
        s["runs"] += 1
        s["startup"] += fig["startup"]
        s["steps"] += fig["steps"]
        s["rest"] += took - fig["wall"]
        reports_from = end if end is not None else total
    return {
        "env_base_s": env.get("base"), "env_head_s": env.get("head"), "before_runs_s": first,
        "scenarios": scenarios, "reports_s": total - reports_from, "verdict": verdict,
    }  # fmt: skip


def run_case(
    case: str, repo: Path, checkout: Path, cache: Path | None, out: Path, scenarios: list[str], cold: bool
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESS_", "GITHUB_"))}
    env |= {"PYTHONUNBUFFERED": "1", "RESULTS": str(out / case / "results")}
    if cache is not None:
        env["HARNESS_CACHE_DIR"] = str(cache)
    shutil.rmtree(out / case, ignore_errors=True)
    (out / case).mkdir(parents=True)
    setup_rc, _, setup_s = 0, [], 0.0
    if cold:  # pip's configured indexes first: a mirror, where the lock's indexes are unreachable
        setup_rc, _, setup_s = timed(["bash", ".ci/setup"], checkout, env, out / case / "setup-mirror.log")
    locked_rc, _, locked_s = timed(["bash", ".ci/setup", "--locked"], checkout, env, out / case / "setup.log")
    setup_rc, setup_s = setup_rc or locked_rc, setup_s + locked_s
    argv = ["bash", ".ci/cpu-gate", "pr", f"{repo}@v0.9.1", f"{repo}@{case}", *scenarios]
    rc, lines, total = timed(argv, checkout, env, out / case / "job.log")
    row = {"case": case, "cold": cold, "setup_s": setup_s, "setup_rc": setup_rc, "exit": rc,
           "job_s": total, "total_s": setup_s + total, "scenarios_given": scenarios,
           "findings": [line for _, line in lines if line.startswith(("REGRESSED ", "MISSING ", "ERROR "))],
           **phases(lines, total, out / case / "results")}  # fmt: skip
    with (out / "results.jsonl").open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"{case}: exit {rc}, {row['verdict'] or 'no verdict'}, {row['total_s']:.0f} s", flush=True)


def table(out: Path) -> str:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    head = ("| case | caches | set-up | env base / head | scenario: runs, start-up, steps, rest, numerics | reports "
            "| total | verdict (exit) |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    body = []
    for r in rows:
        per = "<br>".join(
            f"{name}: {s['runs']:.0f} runs, {s['startup']:.0f} + {s['steps']:.0f} + {s['rest']:.0f} s, "
            f"numerics {s['numerics']:.0f} s"
            for name, s in r["scenarios"].items()
        )
        env = f"{r['env_base_s'] or 0:.0f} / {r['env_head_s'] or 0:.0f} s"
        body.append(f"| {r['case']} | {'cold' if r['cold'] else 'warm'} | {r['setup_s']:.0f} s | {env} | {per} | "
                    f"{r['reports_s']:.0f} s | {r['total_s']:.0f} s ({r['total_s'] / 60:.1f} min) | "
                    f"{r['verdict'] or '-'} ({r['exit']}) |")  # fmt: skip
    findings = [f"- {r['case']}: {f}" for r in rows for f in r["findings"]]
    return "\n".join([head, *body, "", *findings]) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run")
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    run.add_argument("--cold", action="store_true", help="a fresh clone of this checkout, an empty harness cache")
    run.add_argument("scenarios", nargs="*", help="scenario files (default: the CPU gate's default set)")
    tab = sub.add_parser("table")
    tab.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    out = args.out.resolve()
    if args.cmd == "table":
        print(table(out), end="")
        return 0
    cases = args.cases.split(",")
    if bad := [c for c in cases if c not in CASES]:
        ap.error(f"unknown cases {bad}: of {', '.join(CASES)}")
    repo = out / "verl"
    branches = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                              capture_output=True, text=True).stdout.split() if repo.is_dir() else []  # fmt: skip
    if not set(cases) <= set(branches):  # none yet, or made before a case was added to the test repository
        shutil.rmtree(repo, ignore_errors=True)
        make_verl_repo(repo)
    checkout, cache = ROOT, None
    if args.cold:
        checkout, cache = out / "cold" / "clone", out / "cold" / "cache"
        shutil.rmtree(out / "cold", ignore_errors=True)
        subprocess.run(["git", "clone", "-q", str(ROOT), str(checkout)], check=True)
        cache.mkdir(parents=True)
    given = [str(Path(s).resolve()) for s in args.scenarios]
    for n, case in enumerate(cases):  # with --cold, the first case makes the venv and environments; the rest reuse them
        run_case(case, repo, checkout, cache, out, given, args.cold and n == 0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
