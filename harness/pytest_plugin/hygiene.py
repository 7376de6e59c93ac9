"""No training outlives the session: containers of dead harnesses swept at the start, an orphaned xdist worker
stops itself, an interrupted controller SIGTERMs its workers, and SIGTERM/SIGHUP end the session with 128+N."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness.pytest_plugin.state import (
    write_line,
)
from harness.signals import Interrupted, describe, note_stopped
from harness.training.registry import EXECUTORS

_INTERRUPTS: list[KeyboardInterrupt] = []  # pytest_keyboard_interrupt -> pytest_sessionfinish


def interrupt_when_orphaned() -> None:
    """An xdist worker whose controller is gone (signalled, SIGKILLed) SIGTERMs itself: its training is stopped
    instead of going on, and the next one starting, under PID 1."""
    controller = os.getppid()

    def watch() -> None:
        while os.getppid() == controller:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="harness-orphan-watch", daemon=True).start()


@pytest.hookimpl(trylast=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Sweep what dead harnesses left (a SIGKILLed one's containers) before anything runs, one line each."""
    if hasattr(session.config, "workerinput"):
        return  # the controller sweeps
    for executor in EXECUTORS.values():
        for line in executor.sweep():
            write_line(session.config, f"harness: {line}")


def pytest_collection_finish(session: pytest.Session) -> None:
    """The clusters the collected scenarios name themselves (``executor.ray.address``): their jobs of dead harnesses
    stopped too (the session start swept those of ``--ray-address``); on each worker under xdist, where they are
    collected, one line each."""
    scenarios = {id(s): s for s in (getattr(i, "scenario", None) for i in session.items) if s is not None}
    settings = [s.executor for s in scenarios.values()]
    if any(getattr(s.options("ray"), "address", None) for s in settings):
        for line in EXECUTORS["ray"].sweep(settings):
            write_line(session.config, f"harness: {line}")


def pytest_keyboard_interrupt(excinfo: pytest.ExceptionInfo[BaseException]) -> None:
    if isinstance(excinfo.value, KeyboardInterrupt):  # not pytest.exit(), which comes here too
        _INTERRUPTS.append(excinfo.value)


class WorkersStop:
    """On the xdist controller, interrupted: xdist SIGKILLs a worker still busy 10 s later, leaving its training
    to PID 1. SIGTERM the workers (the controller's only children) first: they stop their trainings like
    Ctrl-C and exit."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        if self.config.pluginmanager.get_plugin("dsession") is None:
            return  # not distributed: this process runs the trainings itself
        me, signalled = str(os.getpid()), []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "stat").read_text().rpartition(")")[2].split()[1] == me:
                    os.kill(int(proc.name), signal.SIGTERM)
                    signalled.append(proc.name)
            except (OSError, IndexError):
                continue
        if signalled:
            note_stopped(excinfo.value, f"xdist workers {', '.join(signalled)} (each stops its own training)")


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """After an interrupt: one line saying what was stopped; SIGTERM and SIGHUP exit 128+N (SIGINT keeps
    pytest's 2)."""
    while _INTERRUPTS:
        exc = _INTERRUPTS.pop()
        line, code = describe(exc)
        write_line(session.config, f"harness: {line}")
        if isinstance(exc, Interrupted) and exc.signum != signal.SIGINT:
            session.exitstatus = code
