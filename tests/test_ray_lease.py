"""The harness's lease on a Ray job (harness.training.executors.ray_lease): a job whose harness stops renewing it
stops itself within a bound; a renewing harness, however late its host's clock or however long the run, never sees its
job stopped. The real thing (the harness SIGKILLed mid-training on a two-node cluster) is in tests/test_ray_nodes.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from harness import config
from harness.errors import HarnessError
from harness.scenario.blocks import ExecutorSettingsBase
from harness.scenario.model import ExecutorSettings
from harness.scenario.settings.ray import RayRuntime
from harness.training.executors import ray_entry, ray_lease
from harness.training.executors.ray_job import sweep_addresses


def test_a_lease_is_stale_only_once_unchanged_for_longer_than_its_bound():
    lease = ray_lease.Lease("0\n", now=100.0, stale_s=30)
    assert not lease.observe("0\n", 129.0)
    assert not lease.observe("1\n", 129.5)  # renewed: the clock starts again
    assert not lease.observe("1\n", 159.0)
    assert lease.observe("1\n", 160.0)
    assert lease.silent_for(160.0) == pytest.approx(30.5)


def test_an_absent_lease_is_no_renewal_and_a_first_one_counts():
    lease = ray_lease.Lease(None, now=0.0, stale_s=10)
    assert not lease.observe(None, 5.0)
    assert not lease.observe("0\n", 9.0)  # the harness's first write
    assert not lease.observe(None, 18.0)  # removed (the harness's run over): the time runs from the last change
    assert lease.observe(None, 19.5)


def test_the_time_stamps_of_the_hosts_play_no_part():
    """The contents decide: a harness whose clock is hours behind the head's renews all the same."""
    lease = ray_lease.Lease("7\n", now=0.0, stale_s=10)
    for step, now in enumerate((8.0, 16.0, 24.0), start=8):
        assert not lease.observe(f"{step}\n", now)


def test_a_renewed_lease_holds_and_one_no_longer_renewed_expires_within_its_bound(tmp_path):
    path = tmp_path / ray_lease.FILE
    stale: list[float] = []
    renewal = ray_lease.Renewal(path, every_s=0.1)
    watch = ray_lease.Watch(path, stale_s=0.6, on_stale=stale.append, poll_s=0.05)
    watch.start()
    time.sleep(1.5)  # more than twice the bound: renewed all along
    assert not watch.expired.is_set() and stale == []
    renewal.close()
    assert not path.exists()
    stopped = time.monotonic()
    assert watch.expired.wait(5)
    assert 0.5 < time.monotonic() - stopped < 1.5
    assert len(stale) == 1 and stale[0] > 0.6


def test_renewal_writes_in_place(tmp_path):
    """One inode all along: a shared filesystem's client never holds a name that points at a replaced file."""
    path = tmp_path / ray_lease.FILE
    with ray_lease.Renewal(path, every_s=0.05):
        inode, first = path.stat().st_ino, path.read_text()
        time.sleep(0.3)
        assert path.stat().st_ino == inode and path.read_text() != first



def test_the_renewal_never_writes_through_a_link_left_at_the_leases_name(tmp_path, capsys):
    """The run dir is the job's to write too: a link it leaves at the lease's name is never followed, the file it
    points to (here: one the harness's user owns) never rewritten; said once, the lease then goes stale."""
    path, outside = tmp_path / ray_lease.FILE, tmp_path / "outside.txt"
    outside.write_text("keep me")
    renewal = ray_lease.Renewal(path, every_s=0.05)
    path.unlink()
    path.symlink_to(outside)
    time.sleep(0.4)
    renewal.close()
    assert outside.read_text() == "keep me" and not path.is_symlink()
    err = capsys.readouterr().err.splitlines()
    assert err == [f"harness: cannot renew the Ray job's lease: {path}: a symbolic link: files are written in place, "
                   "never through a link (remove it)"]  # fmt: skip


def test_a_lease_replaced_by_a_directory_is_one_line_never_a_traceback(tmp_path, capsys):
    path = tmp_path / ray_lease.FILE
    renewal = ray_lease.Renewal(path, every_s=0.05)
    path.unlink()
    path.mkdir()
    time.sleep(0.3)
    renewal.close()  # no traceback: the directory is left, said
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"harness: cannot renew the Ray job's lease: {path}: cannot write: ")
    assert err[1:] == [f"harness: the Ray job's lease {path} is not removed: Is a directory"]
    with pytest.raises(HarnessError, match=r"\.ray-lease: cannot write: "):  # before the job: the run's one line
        ray_lease.Renewal(path, every_s=0.05)


@pytest.mark.integration  # a Python process of its own, SIGKILLed
def test_a_sigkilled_renewer_leaves_a_lease_that_expires(tmp_path):
    """The harness's side in a process that is SIGKILLed (no clean-up runs): its lease stays on disk, unchanged,
    and the watch calls it stale within the bound."""
    path = tmp_path / ray_lease.FILE
    code = (
        "import sys, time; from pathlib import Path; from harness.training.executors import ray_lease\n"
        "ray_lease.Renewal(Path(sys.argv[1]), every_s=0.1); print('renewing', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "renewing"
        expired = threading.Event()
        watch = ray_lease.Watch(path, stale_s=1.0, on_stale=lambda _: expired.set(), poll_s=0.05)
        watch.start()
        assert not expired.wait(2.0)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
        killed = time.monotonic()
        assert path.exists()
        assert expired.wait(5)
        assert time.monotonic() - killed < 2.5
    finally:
        proc.kill()
        proc.wait()


def test_the_sweep_covers_the_clusters_of_the_command_and_of_the_scenarios(monkeypatch):
    def ray(address: str | None) -> ExecutorSettingsBase:
        return ExecutorSettings(kind="ray", ray=RayRuntime(address=address))

    monkeypatch.delenv(config.RAY_ADDRESS.name, raising=False)
    assert sweep_addresses([ExecutorSettings(), ExecutorSettingsBase(), ray(None)]) == []
    assert sweep_addresses([ray("http://10.0.0.2:8265"), ray("http://10.0.0.2:8265/")]) == ["http://10.0.0.2:8265"]
    monkeypatch.setenv(config.RAY_ADDRESS.name, "http://10.0.0.9:8265")  # --ray-address sets it
    assert sweep_addresses([ray("http://10.0.0.2:8265")]) == ["http://10.0.0.2:8265", "http://10.0.0.9:8265"]
    monkeypatch.setenv(config.RAY_ADDRESS.name, "garbage")
    assert sweep_addresses([ray("http://10.0.0.2:8265")]) == ["http://10.0.0.2:8265"]


@pytest.fixture
def entry(tmp_path, monkeypatch):
    """The entrypoint's ``run`` on a run dir whose training blocks until interrupted (as verl's driver in
    ``ray.get``); its clean-up recorded, not run (no Ray here)."""
    previous = signal.getsignal(signal.SIGINT)  # run() sets SIGINT's handler: put back after the test
    (tmp_path / ray_entry.MARKER).write_text("job-1")
    done: dict[str, object] = {}

    def training(args, run_dir, expired):
        deadline = time.monotonic() + done.get("train_s", 60)  # type: ignore[operator]
        while time.monotonic() < deadline:
            time.sleep(0.02)
        return 0

    monkeypatch.setattr(ray_entry, "_run", training)
    def abandon(root: str, job: str) -> list[str]:
        done["abandoned"] = (root, job)
        return []

    monkeypatch.setattr(ray_entry, "abandon", abandon)
    argv = ["run", "--run", str(tmp_path), "--node-root", "/scratch/r", "--job", "job-1", "--lease-stale-s", "0.5", "m"]
    yield ray_entry.parser().parse_args(argv), done
    signal.signal(signal.SIGINT, previous)


def test_a_stale_lease_interrupts_the_training_and_cleans_up(entry, tmp_path):
    args, done = entry
    (tmp_path / ray_lease.FILE).write_text("0\n")  # the harness's last renewal before it was killed
    started = time.monotonic()
    with pytest.raises(ray_entry.Failed, match=r"stopped renewing its lease for more than 0\.5s .*no actor of it is"):
        ray_entry.run(args)
    assert time.monotonic() - started < 5  # the 60 s training interrupted
    assert done["abandoned"] == ("/scratch/r", "job-1")


def test_a_renewed_lease_lets_the_training_end_as_it_does(entry, tmp_path):
    args, done = entry
    done["train_s"] = 2.0  # four times the bound
    with ray_lease.Renewal(tmp_path / ray_lease.FILE, every_s=0.1):
        assert ray_entry.run(args) == 0
    assert "abandoned" not in done


def test_the_jobs_own_supervisor_is_no_actor_of_the_training_left(monkeypatch):
    """It carries the job's environment (the run's id) and ends with the entrypoint: measured, the one actor alive
    after a stale lease on the two-node cluster; the training's own still count."""

    class Actor:
        def __init__(self, name: str) -> None:
            self.class_name = name

    found = [(Actor("JobSupervisor"), {}), (Actor("WorkerDict"), {}), (Actor("WorkerDict"), {})]
    monkeypatch.setattr(ray_entry, "run_actors", lambda job, alive_only=False: found)
    assert ray_entry._training_actors("job-1") == ["WorkerDict"]
    found.pop(1), found.pop(1)
    assert ray_entry._training_actors("job-1") == []
