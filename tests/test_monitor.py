"""The run monitor without a training: a dump tree grown by a thread, a fake statvfs, metrics lines by hand."""

from __future__ import annotations

import io
import json
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console

from harness.artifacts.rundir import RunDir
from harness.cli.console import LiveBars
from harness.scenario.blocks import DiskBudget
from harness.training import dumpfs
from harness.training.monitor import (
    Cap,
    Monitor,
    PeriodicLines,
    Progress,
    WatchSettings,
    dump_cap,
    parse_size,
    tree_size,
)

MB = 1_000_000


def test_the_cap_is_the_tightest_budget_with_a_margin_or_the_runners_cap():
    budget = DiskBudget(max_total="20MB", max_per_step="6MB")
    assert dump_cap(budget, profiled_steps=2, stages=3, ranks=2, runner=None) == Cap(
        24 * MB, "2 x budgets.disk.max_per_step x 2 profiled steps"
    )
    assert str(dump_cap(DiskBudget(max_total="1MB"), 1, 1, 1, None)) == "cap 2.00 MB = 2 x budgets.disk.max_total"
    stage = dump_cap(DiskBudget(max_per_stage="1MB"), 2, 3, 1, None)
    assert stage == Cap(12 * MB, "2 x budgets.disk.max_per_stage x 3 stages x 2 profiled steps")
    runner = Cap(5 * MB, "the runner's --max-dump")
    assert dump_cap(budget, 2, 3, 2, runner) is runner
    assert dump_cap(DiskBudget(), 2, 3, 2, None) is None


def test_watch_reads_options_before_the_environment(monkeypatch):
    monkeypatch.setenv("HARNESS_MAX_DUMP", "3MB")
    monkeypatch.setenv("HARNESS_MIN_FREE", "10MB")
    assert WatchSettings.configure() == WatchSettings(
        max_dump=Cap(3 * MB, "the runner's HARNESS_MAX_DUMP"), min_free=10 * MB
    )
    watch = WatchSettings.configure("1GiB", "2GB")
    assert watch.max_dump == Cap(2**30, "the runner's --max-dump") and watch.min_free == 2_000_000_000
    with pytest.raises(ValueError, match=r"not a size: 'lots' \(e\.g\. 500MB"):
        parse_size("lots")


def test_tree_size_counts_regular_files_and_never_follows_symlinks(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "x.pt").write_bytes(b"0" * 1000)
    (tmp_path / "a" / "y.json").write_bytes(b"0" * 24)
    os.symlink("/", tmp_path / "a" / "root")  # a walk of / if followed
    os.symlink(tmp_path / "a" / "b" / "x.pt", tmp_path / "link.pt")
    os.mkfifo(tmp_path / "fifo")
    assert tree_size(tmp_path) == (1024, 2)
    assert tree_size(tmp_path / "absent") == (0, 0)
    assert tree_size(tmp_path / "a" / "root") == (0, 0)


def _run(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "tiny_case" / "on")
    run.root.mkdir(parents=True)
    return run


def _training(run: RunDir, stop: threading.Event, chunks: int, steps: int = 3) -> None:
    """Logs a step, then writes 100 kB per 0.1 s into a dump dir until stopped, as a runaway tensor dump does."""
    with run.metrics.open("wb", buffering=0) as m:
        m.write(b'{"step": 1, "data": {"timing_s/step": 0.1}}\n{"step": 2, "da')  # a line cut mid-write
        leaf = run.dumps / "step_2" / "actor_update" / "step0" / "rank0" / "dump_tensor_data"
        leaf.mkdir(parents=True)
        for i in range(chunks):
            if stop.wait(0.1):
                return
            (leaf / f"t{i}.pt").write_bytes(b"0" * 100_000)


def test_a_growing_dump_is_stopped_at_the_cap_and_the_verdict_says_how_far_it_got(tmp_path):
    run, shown = _run(tmp_path), []
    watch = WatchSettings(show=shown.append, interval_s=0.2)
    with Monitor(run, "tiny_case", "local", 3, Cap(MB, "2 x budgets.disk.max_total"), watch) as monitor:
        _training(run, monitor.stop, chunks=100)
    assert monitor.stop.is_set() and monitor.stopped and monitor.stopped.kind == "cap"
    line = monitor.stopped.line
    assert line.startswith("stopped the on run at ") and "(cap 1.00 MB = 2 x budgets.disk.max_total) after " in line
    assert "global step 2 of 3, growing " in line and " MB/s; " in line and line.endswith(" files kept")
    assert 1 * MB < tree_size(run.dumps)[0] < 3 * MB  # stopped while growing, not at the end (10 MB)
    assert shown[0].bytes == 0 and shown[-1].outcome == "stopped by the monitor" and shown[-1].done == 1
    assert shown[-1].step_s == 0.1 and shown[-1].left_s == pytest.approx(0.2)  # from verl's timing_s/step


def test_free_space_under_the_floor_stops_the_run_as_an_infrastructure_verdict(tmp_path):
    run = _run(tmp_path)
    free = {"bytes": 10 * 2**30}
    fake = lambda path: SimpleNamespace(f_bavail=free["bytes"] // 4096, f_frsize=4096)  # noqa: E731
    watch = WatchSettings(min_free=2**30, interval_s=0.1, statvfs=fake)
    with Monitor(run, "tiny_case", "docker", 3, None, watch) as monitor:
        assert not monitor.stop.wait(0.3)
        free["bytes"] = 500 * MB
        assert monitor.stop.wait(2)
    assert monitor.stopped and monitor.stopped.kind == "floor"
    said = f"stopped: 500.00 MB free on the results filesystem ({run.root}) < the floor 1073.74 MB"
    assert monitor.stopped.line.startswith(said)


def test_an_unstopped_run_has_no_verdict_and_ends_with_its_last_step(tmp_path):
    run, shown = _run(tmp_path), []
    with Monitor(
        run, "tiny_case", "local", 2, Cap(10 * MB, "x"), WatchSettings(show=shown.append, interval_s=0.1)
    ) as m:
        run.metrics.write_text("".join(json.dumps({"step": n, "data": {}}) + "\n" for n in (1, 2)))
        time.sleep(0.3)
    assert m.stopped is None and not m.stop.is_set()
    assert shown[-1].done == 2 and shown[-1].outcome == "ended"
    assert shown[-1].line() == (
        f"tiny_case on (local): global step 2 of 2, {shown[-1].elapsed_s:.0f}s, ended, dumps 0.00 MB in 0 files "
        "of cap 10.00 MB"
    )


def _progress(elapsed: float, done: int = 1, outcome: str | None = None) -> Progress:
    return Progress(
        "tiny_case", "on", "local", 5, done, 11.0, elapsed, 1_500_000, 12, 250_000.0, Cap(2 * MB, "x"), outcome
    )


def test_periodic_lines_for_logs_first_every_n_seconds_and_last():
    out: list[str] = []
    show = PeriodicLines(out.append, every_s=10)
    for t in (0, 4, 9, 11, 15, 22):
        show(_progress(t))
    show(_progress(23, done=5, outcome="ended"))
    assert [line.split(", ")[1] for line in out] == ["0s", "11s", "22s", "23s"]
    assert out[1] == (
        "[harness] tiny_case on (local): global step 2 of 5, 11s, ~44s left, dumps 1.50 MB in 12 files of cap 2.00 MB "
        "(+0.25 MB/s)"
    )


def test_live_bars_in_a_terminal_leave_the_last_line():
    buf = io.StringIO()
    bars = LiveBars(Console(file=buf, force_terminal=True, width=160))
    bars(_progress(3))
    bars(_progress(6, done=5, outcome="ended"))
    text = buf.getvalue()
    assert "tiny_case on (local)" in text and "━" in text  # the bar
    assert "tiny_case on (local): global step 5 of 5, 6s, ended, dumps 1.50 MB in 12 files of cap 2.00 MB" in text
    assert not bars.tasks and not bars.bars.live.is_started


ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root (CI runs as root)")


@ROOT_ONLY
def test_a_bounded_dumps_dir_stops_writes_at_its_size_and_keeps_the_tree_as_it_was(tmp_path):
    """A burst no walk sees: the tmpfs refuses writes past the cap and its margin; what was written is then on the
    results filesystem as it was (a link stays a link, a FIFO a FIFO, nothing followed), nothing left mounted."""
    dumps = tmp_path / "on" / "dumps"
    with dumpfs.bounded(dumps, MB) as how:
        assert how is not None and how.size == dumpfs.plan(MB).size and dumpfs.mounted_under(tmp_path) == [dumps]
        written = 0
        with pytest.raises(OSError, match="No space left on device"), (dumps / "t.pt").open("wb") as f:
            for _ in range(100):  # 10 MB at once
                written += f.write(b"0" * 100_000)
                f.flush()
        (dumps / "step_2").mkdir()
        os.symlink("/", dumps / "step_2" / "root")
        os.mkfifo(dumps / "step_2" / "dump.json")
    assert dumpfs.mounted_under(tmp_path) == []
    assert MB < tree_size(dumps)[0] <= MB + dumpfs.MIN_MARGIN + dumpfs.PAGE
    assert os.readlink(dumps / "step_2" / "root") == "/" and (dumps / "step_2" / "dump.json").is_fifo()
    assert sorted(p.name for p in tmp_path.joinpath("on").iterdir()) == ["dumps"]  # no copy left beside it
    with dumpfs.bounded(tmp_path / "empty" / "dumps", MB):
        pass
    assert not (tmp_path / "empty" / "dumps").exists()  # nothing dumped: no dumps dir, as unbounded


@ROOT_ONLY
def test_a_tmpfs_a_killed_harness_left_is_released_before_new_runs(tmp_path):
    dumps = tmp_path / "tiny_case" / "on" / "dumps"
    context = dumpfs.bounded(dumps, MB)
    context.__enter__()  # and never left: the harness was SIGKILLed
    assert dumpfs.mounted_under(tmp_path) == [dumps]
    dumpfs.release_stale(tmp_path / "tiny_case")
    assert dumpfs.mounted_under(tmp_path) == []


def test_without_root_or_memory_the_cap_is_polled_and_says_so(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert dumpfs.plan(2 * MB).line() == (
        "dump cap 2.00 MB polled, not held: mounting a size-bounded tmpfs for the dumps needs root; a burst between "
        "two of the monitor's walks can overshoot it"
    )
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(dumpfs, "_available_memory", lambda: 8 * MB)
    assert dumpfs.plan(2 * MB).why == "a 3.05 MB tmpfs is over a quarter of the memory (8.00 MB available)"
    assert dumpfs.margin(80 * MB) == 10 * MB  # an eighth of a larger cap


def test_a_bounded_tree_whose_pages_fill_its_tmpfs_is_the_caps_verdict_even_after_the_run_ended(tmp_path):
    """Many small files fill a tmpfs's pages before their bytes pass the cap; the failed write may end the run before
    the next walk: the monitor's last look judges it, so it is the disk check's failure, not msprobe's crash."""
    run = _run(tmp_path)
    bounded = dumpfs.Bounded(MB, MB + dumpfs.MIN_MARGIN)
    free = {"bytes": bounded.size}
    fake = lambda path: SimpleNamespace(f_bavail=free["bytes"] // 4096, f_frsize=4096)  # noqa: E731
    watch = WatchSettings(min_free=0, interval_s=10, statvfs=fake)  # its fake free space is no floor's concern
    with Monitor(run, "tiny_case", "local", 3, Cap(MB, "2 x budgets.disk.max_total"), watch, bounded) as monitor:
        free["bytes"] = 4096  # full, in the second before the next walk, and the run ends
    assert monitor.stopped and monitor.stopped.kind == "cap"
    assert monitor.stopped.line.startswith(
        "stopped the on run: its dumps filled their 2.05 MB tmpfs to 2.04 MB in "
        "pages, 0.00 MB in files (cap 1.00 MB = 2 x budgets.disk.max_total) after"
    )
