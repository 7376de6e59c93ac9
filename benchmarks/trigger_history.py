"""When the pull-request gate runs, measured on verl's own history: the trigger ``harness target --trigger`` derives
(docs/verl-caller-example.yml's ``changes`` job) against the former path filter, on verl main's last N commits and
on every commit known to have changed the integration (recall: each must trigger).

Not a test (nothing in the tests may need verl's history): run by hand on a clone of verl (a bare one will do)::

    .venv/bin/python benchmarks/trigger_history.py ~/src/verl.git            # main, the last 300 commits
    .venv/bin/python benchmarks/trigger_history.py ~/src/verl.git --ref main --last 300

A commit's files and changed lines are what the files API gives the job (``git diff-tree -M``, the diff's added and
removed lines). Known changes of the integration: the commits the integration's history names (docs), and every
first-parent commit since the integration whose census (``harness.targets.census``) differs from its parent's.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.targets.census import Census, census_of_files, changed_lines, diff, trigger_of  # noqa: E402
from harness.targets.census import _git_files as git_files  # noqa: E402

FORMER = re.compile(
    r"^(verl/utils/profiler/|verl/workers/|verl/trainer/|\.github/workflows/precision-debugger-gate\.yml$)"
)
INTEGRATION_FILE = "precision_debugger"  # a file of precision_debugger's own (its module, its test, its docs)
# The pull requests known to have changed the integration (verl's history; /docs/verl-first-hour.md says what each did)
KNOWN = {
    "b4c826332": "#5186 the integration",
    "f8b0dd26c": "#5986 config simplified, dumps under save_path",
    "16253911d": "#5870 Megatron critic (profiler config)",
    "020c4ae81": "#5909 the SFT trainer's profiler",
    "044bbba27": "#6067 legacy workers and their annotations removed",
    "955fda828": "#6162 experimental/vla (its annotations) moved out",
    "a512e90fd": "#6200 the diffusion trainer's config (precision_debugger block) moved out",
    "e45dc3d3e": "#5631 the trtllm server's DistProfiler",
    "ed89419c2": "#6717 the tinker worker annotates forward_backward",
    "5b2bfe7c5": "#6680 annotate inside RLInsightLogger.trace_state",
    "a07d3e32d": "#7099 DistProfiler's signature, output naming",
    "7898ab499": "#7104 Megatron model chunks bound",
    "9097cc4d4": "#7408 finish hooks, scheduled actor_update, role 'train'",
}
INTEGRATION_SINCE = "b4c826332"


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, check=True)
    return out.stdout.decode(errors="replace")


def change(repo: Path, commit: str) -> dict[str, list[str]]:
    """A commit's files (old and new names of a rename), each with its diff's added and removed lines."""
    return changed_lines(git(repo, "show", "--format=", "-M", "-U0", commit))


def census_at(repo: Path, commit: str) -> Census:
    files = git_files(repo, commit)
    profiler = next((data for name, data in files if name.endswith("precision_debugger_profile.py")), None)
    return census_of_files(commit[:9], files, profiler)


def census_changes(repo: Path, ref: str) -> dict[str, str]:
    """First-parent commits since the integration whose census differs from their parent's (only commits whose
    diff names DistProfiler or a table can change it: git's pickaxe finds them)."""
    candidates = git(
        repo, "log", "--first-parent", "--format=%H", f"{INTEGRATION_SINCE}~1..{ref}", "-G",
        r"DistProfiler|_STAGE_TO_ROLE|_SKIP_STAGES|_MODEL_ATTRS_BY_ROLE", "--", "verl",
    ).split()  # fmt: skip
    out = {}
    for c in candidates:
        findings, _ = diff(census_at(repo, f"{c}~1"), census_at(repo, c))
        if findings:
            out[c[:9]] = "; ".join(findings)[:160]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path, help="a clone of verl (bare or not)")
    ap.add_argument("--ref", default="main")
    ap.add_argument("--last", type=int, default=300)
    args = ap.parse_args()
    started = time.monotonic()
    trigger = trigger_of(census_at(args.repo, git(args.repo, "rev-parse", args.ref).strip()))
    print(f"trigger derived at {args.ref}: paths {trigger.path_regex()}; lines {trigger.lines}\n")
    commits = git(args.repo, "log", "--first-parent", f"-{args.last}", "--format=%H", args.ref).split()
    fired, former, integration = [], 0, 0
    for c in commits:
        files = change(args.repo, c)
        former += any(FORMER.match(f) for f in files)
        touched = any(INTEGRATION_FILE in f for f in files)
        integration += touched
        if trigger.fires(files):
            fired.append((c, touched))
    first, last = (
        git(args.repo, "log", "-1", "--format=%cs", commits[-1]),
        git(args.repo, "log", "-1", "--format=%cs", commits[0]),
    )
    print(f"verl {args.ref}'s last {len(commits)} commits ({first.strip()} to {last.strip()}):")
    print(f"- former filter (verl/utils/profiler/, verl/workers/, verl/trainer/): {former} trigger")
    print(f"- derived trigger: {len(fired)} trigger, {sum(t for _, t in fired)} of them touched a precision_debugger "
          f"file ({integration} commits did in all)")  # fmt: skip
    for c, _ in fired:
        print(f"  {git(args.repo, 'log', '-1', '--format=%h %cs %s', c).strip()[:110]}")
    known = dict(KNOWN)
    changed = census_changes(args.repo, args.ref)
    print(f"\ncensus changed (a role added, removed, renamed or treated otherwise) at {len(changed)} commits: "
          f"{', '.join(changed)}")  # fmt: skip
    for c, why in changed.items():
        known.setdefault(c, f"census: {why}")
    print(f"\nrecall on {len(known)} commits known to have changed the integration:\n")
    print("| commit | what | former filter | derived trigger |\n|---|---|---|---|")
    missed = 0
    for c, why in sorted(known.items(), key=lambda kv: git(args.repo, "log", "-1", "--format=%ct", kv[0])):
        files = change(args.repo, c)
        hit = trigger.fires(files)
        missed += not hit
        old = any(FORMER.match(f) for f in files)
        print(f"| {c} | {why} | {'runs' if old else 'MISSED'} | {'runs' if hit else 'MISSED'} |")
    print(f"\nrecall: {len(known) - missed} of {len(known)}; {time.monotonic() - started:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
