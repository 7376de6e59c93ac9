"""A watcher beside every running training: a runaway dump is stopped while it grows, and a person sees progress.

Every ``interval_s`` it walks the run's dump tree (``os.scandir``, symlinks never followed: bytes and files),
reads the new lines of its verl file-logger metrics (the global step reached) and the free space of the
results filesystem. Past the dump cap it asks the executor to stop the training (what was written stays)
and leaves a line for the disk check to fail on: a tensor dump of the wrong task grew to gigabytes against an
8 MB budget before anything looked at it, and a nightly on 8 NPUs fills the runner's disk for every job on
it. Under the free-space floor it stops the training too, as an infrastructure error. Either way the same
samples feed the live line (``show``).
"""

from __future__ import annotations

import argparse
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import orjson
from pydantic import ByteSize, TypeAdapter, ValidationError

from harness import config
from harness.artifacts.dumpfile import open_regular
from harness.artifacts.figures import mb
from harness.artifacts.rundir import RunDir
from harness.scenario.blocks import DiskBudget
from harness.training.dumpfs import Bounded

MARGIN = 2  # the cap over the budgets: the disk check judges the budgets, the cap only ends a runaway
DEFAULT_MIN_FREE = "1GB"


def parse_size(text: str) -> int:
    """``"500MB"``, ``"2GiB"``, ``"1048576"`` -> bytes; ValueError in one line otherwise."""
    try:
        return int(TypeAdapter(ByteSize).validate_python(text))
    except ValidationError:
        raise ValueError(f"not a size: {text!r} (e.g. 500MB, 2GiB, 1048576)") from None


@dataclass(frozen=True)
class Cap:
    bytes: int
    why: str  # where it comes from, e.g. "2 x budgets.disk.max_total"

    def __str__(self) -> str:
        return f"cap {mb(self.bytes)} = {self.why}"


def dump_cap(budget: DiskBudget, profiled_steps: int, stages: int, ranks: int, runner: Cap | None) -> Cap | None:
    """The tightest of ``MARGIN`` x what the budgets allow in total and the runner's cap; None: no cap."""
    derived = [
        (budget.max_total, 1, "budgets.disk.max_total"),
        (budget.max_per_step, profiled_steps, f"budgets.disk.max_per_step x {profiled_steps} profiled steps"),
        (
            budget.max_per_stage,
            stages * profiled_steps,
            f"budgets.disk.max_per_stage x {stages} stages x {profiled_steps} profiled steps",
        ),
        (budget.max_per_rank, ranks, f"budgets.disk.max_per_rank x {ranks} ranks"),
    ]
    caps = [Cap(MARGIN * int(limit) * n, f"{MARGIN} x {why}") for limit, n, why in derived if limit is not None]
    caps += [runner] if runner else []
    return min(caps, key=lambda c: c.bytes, default=None)


@dataclass(frozen=True)
class Progress:
    """One sample of a running training, as the live line shows it."""

    scenario: str
    mode: str
    executor: str
    steps: int  # the training's global steps
    done: int  # the last global step in its metrics
    step_s: float | None  # the mean of its logged step times (timing_s/step), for the estimate of what is left
    elapsed_s: float
    bytes: int  # its dump tree
    files: int
    rate: float  # dump bytes per second since the previous sample
    cap: Cap | None
    outcome: str | None = None  # once the training is over: "ended", "stopped by the monitor", "interrupted"

    @property
    def current(self) -> int:
        """The global step under way (the last one, once all are logged)."""
        return min(self.done + 1, self.steps)

    @property
    def left_s(self) -> float | None:
        """From the step times verl logs: the elapsed time also holds start-up (imports, model building)."""
        return self.step_s * (self.steps - self.done) if self.step_s is not None else None

    @property
    def label(self) -> str:
        return f"{self.scenario} {self.mode} ({self.executor})"

    def detail(self) -> str:
        left = f"~{self.left_s:.0f}s left" if self.left_s is not None else "? left"
        dumps = f"dumps {mb(self.bytes)} in {self.files} files" + (f" of cap {mb(self.cap.bytes)}" if self.cap else "")
        rate = f" (+{mb(self.rate)}/s)" if self.rate >= 5000 and not self.outcome else ""  # 0.01 MB/s, rounded
        step = f"global step {self.current} of {self.steps}"
        return f"{step}, {self.elapsed_s:.0f}s, {self.outcome or left}, {dumps}{rate}"

    def line(self) -> str:
        return f"{self.label}: {self.detail()}"


class PeriodicLines:
    """The live line where nothing can be redrawn (a CI log, pytest's terminal): the first sample, then one
    line every ``every_s``, and the last."""

    def __init__(self, write: Callable[[str], None], every_s: float) -> None:
        self.write, self.every_s = write, every_s
        self.last: dict[tuple[str, str], float] = {}

    def __call__(self, p: Progress) -> None:
        key = (p.scenario, p.mode)
        if p.outcome or key not in self.last or p.elapsed_s - self.last[key] >= self.every_s:
            self.last[key] = p.elapsed_s
            self.write(f"[harness] {p.line()}")


Show = Callable[[Progress], None]


@dataclass(frozen=True)
class WatchSettings:
    """How this harness watches its runs: the runner's settings (option, else environment) and the live line."""

    max_dump: Cap | None = None
    min_free: int = parse_size(DEFAULT_MIN_FREE)
    show: Show | None = None
    interval_s: float = 1.0
    statvfs: Callable[[str], os.statvfs_result] = os.statvfs

    @classmethod
    def configure(
        cls, max_dump: str | None = None, min_free: str | None = None, show: Show | None = None
    ) -> WatchSettings:
        """From the entry point's options, else ``HARNESS_MAX_DUMP`` / ``HARNESS_MIN_FREE``; ValueError naming the
        option or the variable when one is not a size (a cap of 0 too)."""
        cap_text, cap_from = (max_dump, "--max-dump") if max_dump else (config.MAX_DUMP.get(), config.MAX_DUMP.name)
        free, free_from = (min_free, "--min-free") if min_free else (config.MIN_FREE.get(), config.MIN_FREE.name)
        cap = Cap(_size(cap_text, cap_from, cap=True), f"the runner's {cap_from}") if cap_text else None
        return cls(max_dump=cap, min_free=_size(free or DEFAULT_MIN_FREE, free_from), show=show)


def _size(text: str, where: str, cap: bool = False) -> int:
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    if cap and size == 0:
        raise ValueError(f"{where}: a cap of 0 bytes stops every run as it starts (unset it for no cap)")
    return size


def positive_seconds(text: str) -> float:
    """``--progress-every``: seconds, finite and above 0 (argparse's and pytest's option type: one line, exit 2)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds > 0):
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return seconds


@dataclass(frozen=True)
class Stop:
    """Why the monitor stopped a run (no verdict of its own): ``cap`` is a disk check failure, ``floor`` an
    infrastructure error."""

    kind: Literal["cap", "floor"]
    line: str


class Monitor:
    """``with Monitor(...) as m: executor.execute(..., stop=m.stop)``; then ``m.stopped`` (None: not stopped).
    ``bounded``: the dumps' size-bounded filesystem (``harness.training.dumpfs``), where there is one: filled, it
    is the cap's stop too, and a run that ended itself on it (a write failed) is judged so, not as a crash."""

    def __init__(
        self,
        run: RunDir,
        scenario: str,
        executor: str,
        steps: int,
        cap: Cap | None,
        watch: WatchSettings,
        bounded: Bounded | None = None,
    ) -> None:
        self.run, self.cap, self.watch = run, cap, watch
        self.bounded = bounded if bounded is not None and bounded.size is not None else None
        self.stop = threading.Event()
        self.stopped: Stop | None = None
        self._sample = Progress(scenario, run.mode, executor, steps, 0, None, 0.0, 0, 0, 0.0, cap)
        self._metrics = _MetricsTail(run.metrics)
        self._previous = (0.0, 0)  # (time, bytes) of the last sample
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"monitor-{scenario}-{run.mode}", daemon=True)
        self._started = 0.0

    def __enter__(self) -> Monitor:
        self._started = time.monotonic()
        self._previous = (self._started, 0)
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        self._ended.set()
        self._thread.join()
        last = self._observe()
        if self.stopped is None and self.bounded is not None:  # filled between two walks: the run may have ended
            self.stopped = self._capped(last)  # itself, on a failed write
        if self.stopped:  # what the stopped run left, now that it is gone
            line = f"{self.stopped.line}; {mb(last.bytes)} in {last.files} files kept"
            self.stopped = replace(self.stopped, line=line)
        if self.watch.show:
            outcome = "stopped by the monitor" if self.stopped else "ended"
            if kind is not None:
                outcome = "interrupted" if issubclass(kind, KeyboardInterrupt) else "failed to run"
            self.watch.show(replace(last, outcome=outcome))

    def _loop(self) -> None:
        wait = 0.0
        while not self._ended.wait(wait):
            began = time.monotonic()
            progress = self._observe()
            self._judge(progress)
            if self.watch.show:
                self.watch.show(progress)
            # a huge tree is walked less often: the walk never takes more than a fifth of the time
            wait = max(self.watch.interval_s, 5 * (time.monotonic() - began))

    def _observe(self) -> Progress:
        now = time.monotonic()
        size, files = tree_size(self.run.dumps)
        t0, b0 = self._previous
        rate = (size - b0) / (now - t0) if now > t0 else 0.0
        self._previous = (now, size)
        self._metrics.read()
        self._sample = replace(
            self._sample,
            done=self._metrics.last,
            step_s=self._metrics.mean_step_s(),
            elapsed_s=now - self._started,
            bytes=size,
            files=files,
            rate=rate,
        )
        return self._sample

    def _judge(self, p: Progress) -> None:
        if self.stop.is_set():
            return
        self.stopped = self._capped(p)
        where = f"after {p.elapsed_s:.1f} s, global step {p.current} of {p.steps}"
        if (
            self.stopped is None
            and (free := _free(self.watch.statvfs, self.run.root)) is not None
            and (free < self.watch.min_free)
        ):
            self.stopped = Stop(
                "floor",
                f"stopped: {mb(free)} free on the results filesystem ({self.run.root}) < the floor "
                f"{mb(self.watch.min_free)} (HARNESS_MIN_FREE / --min-free) {where}; its dumps held {mb(p.bytes)}",
            )
        if self.stopped:
            self.stop.set()

    def _capped(self, p: Progress) -> Stop | None:
        """The cap's stop: the dump tree past the cap, or (bounded) the pages of its files past it on their tmpfs
        (many small files fill the margin before their bytes pass the cap)."""
        if not self.cap:
            return None
        where = f"after {p.elapsed_s:.1f} s, global step {p.current} of {p.steps}"
        size = (self.bounded.size or 0) if self.bounded else 0
        if p.bytes > self.cap.bytes:
            held = f", held by a {mb(size)} tmpfs" if size else ""
            return Stop(
                "cap", f"stopped the {p.mode} run at {mb(p.bytes)} ({self.cap}{held}) {where}, growing {mb(p.rate)}/s"
            )
        if size and (free := _free(self.watch.statvfs, self.run.dumps)) is not None and size - free > self.cap.bytes:
            return Stop(
                "cap",
                f"stopped the {p.mode} run: its dumps filled their {mb(size)} tmpfs to {mb(size - free)} in pages, "
                f"{mb(p.bytes)} in files ({self.cap}) {where}",
            )
        return None


def _free(statvfs: Callable[[str], os.statvfs_result], path: Path) -> int | None:
    try:
        st = statvfs(str(path))
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def tree_size(top: Path) -> tuple[int, int]:
    """Bytes and number of the regular files under ``top``; symlinks (``top`` too) are not followed, vanished
    entries skipped."""
    total = files = 0
    pending = [] if top.is_symlink() else [str(top)]
    while pending:
        try:
            entries = os.scandir(pending.pop())
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        pending.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
                        files += 1
                except OSError:
                    continue
    return total, files


class _MetricsTail:
    """The last global step and the step times of a verl file-logger JSONL, read as it is appended to."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.partial = path, 0, b""
        self.last = 0
        self.step_times: dict[int, float] = {}

    def read(self) -> None:
        try:
            with open_regular(self.path) as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            try:
                rec = orjson.loads(line)
                step = int(rec["step"])
                if "timing_s/step" in rec["data"]:
                    self.step_times[step] = float(rec["data"]["timing_s/step"])
            except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                continue  # the overhead check words a bad line; the live line only needs what it can read
            self.last = max(self.last, step)

    def mean_step_s(self) -> float | None:
        return sum(self.step_times.values()) / len(self.step_times) if self.step_times else None
