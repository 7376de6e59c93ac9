"""No training outlives the test run: an orphaned xdist worker stops itself, and an interrupted controller SIGTERMs
its workers (``HarnessPlugin`` calls these; it sweeps what dead harnesses left, and ends a signalled run 128+N)."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from harness.signals import note_stopped


def interrupt_when_orphaned() -> None:
    """An xdist worker whose controller is gone (signalled, SIGKILLed) SIGTERMs itself: its training is stopped
    instead of going on, and the next one starting, under PID 1."""
    controller = os.getppid()

    def watch() -> None:
        while os.getppid() == controller:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="harness-orphan-watch", daemon=True).start()


def stop_workers(exc: BaseException) -> None:
    """On the xdist controller, interrupted: xdist SIGKILLs a worker still busy 10 s later, leaving its training
    to PID 1. SIGTERM the workers (the controller's only children) first: they stop their trainings like
    Ctrl-C and exit."""
    me, signalled = str(os.getpid()), []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "stat").read_text().rpartition(")")[2].split()[1] == me:
                os.kill(int(proc.name), signal.SIGTERM)
                signalled.append(proc.name)
        except (OSError, IndexError):
            continue
    if signalled:
        note_stopped(exc, f"xdist workers {', '.join(signalled)} (each stops its own training)")
