"""verl's real trainer on the stack a verl's own uv.lock pins (``--stack verl``, what the CPU gate installs): the
environment made (how long, from where, which pins were substituted), the versions it holds, then a real_ scenario
on it. Says whether the CPU patches (harness/training/workloads/verl_cpu/) hold on those versions: the scenario's
checks pass, or its crash line names what broke.

Not a test (nothing in the tests may need verl's history or the network): run by hand on a verl checkout, with
network (the lock's own sources, else the package index: several GB where its torch is the CUDA build), and the
Python the lock is made for; on a shared machine under its heavy-work lock::

    HARNESS_STACK_PYTHON=python3.12 flock /tmp/heavy.lock .venv/bin/python benchmarks/verl_stack.py ~/src/verl
    ... benchmarks/verl_stack.py ~/src/verl scenarios/real_fsdp_l1.yaml --results /tmp/stack-run

HARNESS_CACHE_DIR names where the environment (and its uv cache) go.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHOWN = ("torch", "transformers", "ray", "numpy", "tensordict", "transferqueue", "megatron-core", "verl")
VERSIONS = (
    "import importlib.metadata as m, json, sys\n"
    "out = {}\n"
    "for d in sys.argv[1:]:\n"
    "    try:\n"
    "        out[d] = m.version(d)\n"
    "    except m.PackageNotFoundError:\n"
    "        out[d] = None\n"
    "print(json.dumps(out))\n"
)


def harness(*args: str) -> tuple[int, str, float]:
    started = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=ROOT, capture_output=True, text=True, check=False
    )
    return out.returncode, out.stdout + out.stderr, time.monotonic() - started


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("verl", help="a verl checkout (its uv.lock is the stack)")
    p.add_argument("scenario", nargs="?", default=str(ROOT / "scenarios" / "real_fsdp_l0.yaml"))
    p.add_argument("--results", default="/tmp/verl-stack-run")
    args = p.parse_args()
    os.environ["HARNESS_STACK"] = "verl"

    rc, out, took = harness("target", "--verl", args.verl)
    print(f"== the environment on {args.verl}'s uv.lock: exit {rc}, {took:.0f} s")
    print(out.rstrip())
    if rc != 0:
        return rc
    python = next(ln.split(": ", 1)[1] for ln in out.splitlines() if ln.startswith("python: "))
    versions = subprocess.run([python, "-c", VERSIONS, *SHOWN], capture_output=True, text=True, check=True)
    print("== versions in it: " + ", ".join(f"{k} {v}" for k, v in json.loads(versions.stdout).items()))

    rc, out, took = harness("run", args.scenario, "--heavy", "--verl", args.verl, "--results", args.results)
    print(f"== harness run {Path(args.scenario).name} on it: exit {rc}, {took:.0f} s")
    print("\n".join(out.rstrip().splitlines()[-25:]))
    for results in sorted(Path(args.results).glob("*/results.json")):
        doc = json.loads(results.read_text())
        checks = ", ".join(f"{k} {'pass' if v['passed'] else 'FAIL'}" for k, v in doc["checks"].items())
        print(f"== {results.parent.name}: {checks}")
        print(f"   {doc['environment'].get('stack', {}).get('source')}: torch {doc['environment'].get('torch')}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
