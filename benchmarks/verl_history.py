"""verl's history as a test suite: the shipped tiny scenarios (with ``--real`` verl's own trainer too) on the verl
commits that touched the integration, with the verdict each must get, as a markdown table.

Not a test (it needs verl's real history, which the tests may not): run by hand with a verl clone. Each row is
``python -m harness run SCENARIO --verl REPO@SHA`` in a child process; its exit code and the first failing line
are the verdict, the dry run's ``precision_debugger dialect`` line says how the harness configured that verl.

    .venv/bin/python benchmarks/verl_history.py --verl-repo /path/to/verl [--only tiny_fsdp_l1] [--ref REF] [--real]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (ref, what it is, {scenario: the exit code it must get}); 0 pass, 1 FAIL (a verdict on verl), 2 an error (the
# harness cannot drive that verl: never a verdict on it)
HISTORY: list[tuple[str, str, dict[str, int]]] = [
    ("b4c826332", "#5186: the integration (tool-config dialect)", {"tiny_fsdp_l1": 0, "tiny_megatron_l1": 1}),
    ("f8b0dd26c", "#5986: profiler-config dialect", {"tiny_fsdp_l1": 0, "tiny_megatron_l1": 1}),
    ("7a457c934", "#6086: verl's platform plugin point", {"tiny_fsdp_l1": 0}),
    ("7898ab499~1", "before #7104: Megatron chunks not dumped", {"tiny_megatron_l1": 1}),
    ("7898ab499", "#7104: Megatron chunks resolved", {"tiny_fsdp_l1": 0, "tiny_megatron_l1": 0}),
    ("9097cc4d4", "#7408: profiler post hook", {"tiny_fsdp_l1": 0, "tiny_megatron_l1": 0}),
    ("main", "newest main fetched", {"tiny_fsdp_l1": 0, "tiny_megatron_l1": 0}),
]
# with --real, verl's own trainer: real_fsdp_l0 on every commit (before #6086 verl has no platform plugin point, so
# the CPU tier cannot run it: an error, exit 2; at #6086 its trainer still imports flash_attn on CPU, which no CPU
# environment has: an environment error, exit 2); and real_critic_strict_fsdp_l1, whose declared verl bug (strict
# raises for the critic's train_batch role, annotated since #5909) must still crash as declared (xfail: exit 0)
REAL: dict[str, dict[str, int]] = {
    "b4c826332": {"real_fsdp_l0": 2},
    "f8b0dd26c": {"real_fsdp_l0": 2},
    "7a457c934": {"real_fsdp_l0": 2, "real_critic_strict_fsdp_l1": 2},
    "7898ab499~1": {"real_fsdp_l0": 0},
    "7898ab499": {"real_fsdp_l0": 0, "real_critic_strict_fsdp_l1": 0},
    "9097cc4d4": {"real_fsdp_l0": 0},
    "main": {"real_fsdp_l0": 0, "real_critic_strict_fsdp_l1": 0},
}
WORDS = {0: "pass", 1: "FAIL", 2: "error", 3: "INCONCLUSIVE"}
LINE = re.compile(r"^\s+[-~] (\w+: .*)$")  # a failing check, or one declared (xfail)


def harness(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=3600
    )


def row(repo: str, ref: str, what: str, scenario: str, expected: int, tmp: Path) -> str:
    spec, path = f"{repo}@{ref}", str(ROOT / "scenarios" / f"{scenario}.yaml")
    dry = harness("dry-run", path, "--verl", spec, cwd=tmp)
    dialect = next((ln.split(": ", 1)[1].split(" (")[0] for ln in dry.stdout.splitlines() if "dialect:" in ln), "?")
    results = str(tmp / ref.replace("~", "_") / scenario)
    run = harness("run", path, "--heavy", "--verl", spec, "--results", results, cwd=tmp)
    lines = run.stdout.splitlines() + run.stderr.splitlines()
    why = next((m[1] for ln in lines if (m := LINE.match(ln))), "")
    why = why or next((ln for ln in lines if "ERROR" in ln), "")
    ok = "ok" if run.returncode == expected else "UNEXPECTED"
    word = WORDS.get(run.returncode, str(run.returncode))
    cell = re.sub(r"\S*/site-packages/", "", why).replace("|", "/")[:160]  # the environment's path says nothing
    return f"| {ref} | {what} | {dialect} | {scenario} | {WORDS[expected]} | {word} {cell} | {ok} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--verl-repo", required=True, help="a clone of github.com/verl-project/verl (bare is fine)")
    parser.add_argument("--only", action="append", default=[], help="only this scenario (repeatable)")
    parser.add_argument("--real", action="store_true", help="also verl's own trainer (REAL) on each commit")
    parser.add_argument("--ref", action="append", default=[], help="only this commit of HISTORY (repeatable)")
    args = parser.parse_args()
    print("| verl | commit | dialect | scenario | must | got | |\n|---|---|---|---|---|---|---|", flush=True)
    bad = 0
    with tempfile.TemporaryDirectory(prefix="verl-history-") as tmp:
        for ref, what, expected in HISTORY:
            if args.ref and ref not in args.ref:
                continue
            for scenario, code in {**expected, **(REAL[ref] if args.real else {})}.items():
                if args.only and scenario not in args.only:
                    continue
                line = row(os.path.abspath(args.verl_repo), ref, what, scenario, code, Path(tmp))
                bad += line.endswith("UNEXPECTED |")
                print(line, flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
