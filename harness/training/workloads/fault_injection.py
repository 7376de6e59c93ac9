"""TEST-ONLY knobs that make precision_debugger worse on purpose, to prove that the gate catches it.

Never set these outside the harness's own tests and acceptance runs. They reach a training only when set
in the harness process's environment, and only the precision_debugger-on run gets them:

- ``HARNESS_TEST_DUMP_DELAY_S=0.003``: sleep that long inside every call msprobe dumps (its
  ``DataCollector.handle_data``), so profiled steps get slower: an overhead regression.
- ``HARNESS_TEST_DUMP_PAD=1``: after each profiled step, write N extra copies of every file in this rank's
  dump dirs (``<file>.pad<i>``), so the dumps grow (N+1) fold while dump.json stays intact: a disk
  regression and nothing else.
- ``HARNESS_TEST_STAGE_SLOWDOWN_PCT=15``: in each profiled stage (the embedded CPU workload), after the stage's
  work, burn CPU for 15 % of the time the stage itself just took (wall less runnable waiting, the clock the
  overhead ratios use): an overhead regression of exactly +15 % on the profiled stages, in CPU work, as msprobe's
  own cost is.
- ``HARNESS_TEST_STAGE_WAIT_PCT=15``: the same share, slept instead: a slowdown that waits (a lock, a synced
  write, a device sync), which the CPU clock never saw. The power benchmark injects both kinds.

They are part of the run fingerprint, so ``--reuse`` never mixes runs made with and without them.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness import config


def passthrough(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The knobs set (non-empty) in the harness's environment, for a Launch's env."""
    return {v.name: text for v in config.FAULTS if (text := v.text(environ))}


def install_delay(environ: Mapping[str, str] | None = None) -> float:
    """Wrap msprobe's per-call collector with a sleep when HARNESS_TEST_DUMP_DELAY_S is set; returns the delay."""
    delay = config.DUMP_DELAY_S.get(environ)
    if delay <= 0:
        return 0.0
    from msprobe.core.dump.data_dump.data_collector import DataCollector

    original = DataCollector.handle_data

    def handle_data(self: Any, name: str, data_info: Any, flush: bool = False) -> Any:
        if data_info:
            time.sleep(delay)
        return original(self, name, data_info, flush=flush)

    DataCollector.handle_data = handle_data
    say = f"fault_injection: HARNESS_TEST_DUMP_DELAY_S={delay}: msprobe sleeps in every dumped call (TEST ONLY)"
    print(say, flush=True)
    return delay


def pad_dumps(save_path: str | Path, step: int, rank: int, environ: Mapping[str, str] | None = None) -> int:
    """Copy this rank's dump files of ``step`` HARNESS_TEST_DUMP_PAD times; returns the bytes added."""
    copies = config.DUMP_PAD.get(environ)
    added = 0
    for leaf in sorted(Path(save_path).glob(f"step_{step}/*/step0/rank{rank}")):
        for f in sorted(p for p in leaf.rglob("*") if p.is_file() and ".pad" not in p.name):
            for i in range(1, copies + 1):
                shutil.copyfile(f, f.with_name(f"{f.name}.pad{i}"))
                added += f.stat().st_size
    return added


def slow_down(stage_s: float, environ: Mapping[str, str] | None = None) -> float:
    """Burn HARNESS_TEST_STAGE_SLOWDOWN_PCT % of ``stage_s`` of this process's CPU time, then sleep
    HARNESS_TEST_STAGE_WAIT_PCT % of it; returns the seconds added."""
    burn = max(stage_s * config.STAGE_SLOWDOWN_PCT.get(environ) / 100, 0.0)
    end = time.process_time() + burn
    while time.process_time() < end:
        pass
    wait = max(stage_s * config.STAGE_WAIT_PCT.get(environ) / 100, 0.0)
    if wait:
        time.sleep(wait)
    return burn + wait
