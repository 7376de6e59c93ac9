"""Run ``msprobe compare`` for many pairs of dump dirs in one process (``run_msprobe``: the child of ``compare``).

msprobe's console entry point (``msprobe.msprobe.main``, its documented CLI: same argv, same outputs) is called
once per pair in this one interpreter: importing msprobe (and torch with it) costs seconds, a pair of tiny dumps
milliseconds. Where the plain compare finds rows beyond msprobe's thresholds (other than ``nonfinite_ok``
entries), ``compare -da`` runs too, to name the first diverging API. A job whose ``argv`` is null runs ``-da`` only:
the harness compared the statistics itself and found the stage diverging.

Usage: ``python -m harness.gate.numerics.msprobe_cli JOBS.json RESULT.json``. JOBS.json: ``{"nonfinite_ok": [regex],
"jobs": [{"argv": [...], "out": DIR, "da_argv": [...]}]}`` (argv: what follows ``msprobe compare``). RESULT.json:
per job its wall time and msprobe's errors (one line, or null; ``da_error`` for -da), and the peak RSS of this
process and of the workers msprobe forked.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.errors import InfraError
from harness.gate.numerics.report import StageNumerics, read_csvs


def run_msprobe(doc: dict[str, Any], work: Path, python: str) -> tuple[list[dict[str, Any]], int]:
    """Every job in one child process (its log: ``work/msprobe.log``); per job its error, and the peak RSS."""
    work.mkdir(parents=True, exist_ok=True)
    jobs_file, result_file = work / "jobs.json", work / "result.json"
    jobs_file.write_text(json.dumps(doc))
    result_file.unlink(missing_ok=True)
    argv = [python, "-m", "harness.gate.numerics.msprobe_cli", str(jobs_file), str(result_file)]
    with (work / "msprobe.log").open("w") as log:
        proc = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, check=False, cwd=work)
    if proc.returncode != 0 or not result_file.is_file():
        raise InfraError(f"msprobe compare exited with {proc.returncode}: see {work / 'msprobe.log'}")
    result = json.loads(result_file.read_text())
    return result["jobs"], int(result["peak_rss_bytes"])


def first_da(out: Path) -> str:
    """msprobe -da's first diverging API (``diff_analyze_*.json``: rank -> nodes), "" when it wrote none."""
    for path in sorted(out.glob("diff_analyze_*.json")):
        for rank, nodes in sorted(json.loads(path.read_text()).items()):
            if nodes:
                return f"{nodes[0].get('op_name', '?')} ({rank.replace('_', '')})"
    return ""


def _msprobe(argv: list[str]) -> str | None:
    from msprobe.msprobe import main as msprobe_main

    sys.argv = ["msprobe", "compare", *argv]
    try:
        msprobe_main()
    except (Exception, SystemExit) as exc:  # msprobe's CompareException, argparse's exit: reported per job
        return (f"{type(exc).__name__}: {exc}".strip().splitlines() or ["?"])[0]
    return None


def main(jobs_path: str, result_path: str) -> int:
    doc = json.loads(Path(jobs_path).read_text())
    patterns = [re.compile(p) for p in doc["nonfinite_ok"]]
    done = []
    for job in doc["jobs"]:
        started = time.monotonic()
        error, da_error = _msprobe(job["argv"]) if job["argv"] else None, None
        probe = StageNumerics(0, "")
        if job["argv"] and not error:
            read_csvs(probe, Path(job["out"]), patterns)
        if not job["argv"] or probe.diverged:
            da_error = _msprobe(job["da_argv"])
        done.append({"seconds": time.monotonic() - started, "error": error, "da_error": da_error})
    peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    Path(result_path).write_text(json.dumps({"jobs": done, "peak_rss_bytes": peak * 1024}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
