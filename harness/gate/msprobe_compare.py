"""Run ``msprobe compare`` for many pairs of dump dirs in one process (the child of ``harness.gate.numerics``).

msprobe's console entry point (``msprobe.msprobe.main``, its documented CLI: same argv, same outputs) is called
once per pair in this one interpreter: importing msprobe (and torch with it) costs seconds, a pair of tiny dumps
milliseconds. Where the plain compare finds rows beyond msprobe's thresholds (other than ``nonfinite_ok``
entries), ``compare -da`` runs too, to name the first diverging API. A job whose ``argv`` is null runs ``-da`` only:
the harness compared the statistics itself and found the stage diverging.

Usage: ``python -m harness.gate.msprobe_compare JOBS.json RESULT.json``. JOBS.json: ``{"nonfinite_ok": [regex],
"jobs": [{"argv": [...], "out": DIR, "da_argv": [...]}]}`` (argv: what follows ``msprobe compare``). RESULT.json:
per job its wall time and msprobe's errors (one line, or null; ``da_error`` for -da), and the peak RSS of this
process and of the workers msprobe forked.
"""

from __future__ import annotations

import json
import re
import resource
import sys
import time
from pathlib import Path

from harness.gate.numerics import StageNumerics, read_csvs


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
