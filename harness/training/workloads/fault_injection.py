"""TEST-ONLY knobs that make precision_debugger worse on purpose, to prove that the gate catches it.

Never set these outside the harness's own tests and acceptance runs. They reach a training only when set
in the harness process's environment, and only the precision_debugger-on run gets them:

- ``HARNESS_TEST_DUMP_DELAY_S=0.003``: sleep that long inside every call msprobe dumps (its
  ``DataCollector.handle_data``), so profiled steps get slower: an overhead regression.
- ``HARNESS_TEST_DUMP_PAD=1``: after each profiled step, write N extra copies of every file in this rank's
  dump dirs (``<file>.pad<i>``), so the dumps grow (N+1) fold while dump.json stays intact: a disk
  regression and nothing else.
- ``HARNESS_TEST_STAGE_SLOWDOWN_PCT=15``: in each profiled stage (the embedded CPU workload), after the stage's
  work, burn CPU for 15 % of the CPU time the stage itself just took: an overhead regression of exactly +15 %
  on the profiled stages, in the clock the overhead ratios use (CPU work, as msprobe's own cost is; a sleep
  would not show in CPU time).

They are part of the run fingerprint, so ``--reuse`` never mixes runs made with and without them.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

DELAY_ENV = "HARNESS_TEST_DUMP_DELAY_S"
PAD_ENV = "HARNESS_TEST_DUMP_PAD"
SLOWDOWN_ENV = "HARNESS_TEST_STAGE_SLOWDOWN_PCT"
KNOBS = (DELAY_ENV, PAD_ENV, SLOWDOWN_ENV)


def passthrough(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs set (non-empty) in the harness's environment, for a Launch's env."""
    environ = os.environ if environ is None else environ
    return {k: environ[k] for k in KNOBS if environ.get(k)}


def install_delay(environ: Mapping[str, str] | None = None) -> float:
    """Wrap msprobe's per-call collector with a sleep when HARNESS_TEST_DUMP_DELAY_S is set; returns the delay."""
    environ = os.environ if environ is None else environ
    delay = float(environ.get(DELAY_ENV) or 0)
    if delay <= 0:
        return 0.0
    from msprobe.core.dump.data_dump.data_collector import DataCollector

    original = DataCollector.handle_data

    def handle_data(self: Any, name: str, data_info: Any, flush: bool = False) -> Any:
        if data_info:
            time.sleep(delay)
        return original(self, name, data_info, flush=flush)

    DataCollector.handle_data = handle_data
    print(f"fault_injection: {DELAY_ENV}={delay}: msprobe sleeps in every dumped call (TEST ONLY)", flush=True)
    return delay


def pad_dumps(save_path: str | Path, step: int, rank: int, environ: Mapping[str, str] | None = None) -> int:
    """Copy this rank's dump files of ``step`` HARNESS_TEST_DUMP_PAD times; returns the bytes added."""
    environ = os.environ if environ is None else environ
    copies = int(environ.get(PAD_ENV) or 0)
    added = 0
    for leaf in sorted(Path(save_path).glob(f"step_{step}/*/step0/rank{rank}")):
        for f in sorted(p for p in leaf.rglob("*") if p.is_file() and ".pad" not in p.name):
            for i in range(1, copies + 1):
                shutil.copyfile(f, f.with_name(f"{f.name}.pad{i}"))
                added += f.stat().st_size
    return added


def slow_down(stage_cpu_s: float, environ: Mapping[str, str] | None = None) -> float:
    """Burn HARNESS_TEST_STAGE_SLOWDOWN_PCT % of ``stage_cpu_s`` of this process's CPU time; returns the seconds."""
    environ = os.environ if environ is None else environ
    extra = stage_cpu_s * float(environ.get(SLOWDOWN_ENV) or 0) / 100
    end = time.process_time() + extra
    while time.process_time() < end:
        pass
    return max(extra, 0.0)
