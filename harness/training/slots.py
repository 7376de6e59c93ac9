"""Machine-wide slots for heavy trainings (verl's real trainer on CPU: Ray plus several model copies).

One such run holds ~4-5 GiB (PSS 4.0 GiB with 1 rank, 4.9 GiB with 2, measured on a 2-core host) and keeps
two cores busy; more at once than the host has swap the machine or skew the overhead ratios. Every harness
process on the host (pytest-xdist workers, other checkouts) takes a slot, a file lock under
``$HARNESS_SLOT_DIR`` (default ``~/.cache/verl-msprobe-harness/slots``), before starting one, and waits when
none is free.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from filelock import FileLock, Timeout

from harness import config

RUN_GIB = 5.0  # the 2-rank PSS above, rounded up
CORES_PER_RUN = 2
MEMORY_SHARE = 0.6  # of the host's RAM: the rest is for the harness, the checks and other users


def capacity() -> int:
    """``$HARNESS_HEAVY_SLOTS``, else as many as memory and cores allow (at least one)."""
    if (value := config.HEAVY_SLOTS.get()) is not None:
        return max(1, value)
    total_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(1, min(int(total_gib * MEMORY_SHARE // RUN_GIB), (os.cpu_count() or 1) // CORES_PER_RUN))


@contextmanager
def heavy_slot(poll_s: float = 2.0) -> Iterator[float]:
    """Hold one slot for the block; yields the seconds spent waiting for it."""
    root = config.SLOT_DIR.get().expanduser()
    root.mkdir(parents=True, exist_ok=True)
    locks = [FileLock(str(root / f"slot{i}.lock")) for i in range(capacity())]
    started = time.monotonic()
    while True:
        for lock in locks:
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                yield time.monotonic() - started
            finally:
                lock.release()
            return
        time.sleep(poll_s)
