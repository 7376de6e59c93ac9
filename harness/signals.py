"""SIGINT, SIGTERM and SIGHUP unwind the harness the same way: as a KeyboardInterrupt that names its signal.

CI cancellation sends SIGTERM and a closed terminal SIGHUP; by default either ends Python at once, past every
``finally``, and a training in its own process session runs on, re-parented to PID 1. Raised as
``Interrupted`` instead, they reach the executors' cleanup (kill the process group, remove the container),
which records what it stopped, and the entry points exit 128+N with one line.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """A handled signal, raised in the main thread; ``stopped`` lists what the cleanup on the way stopped."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.stopped: list[str] = []

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def __str__(self) -> str:
        name = signal.Signals(self.signum).name
        return f"{name}: stopped {'; '.join(self.stopped)}" if self.stopped else f"{name}: no training was running"


def note_stopped(exc: BaseException, what: str) -> None:
    """Record on a signal's exception what the cleanup stopped (nothing for any other exception)."""
    if isinstance(exc, Interrupted):
        exc.stopped.append(what)


def describe(exc: KeyboardInterrupt) -> tuple[str, int]:
    """The one line and the exit code an entry point gives for an interrupt (a bare Ctrl-C is SIGINT)."""
    exc = exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)
    return f"interrupted by {exc}", exc.exit_code


def _raise(signum: int, frame: object) -> None:
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupts() -> Iterator[None]:
    """Within: the handled signals raise ``Interrupted`` (main thread only; nests, restoring what was there).

    A signal ignored on entry stays ignored: ``nohup`` (SIGHUP), or SIGINT in a shell's background job."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise) for sig in HANDLED if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)  # None: set outside Python


@contextlib.contextmanager
def deferred() -> Iterator[list[int]]:
    """Within: a handled signal is recorded, not raised, so what runs there (a clean-up the first signal started:
    the DELETE of a job) is not cut off by a second one. On the way out the first recorded is raised as
    ``Interrupted``, unless an exception is already on its way (the first signal's own, when this runs in a
    ``finally``: it goes on, carrying what its clean-up stopped). Main thread only, as ``interrupts``; elsewhere it
    defers nothing."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def record(signum: int, _frame: object) -> None:
        got.append(signum)

    on_its_way = sys.exc_info()[1] is not None
    previous = {sig: signal.signal(sig, record) for sig in HANDLED if signal.getsignal(sig) is not signal.SIG_IGN}
    try:
        yield got
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if got and not on_its_way:
        raise Interrupted(got[0])
