"""verl's real pull requests through the CPU gate as verl's caller runs it (docs/verl-pull-requests.md).

Each case is a pull request (its merge ref, ``refs/pull/N/merge``: GitHub's merge commit against its first parent) or
a commit of verl main (against its parent). First the caller's ``changes`` job, its own script from
docs/verl-caller-example.yml run as written, on the files API's answer made from git (each file's name, former name
and diff; ``gh`` stood in by a script reading it): no integration change, and the gate is skipped (its
``cpu-gate-verdict`` passes). Otherwise the gate's step as verl-cpu-gate.yml runs it::

    python3 -m harness.job run --title "precision_debugger CPU gate" --minutes 50 --fresh OUT \\
        --annotations OUT/annotations.txt -- bash .ci/cpu-gate pr VERL@BASE VERL@HEAD

Not a test (nothing in the tests may need verl's history): run by hand on a clone of verl that holds the pull
requests' merge refs (``git fetch origin '+refs/pull/*/merge:refs/pull/*/merge'``; a bare one will do), one case
after another (each ~20-25 min on 2 cores), resumable (a case with a result is not run again)::

    .venv/bin/python benchmarks/verl_pull_requests.py ~/src/verl.git results/prs pr:7496 pr:4650 commit:7898ab499
    .venv/bin/python benchmarks/verl_pull_requests.py ~/src/verl.git results/prs --table pr:7496 pr:4650

OUT/CASE holds the gate's results, OUT/CASE.meta its case, job log, step summary, outputs and timing; --table prints
the table of docs/verl-pull-requests.md from them: the changes job's line (the integration's files changed), the job's
verdict line (its last), its minutes, and the first annotation a maintainer reads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from harness.job import unescape  # noqa: E402
from harness.report.github import TITLE as REPORT_TITLE  # noqa: E402

CALLER = ROOT / "docs" / "verl-caller-example.yml"
TITLE = "precision_debugger CPU gate"
GH = """#!/usr/bin/env bash
# `gh api [--paginate] URL --jq EXPR`: the files API's answer (FILES_JSON), or a pull request with no label
url="" expr=""
while [ $# -gt 0 ]; do
  case "$1" in api|--paginate) shift ;; --jq) expr=$2; shift 2 ;; *) url=$1; shift ;; esac
done
case "$url" in */files) jq -r "$expr" "$FILES_JSON" ;; *) echo '{"labels": []}' | jq -r "$expr" ;; esac
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def pair(repo: Path, case: str) -> tuple[str, str]:
    """``pr:N`` (its merge ref against its first parent) or ``commit:SHA`` (against its parent): base, head."""
    kind, _, ref = case.partition(":")
    head = git(repo, "rev-parse", f"refs/pull/{ref}/merge" if kind == "pr" else f"{ref}^{{commit}}").strip()
    return git(repo, "rev-parse", f"{head}^1").strip(), head


def files_api(repo: Path, base: str, head: str) -> list[dict[str, str | None]]:
    """What ``GET /pulls/N/files`` answers: name, former name of a rename, the diff's hunks (none for a binary)."""
    out: list[dict[str, str | None]] = []
    for line in git(repo, "diff", "--name-status", "-M", base, head).splitlines():
        _, *names = line.split("\t")
        patch = git(repo, "diff", "-M", "--no-color", base, head, "--", *names)
        hunks = patch[patch.index("\n@@") + 1 :] if "\n@@" in patch else None
        entry: dict[str, str | None] = {"filename": names[-1], "patch": hunks}
        if len(names) == 2:
            entry["previous_filename"] = names[0]
        out.append(entry)
    return out


def changes(repo: Path, base: str, head: str) -> tuple[bool, str]:
    """The caller's changes job, its step's script and environment as docs/verl-caller-example.yml has them: whether
    the gate runs, and the line the job prints."""
    step = yaml.safe_load(CALLER.read_text())["jobs"]["changes"]["steps"][0]
    with tempfile.TemporaryDirectory(prefix="changes-") as tmp:
        (Path(tmp) / "gh").write_text(GH)
        (Path(tmp) / "gh").chmod(0o755)
        (Path(tmp) / "files.json").write_text(json.dumps(files_api(repo, base, head)))
        output = Path(tmp) / "output"
        output.touch()
        env = {**os.environ, **{k: str(v) for k, v in step["env"].items()}}
        env.update(FILES_JSON=f"{tmp}/files.json", GITHUB_OUTPUT=str(output), PATH=f"{tmp}:{os.environ['PATH']}")
        env.update(REPO="verl-project/verl", PR="0")
        proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, capture_output=True, text=True, check=True)
        return "integration=true" in output.read_text(), proc.stdout.splitlines()[0].strip()


def gate(repo: Path, base: str, head: str, out: Path, meta: Path) -> None:
    """The gate's step of verl-cpu-gate.yml, its log, outputs and seconds kept in ``meta``."""
    env = {**os.environ, "RESULTS": str(out), "GITHUB_STEP_SUMMARY": str(meta / "summary.md")}
    env["GITHUB_OUTPUT"] = str(meta / "output")
    argv = [sys.executable, "-m", "harness.job", "run", "--title", TITLE, "--minutes", "50", "--fresh", str(out)]
    argv += ["--annotations", str(out / "annotations.txt"), "--", "bash", ".ci/cpu-gate", "pr"]
    argv += [f"{repo}@{base}", f"{repo}@{head}"]
    started = time.monotonic()
    with open(meta / "job.log", "w") as log:
        code = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=False).returncode
    (meta / "timing").write_text(f"job_exit={code} seconds={time.monotonic() - started:.0f}\n")


def first_annotation(out: Path) -> str:
    """What a maintainer reads first: the first error annotation after the comparison's verdict line (that one says
    only what its exit means), as ``title: message``, its first line; none: the job's verdict line says it all."""
    notes = out / "annotations.txt"
    lines = notes.read_text(errors="replace").splitlines() if notes.is_file() else []
    for line in lines:
        head, sep, message = line.partition("::")[2].partition("::")
        title = unescape(head.removeprefix("error title="))
        if sep and head.startswith("error title=") and title != REPORT_TITLE:
            said = f"{title}: {unescape(message).splitlines()[0]}"
            return said if len(said) <= 300 else said[:299] + "…"
    return "the verdict"


def row(repo: Path, case: str, out: Path, meta: Path) -> str:
    """One line of the table: the case, its changes job, and the gate's verdict line, minutes and first annotation."""
    base, head = pair(repo, case)
    subject = git(repo, "log", "-1", "--format=%s", head if case.startswith("commit") else f"{head}^2").strip()
    touched, said = changes(repo, base, head)
    files = said.removeprefix("integration files changed: ").split()
    said = " ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    cells = [case, subject.replace("|", "/"), said, f"{base[:9]}..{head[:9]}"]
    if not touched:
        return "| " + " | ".join([*cells, "gate skipped: cpu-gate-verdict passes", "0", "-"]) + " |"
    job_log = (meta / "job.log").read_text(errors="replace") if (meta / "job.log").is_file() else ""
    said_last = [ln.split("::", 2)[-1] for ln in job_log.splitlines() if ln.startswith(f"::warning title={TITLE}::")]
    if not (meta / "timing").is_file():  # never started, or stopped before the job's end
        verdict = f"interrupted after: {unescape(said_last[-1])}" if said_last else "not run"
        return "| " + " | ".join([*cells, verdict, "-", first_annotation(out) if said_last else "-"]) + " |"
    timing = dict(kv.split("=") for kv in (meta / "timing").read_text().split())
    said_last = [
        ln.split("::", 2)[-1] for ln in job_log.splitlines() if ln.startswith("::") and f"title={TITLE}::" in ln
    ]
    outputs = (
        dict(kv.split("=", 1) for kv in (meta / "output").read_text().split()) if (meta / "output").is_file() else {}
    )
    minutes = f"{int(timing['seconds']) / 60:.1f}"
    if outputs.get("attempts", "1") != "1":
        minutes += f" ({outputs['attempts']} attempts)"
    verdict = f"exit {timing['job_exit']}: {unescape(said_last[-1]) if said_last else '(no line)'}"
    return "| " + " | ".join([*cells, verdict, minutes, first_annotation(out)]) + " |"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("verl", type=Path, help="a clone of verl with refs/pull/N/merge (bare will do)")
    ap.add_argument("results", type=Path)
    ap.add_argument("cases", nargs="+", help="pr:N or commit:SHA")
    ap.add_argument("--table", action="store_true", help="print the table from the results, run nothing")
    args = ap.parse_args()
    if args.table:
        print(
            "| case | what it changes | changes job: integration files | pair (base..head) | verdict (the job's line) "
            "| minutes | read first |"
        )
        print("|---|---|---|---|---|---:|---|")
    for case in args.cases:
        label = case.replace(":", "")
        out, meta = args.results / label, args.results / f"{label}.meta"
        if args.table:
            print(row(args.verl, case, out, meta))
            continue
        if (meta / "timing").is_file():
            continue
        meta.mkdir(parents=True, exist_ok=True)
        base, head = pair(args.verl, case)
        touched, said = changes(args.verl, base, head)
        print(f"{case}: {said}", flush=True)
        if touched:
            gate(args.verl, base, head, out, meta)
            print(f"{case}: {(meta / 'timing').read_text().strip()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
