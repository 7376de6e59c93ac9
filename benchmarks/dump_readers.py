"""Throughput and peak memory of the dump.json readers (contents check, structure) on generated dumps.

Not a test: at full size it writes a 1 GB file and runs for minutes. Each reader runs in a fresh child
process so that its peak RSS (VmHWM) is its own; a child past ``--timeout`` is killed and reported
as ``> N s``, and an address-space cap keeps a reader that loads a whole file from taking the machine.

    .venv/bin/python benchmarks/dump_readers.py --sizes 16MB          # quick
    .venv/bin/python benchmarks/dump_readers.py                       # 16MB, 256MB, 1GB
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

STAGE = "actor_compute_log_prob"
DUMP_REL = f"on/dumps/step_2/{STAGE}/step0/rank0"
APIS = ("Functional.linear", "Functional.linear", "Functional.linear", "Torch.matmul", "Tensor.add")
BODIES = 512  # distinct entry bodies, reused with fresh call counters
NAN_EVERY = 97  # one body in this many has a NaN Max, written as msprobe writes it (a bare NaN literal)
SCENARIO = {
    "engine": "fsdp",
    "world_size": 1,
    "steps": 3,
    "workload": {"kind": "cpu_ppo"},
    "precision_debugger": {"task": "statistics", "level": "L1", "steps": [2], "stages": [STAGE]},
    "expect": {"required_patterns": {STAGE: [r"^Functional\.linear\.\d+\.forward$"]}},
    "budgets": {"overhead": {"max_profiled_ratio": 30, "max_unprofiled_ratio": 2}, "disk": {"max_total": "10GB"}},
}


def _tensor(r: random.Random, nan: bool) -> dict:
    mx = float("nan") if nan else r.uniform(0.5, 8)
    return {
        "type": "torch.Tensor",
        "dtype": "torch.bfloat16",
        "shape": [r.choice((1, 2, 4)), r.choice((512, 1024)), 896],
        "Max": mx,
        "Min": r.uniform(-8, -0.5),
        "Mean": r.uniform(-0.01, 0.01),
        "Norm": r.uniform(10, 900),
        "requires_grad": r.random() < 0.5,
    }


def _bodies(seed: int = 0) -> list[str]:
    """Entry values as json.dump(indent=1) lays them out two levels deep (msprobe's save_json)."""
    r = random.Random(seed)
    out = []
    for i in range(BODIES):
        nan = i % NAN_EVERY == 1
        entry = {
            "input_args": [_tensor(r, nan), _tensor(r, False)],
            "input_kwargs": {},
            "output": [_tensor(r, False)],
        }
        out.append(json.dumps(entry, indent=1).replace("\n", "\n  "))
    return out


def write_dump(path: Path, size: int) -> int:
    """A msprobe-format dump.json of about ``size`` bytes; returns its entry count."""
    bodies, n = _bodies(), 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        f.write('{\n "task": "statistics",\n "level": "L1",\n "framework": "pytorch",\n')
        f.write(' "dump_data_dir": null,\n "data": {')
        while f.tell() < size:
            sep = "," if n else ""
            f.write(f'{sep}\n  "{APIS[n % len(APIS)]}.{n}.forward": {bodies[n % BODIES]}')
            n += 1
        f.write("\n }\n}")
    return n


def child(reader: str, root: Path) -> None:
    """Run one reader in this (fresh) process and print its own seconds."""
    from harness.artifacts.rundir import ScenarioDir
    from harness.checks import CHECKS, CheckContext
    from harness.gate.structure import structure_of
    from harness.scenario.loader import load_scenario

    scenario = load_scenario(root / "scenarios" / "bench.yaml")
    sdir = ScenarioDir(root / "results" / "bench")
    t, cpu = time.perf_counter(), time.process_time()
    if reader == "contents":
        res = CHECKS["contents"](CheckContext(scenario, sdir))
        what = res.summary
    else:
        what = f"{sum(v['entries'] for v in structure_of(sdir.run('on').dumps).values())} entries"
    seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu": cpu, "what": what, "rss_mb": peak_rss_mb()}))


def _cap_memory(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def peak_rss_mb(pid: int | str = "self") -> float:
    """VmHWM of a live process: reset at exec, unlike ru_maxrss, which keeps the forking parent's peak."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    return next((int(ln.split()[1]) / 1024 for ln in status.splitlines() if ln.startswith("VmHWM:")), 0.0)


def measure(reader: str, root: Path, timeout: float, mem_cap: int) -> dict:
    """Wall and CPU seconds (the child's own, imports excluded), peak RSS (MB) and outcome of one reader run."""
    cmd = [sys.executable, __file__, "--child", reader, str(root)]
    with subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=lambda: _cap_memory(mem_cap)
    ) as proc:
        start, rss = time.monotonic(), 0.0
        while proc.poll() is None:
            rss = max(rss, peak_rss_mb(proc.pid))
            if time.monotonic() - start > timeout:
                proc.kill()
                proc.wait()
                return {"seconds": None, "rss_mb": rss, "note": f"killed after {timeout:.0f} s"}
            time.sleep(0.05)
        out, err = proc.communicate()
    if proc.returncode:
        last = (err.decode().strip().splitlines() or ["?"])[-1]
        return {"seconds": None, "rss_mb": rss, "note": f"failed: {last[:60]}"}
    return {**json.loads(out), "note": ""}


def parse_size(text: str) -> int:
    units = {"KB": 10**3, "MB": 10**6, "GB": 10**9}
    for unit, mult in units.items():
        if text.upper().endswith(unit):
            return int(float(text[: -len(unit)]) * mult)
    return int(text)


def row(mb: float, entries: int, reader: str, r: dict, timeout: float) -> str:
    """One table line; MB/s is per CPU second (the machine may be shared: wall time counts the waits)."""
    secs = f"{r['seconds']:.2f}" if r["seconds"] is not None else "-"
    secs = f"> {timeout:.0f}" if r["note"].startswith("killed") else secs
    cpu = f"{r['cpu']:.2f}" if r.get("cpu") else "-"
    rate = f"{mb / r['cpu']:.0f}" if r.get("cpu") else "-"
    note = r["note"] or r.get("what", "")
    return f"{mb:>5.0f}MB {entries:>8} {reader:<9} {secs:>7} {cpu:>7} {rate:>6} {r['rss_mb']:>6.0f} MB  {note}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="16MB,256MB,1GB", help="comma-separated dump.json sizes")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a reader is stopped")
    ap.add_argument("--mem-cap", default="4GB", help="address-space cap of each reader process")
    ap.add_argument("--dir", type=Path, default=None, help="where to write the files (default: a temp dir)")
    ap.add_argument("--child", nargs=2, metavar=("READER", "ROOT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.child[0], Path(args.child[1]))
    head = f"{'size':>7} {'entries':>8} {'reader':<9} {'wall s':>7} {'cpu s':>7} {'MB/s':>6} {'peak RSS':>9}  note"
    print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    print(head, flush=True)
    for size in (parse_size(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            root = Path(tmp)
            (root / "scenarios").mkdir()
            (root / "scenarios" / "bench.yaml").write_text(yaml.safe_dump(SCENARIO))
            dump = root / "results" / "bench" / DUMP_REL / "dump.json"
            entries = write_dump(dump, size)
            mb = dump.stat().st_size / 1e6
            for reader in ("contents", "structure"):
                r = measure(reader, root, args.timeout, parse_size(args.mem_cap))
                print(row(mb, entries, reader, r, args.timeout), flush=True)


if __name__ == "__main__":
    main()
