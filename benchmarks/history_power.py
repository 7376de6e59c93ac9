"""The history's change-point decision (``history check``, its shipped settings) judged on real nights.

Not a test: a night is one off + on pair of tiny_fsdp_l1 (~45-75 s on 2 cores), the pool is recorded in batches
hours apart, and the real series takes a night per commit.

    # 1. the pool, in batches hours apart: rounds of (quiet, +15 % computing, quiet, +15 % waiting) nights, one run each
    flock /tmp/heavy.lock .venv/bin/python benchmarks/history_power.py record --pool P --batch b1 --rounds 7
    # 2. synthetic series, whole nights drawn from the pool, each night a verl commit of its own; what
    #    `history check` says night after night (its exit code, through the product's own judge)
    .venv/bin/python benchmarks/history_power.py series --pool P [--seed 1]
    # 3. one series of real nights, one run a night, a verl commit a night in a test repository, a real waiting step
    flock /tmp/heavy.lock .venv/bin/python benchmarks/history_power.py real --out R --nights 12 --step-at 8
    # 4. verl's own history: its last 15 first-parent commits up to main, oldest first, a run a night
    .venv/bin/python benchmarks/history_power.py verl --out V --verl-repo /path/to/verl --nights 15

Series (``series``): whole nights drawn from the pool (each at most once in a series while the pool lasts), each
night's identity rewritten: a date and a verl commit (a made-up sha, 3 first-parent commits a night) of its own, the
pool night's sources made distinct (a drawn night is appended as a night of its own):
- ``computing`` / ``waiting``: ``--series`` series each, nights 1..K-1 drawn from the quiet pool, nights K.. from the
  kind's (+15 % of each profiled stage: CPU burned, or slept); flagged = the first exit 1, counted within 3 nights
  (K, K+1, K+2), and any exit 1 before K is a false alarm;
- ``quiet``: ``--series`` series of ``--quiet-nights`` quiet nights: every exit 1, and every finding of REGRESSED,
  is a false alarm (per night and overhead metric);
- ``cpu change``: quiet nights whose second half ran on another CPU model (the identity's processor changed, and its
  figures scaled by x1.2: the other machine's ratios): never blamed on verl.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from harness.history.detect import CONFIDENCE, CONFIRM_NIGHTS, MAX_PVALUE, Settings
from harness.history.night import night_of
from harness.history.store import History, Night, ScenarioRun, add
from harness.history.verdict import check_history
from harness.training.workloads.fault_injection import KNOBS, SLOWDOWN_ENV, WAIT_ENV

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "tiny_fsdp_l1.yaml"
STEP_PCT = 15
# each kind of night: the test knob its on run gets (None: quiet)
KINDS: dict[str, str | None] = {"quiet": None, "computing": SLOWDOWN_ENV, "waiting": WAIT_ENV}
ROUND = ("quiet", "computing", "quiet", "waiting")


def run_night(results: Path, kind: str, verl: str | None = None) -> dict[str, object]:
    """One night: ``harness run`` of the scenario into ``results`` (timing recorded, not gated), the kind's knob in
    its environment."""
    env = {k: v for k, v in os.environ.items() if k not in KNOBS}
    if knob := KINDS[kind]:
        env[knob] = str(STEP_PCT)
    argv = [sys.executable, "-m", "harness", "run", str(SCENARIO), "--results", str(results), "--timing", "record"]
    if verl:
        argv += ["--verl", verl]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    return {
        "dir": str(results),
        "kind": kind,
        "exit": proc.returncode,
        "wall_s": round(time.monotonic() - started, 1),
        "at": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load": os.getloadavg()[0],
    }


def record(pool: Path, batch: str, rounds: int) -> None:
    """``rounds`` rounds of ROUND into ``pool/<batch>/``; one line per night in ``pool/index.jsonl``."""
    out = pool / batch
    out.mkdir(parents=True, exist_ok=False)
    for i in range(rounds):
        for j, kind in enumerate(ROUND):
            line = run_night(out / f"{i:02d}-{j}-{kind}", kind) | {"batch": batch}
            with (pool / "index.jsonl").open("a") as f:
                f.write(json.dumps(line) + "\n")
            print(json.dumps(line), flush=True)


def pool_nights(pool: Path) -> dict[str, list[Night]]:
    """The pool's nights by kind (every night that ran: exit 0 of ``harness run`` with timing recorded)."""
    out: dict[str, list[Night]] = {k: [] for k in KINDS}
    for line in (pool / "index.jsonl").read_text().splitlines():
        rec = json.loads(line)
        if rec["exit"] == 0:
            out[rec["kind"]].append(night_of(Path(rec["dir"]), "2026-01-01", "pool"))
    return out


def synthetic(night: Night, i: int, tag: str, processor: str | None = None, scale: float = 1.0) -> Night:
    """``night`` as night ``i`` of a series: a date, a verl commit and sources of its own; on another processor
    with its ratios scaled by ``scale`` where asked."""
    day = datetime.date(2026, 1, 1) + datetime.timedelta(days=i)
    sha = hashlib.sha1(f"{tag}/{i}".encode()).hexdigest()
    ident = night.identity.model_copy(
        update={"date": day.isoformat(), "verl_commit": sha, "verl_position": 1000 + 3 * i, "runner": "bench"}
        | ({"processor": processor} if processor else {})
    )

    def run(r: ScenarioRun) -> ScenarioRun:
        figures = {m: v * scale if m.startswith("overhead.") else v for m, v in r.figures.items()}
        samples = {m: {k: v * scale for k, v in s.items()} for m, s in r.samples.items()}
        return r.model_copy(update={"source": f"{r.source}/{tag}/{i}", "figures": figures, "samples": samples})

    scenarios = {k: [run(r) for r in v] for k, v in night.scenarios.items()}
    return night.model_copy(update={"identity": ident, "id": ident.night_id(), "scenarios": scenarios})


def draw(rng: random.Random, pool: list[Night], k: int) -> list[Night]:
    """``k`` nights of ``pool``, each at most once while the pool lasts: a night drawn twice would make two nights of
    exactly the same figures, a series no runner makes (a segment of them has no spread, and Student's t calls any
    step beside it significant)."""
    return rng.sample(pool, k) if k <= len(pool) else rng.choices(pool, k=k)


def replay(nights: list[Night], settings: Settings) -> list[tuple[int, list[str]]]:
    """Append the nights one by one and check after each: per night, the exit code and the findings' lines."""
    history = History()
    out = []
    for night in nights:
        history, _ = add(history, night)
        v = check_history(history, settings)
        out.append((v.exit_code, [f.line for f in v.findings if f.status != "ok"]))
    return out


def series(
    pool: Path, n_series: int, step_at: int, after: int, quiet_nights: int, seed: int, settings: Settings
) -> None:
    rng = random.Random(seed)
    print(settings.text())
    nights = pool_nights(pool)
    print("pool:", {k: len(v) for k, v in nights.items()})
    for kind in ("computing", "waiting"):
        lag: Counter[str] = Counter()
        early = 0
        for j in range(n_series):
            drawn = draw(rng, nights["quiet"], step_at - 1) + draw(rng, nights[kind], after)
            result = replay([synthetic(n, i, f"{kind}{j}") for i, n in enumerate(drawn, 1)], settings)
            codes = [c for c, _ in result]
            early += any(c == 1 for c in codes[: step_at - 1])
            first = next((i for i, c in enumerate(codes, 1) if c == 1 and i >= step_at), None)
            lag[f"+{first - step_at}" if first else "never"] += 1
            flagged = sorted({_metric(line) for line in result[first - 1][1]} if first else set())
            print(f"{kind} series {j}: exit codes by night {''.join(map(str, codes))}; first exit 1 at night {first} "
                  f"{flagged}")  # fmt: skip
        within = sum(lag[f"+{d}"] for d in range(3))
        print(f"{kind}: flagged (exit 1) within 3 nights of the step (nights {step_at}-{step_at + 2}) in {within} of "
              f"{n_series}; first exit 1 at {dict(sorted(lag.items()))}; series with an exit 1 before the step: "
              f"{early}")  # fmt: skip
    exits: Counter[int] = Counter()
    regressed: Counter[str] = Counter()
    metrics: set[str] = set()
    for j in range(n_series):
        drawn = draw(rng, nights["quiet"], quiet_nights)
        result = replay([synthetic(n, i, f"quiet{j}") for i, n in enumerate(drawn, 1)], settings)
        metrics |= {m for n in drawn for r in n.scenarios["tiny_fsdp_l1"] for m in r.tolerances}
        exits.update(c for c, _ in result)
        regressed.update(_metric(line) for _, lines in result for line in lines if line.startswith("REGRESSED"))
        print(f"quiet series {j}: exit codes by night {''.join(str(c) for c, _ in result)}")
    print(f"quiet: {n_series} series x {quiet_nights} nights x {len(metrics)} overhead metrics: exit codes "
          f"{dict(sorted(exits.items()))}; REGRESSED (night x metric): {dict(regressed) or 0}")  # fmt: skip
    for j in range(max(1, n_series // 5)):
        drawn = draw(rng, nights["quiet"], quiet_nights)
        half = quiet_nights // 2
        made = [synthetic(n, i, f"cpu{j}", *(("Other CPU model", 1.2) if i > half else (None, 1.0)))
                for i, n in enumerate(drawn, 1)]  # fmt: skip
        result = replay(made, settings)
        last = check_history(_history(made), settings)
        blamed = [f.line for f in last.findings if f.status != "ok"]
        print(f"cpu change series {j} (another CPU model from night {half + 1}, its ratios x1.2): exit codes by night "
              f"{''.join(str(c) for c, _ in result)}; at the end: {last.total} series, {last.word}; not ok: "
              f"{blamed or 'none'}")  # fmt: skip


def noise(pool: Path, spreads: list[float], n_series: int, step_at: int, settings: Settings, seed: int) -> None:
    """What night-to-night spread the settings need (a simulation, not a measurement): a pool night's figures
    replaced by a level times a Gaussian offset of ``spread`` (in logs, the same offset for every figure of the
    night, its samples kept around it), +15 % from night ``step_at``; flagged within 3 nights, and exit 1 over
    quiet series of 30 nights."""
    rng = random.Random(seed)
    template = pool_nights(pool)["quiet"][0]
    print(settings.text())

    def made(i: int, tag: str, spread: float, factor: float) -> Night:
        offset = factor * math.exp(rng.gauss(0, spread))
        n = synthetic(template, i, tag)
        runs = [
            r.model_copy(
                update={
                    "figures": {m: v * offset if m in r.tolerances else v for m, v in r.figures.items()},
                    "samples": {m: {k: v * offset for k, v in x.items()} for m, x in r.samples.items()},
                }
            )
            for r in n.scenarios["tiny_fsdp_l1"]
        ]
        return n.model_copy(update={"scenarios": {"tiny_fsdp_l1": runs}})

    for spread in spreads:
        within = 0
        for j in range(n_series):
            nights = [made(i, f"n{spread}/{j}", spread, 1.15 if i >= step_at else 1.0) for i in range(1, step_at + 3)]
            codes = [c for c, _ in replay(nights, settings)]
            within += 1 in codes[step_at - 1 :]
        quiet: Counter[int] = Counter()
        for j in range(n_series):
            nights = [made(i, f"q{spread}/{j}", spread, 1.0) for i in range(1, 31)]
            quiet.update(c for c, _ in replay(nights, settings))
        print(f"night-to-night spread {spread:.1%}: +15 % flagged within 3 nights in {within} of {n_series}; "
              f"{n_series} quiet series of 30 nights: exit codes {dict(sorted(quiet.items()))}")  # fmt: skip


def _metric(line: str) -> str:
    """The figure a finding's line names (``REGRESSED: tiny_fsdp_l1 overhead.wall.profiled (...)``)."""
    return line.split(": ", 1)[1].split(" ")[1]


def _history(nights: list[Night]) -> History:
    history = History()
    for night in nights:
        history, _ = add(history, night)
    return history


def real(out: Path, nights: int, step_at: int) -> None:
    """``nights`` real nights, one run each, verl's commit of that night from a test repository (the waiting step from
    ``step_at`` on); then ``replay``."""
    sys.path.insert(0, str(ROOT / "tests"))
    from verl_repo import make_nightly_repo

    out.mkdir(parents=True, exist_ok=False)
    _nights(out, out / "verl", make_nightly_repo(out / "verl", nights, step_at))


def verl_nights(out: Path, repo: Path, ref: str, nights: int) -> None:
    """verl's own history as nights: the last ``nights`` first-parent commits of ``repo`` up to ``ref`` (a clone of
    verl-project/verl), oldest first, one quiet run each; then ``replay``."""
    argv = ["git", "-C", str(repo), "rev-list", "--first-parent", f"--max-count={nights}", ref]
    shas = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()[::-1]
    out.mkdir(parents=True, exist_ok=False)
    _nights(out, repo, shas)


def _nights(out: Path, repo: Path, shas: list[str]) -> None:
    for i, sha in enumerate(shas, 1):
        rec = run_night(out / f"night{i:02d}", "quiet", f"{repo}@{sha}") | {"night": i, "sha": sha}
        with (out / "real.jsonl").open("a") as f:
            f.write(json.dumps(rec) + "\n")
        print(json.dumps(rec), flush=True)
    replay_real(out)


def replay_real(out: Path) -> None:
    """The real nights appended one by one to a new history with ``harness history append`` (the repository gives
    each commit's first-parent position), and ``harness history check`` after each: what a nightly would have said."""
    history = out / "history.json"
    history.unlink(missing_ok=True)
    for line in (out / "real.jsonl").read_text().splitlines():
        rec = json.loads(line)
        day = (datetime.date(2026, 12, 1) + datetime.timedelta(days=rec["night"])).isoformat()
        append = _harness("history", "append", str(history), rec["dir"], "--date", day, "--runner", "bench")
        check = _harness("history", "check", str(history))
        print(f"night {rec['night']} ({rec['sha'][:12]}): append exit {append['exit']}, check exit {check['exit']}")
        for text in str(check["out"]).splitlines()[1:]:
            print("   ", text)


def _harness(*args: str) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True)
    return {"exit": proc.returncode, "out": proc.stdout + proc.stderr}


def _settings(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-pvalue", type=float, default=MAX_PVALUE, help="instead of the shipped setting")
    p.add_argument("--confirm-nights", type=int, default=CONFIRM_NIGHTS, help="instead of the shipped setting")
    p.add_argument("--confidence", type=float, default=CONFIDENCE, help="instead of the shipped setting")


def _chosen(a: argparse.Namespace) -> Settings:
    return Settings(max_pvalue=a.max_pvalue, confirm_nights=a.confirm_nights, confidence=a.confidence)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("record", help="one batch of the pool")
    r.add_argument("--pool", type=Path, required=True)
    r.add_argument("--batch", required=True)
    r.add_argument("--rounds", type=int, default=7)
    r = sub.add_parser("series", help="synthetic series resampled from the pool, checked night after night")
    r.add_argument("--pool", type=Path, required=True)
    r.add_argument("--series", type=int, default=10)
    r.add_argument("--step-at", type=int, default=10)
    r.add_argument("--after", type=int, default=4, help="nights after the step, the step's own included")
    r.add_argument("--quiet-nights", type=int, default=30)
    r.add_argument("--seed", type=int, default=1)
    _settings(r)
    r = sub.add_parser("noise", help="a simulation: the night-to-night spread the settings need")
    r.add_argument("--pool", type=Path, required=True, help="one quiet night of it is the template")
    r.add_argument("--spread", type=float, action="append", required=True, help="in logs (0.05: about 5 %%)")
    r.add_argument("--series", type=int, default=10)
    r.add_argument("--step-at", type=int, default=10)
    r.add_argument("--seed", type=int, default=1)
    _settings(r)
    r = sub.add_parser("real", help="one series of real nights with a real waiting step")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--replay", action="store_true", help="only check the nights recorded in --out again")
    r.add_argument("--nights", type=int, default=12)
    r.add_argument("--step-at", type=int, default=8)
    r = sub.add_parser("verl", help="verl's own first-parent history as nights, one run a night")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--verl-repo", type=Path, required=True, help="a clone of verl-project/verl")
    r.add_argument("--ref", default="main")
    r.add_argument("--nights", type=int, default=15)
    a = p.parse_args()
    if a.cmd == "record":
        record(a.pool, a.batch, a.rounds)
    elif a.cmd == "series":
        series(a.pool, a.series, a.step_at, a.after, a.quiet_nights, a.seed, _chosen(a))
    elif a.cmd == "noise":
        noise(a.pool, a.spread, a.series, a.step_at, _chosen(a), a.seed)
    elif a.cmd == "verl":
        verl_nights(a.out, a.verl_repo, a.ref, a.nights)
    elif a.replay:
        replay_real(a.out)
    else:
        real(a.out, a.nights, a.step_at)


if __name__ == "__main__":
    main()
