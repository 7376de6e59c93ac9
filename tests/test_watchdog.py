"""No training outlives its harness (``harness.training.watchdog``): a harness SIGKILLed mid-training runs no cleanup,
so the watchdog in the training's session ends every process of it, those that left the process group (as Ray's
daemons do) and those re-parented when their parent died included. The real trainings under SIGKILL: test_long_runs
(local) and test_docker_daemon (the container)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from builders import default_signals

from harness.training.watchdog import ray_auth, watched

# A training that leaves behind what Ray's daemons are: one process in a process group of its own (setpgid) and one
# re-parented (its parent exits at once), both in the training's session; each appends to a file while it lives.
ESCAPING = """
import os, sys, time
from pathlib import Path

beats = Path(sys.argv[1])


def beat(name):
    while True:
        with open(beats / name, "a") as f:
            f.write("x")
        time.sleep(0.05)


if os.fork() == 0:
    os.setpgid(0, 0)  # a process group of its own, like Ray's gcs_server and raylet
    beat(f"grouped.{os.getpid()}")
if os.fork() == 0:
    if os.fork() == 0:
        beat(f"orphan.{os.getpid()}")  # re-parented once its parent has gone
    os._exit(0)
beat(f"main.{os.getpid()}")
"""

HARNESS = """
import sys
from pathlib import Path
from harness.artifacts.rundir import RunDir
from harness.scenario.model import ExecutorSettings
from harness.training.executors.local import LocalExecutor
from harness.training.launch import Launch

work = Path(sys.argv[1])
run = RunDir(work / "run")
run.root.mkdir()
launch = Launch(module="escaping", args=[str(work / "beats")], env={}, workdir=work)
print(LocalExecutor().execute(launch, run, ExecutorSettings(), {}))
"""


def _beating(beats: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in beats.iterdir()}


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


@pytest.mark.integration
def test_a_sigkilled_harness_leaves_no_process_of_its_training(tmp_path):
    """The harness (the local executor in a process of its own) SIGKILLed while the training and its two escapees
    beat: within the watchdog's grace every one of them is gone and no file under the run grows any more. Before,
    all three went on writing for as long as they liked."""
    (tmp_path / "escaping.py").write_text(textwrap.dedent(ESCAPING))
    (tmp_path / "beats").mkdir()
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path)], preexec_fn=default_signals)
    deadline = time.monotonic() + 60
    while len(_beating(tmp_path / "beats")) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    pids = [int(name.split(".")[1]) for name in _beating(tmp_path / "beats")]
    assert len(pids) == 3 and all(map(_alive, pids)), pids
    harness.send_signal(signal.SIGKILL)
    harness.wait()
    deadline = time.monotonic() + 15
    while any(map(_alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(map(_alive, pids)), [p for p in pids if _alive(p)]
    before = _beating(tmp_path / "beats")
    time.sleep(0.5)
    assert _beating(tmp_path / "beats") == before
    assert "the harness is gone: ending the training" in (tmp_path / "run" / "train.log").read_text()


@pytest.mark.integration
@pytest.mark.parametrize(
    ("program", "code"),
    [
        ("import sys; sys.exit(3)", 3),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", -signal.SIGSEGV),
        ("import os, signal; os.kill(os.getpid(), signal.SIGKILL)", -signal.SIGKILL),  # the OOM killer's
    ],
)
def test_the_watchdog_ends_as_its_training_ended_and_forwards_sigterm(tmp_path, program, code):
    """Its exit code, or killed by the same signal (crash classification reads it; no core file of the watchdog);
    SIGTERM to the watchdog alone (docker's init signals its child only) reaches the training."""
    read, write = os.pipe()
    argv = watched(sys.executable, f"fd:{read}", [sys.executable, "-c", program])
    proc = subprocess.run(argv, pass_fds=(read,), cwd=tmp_path, timeout=60, check=False)
    assert proc.returncode == code and not list(tmp_path.iterdir())
    sleeper = subprocess.Popen(
        watched(sys.executable, f"fd:{read}", [sys.executable, "-c", "import time; time.sleep(60)"]), pass_fds=(read,)
    )
    time.sleep(1.0)
    sleeper.send_signal(signal.SIGTERM)
    assert sleeper.wait(timeout=30) == -signal.SIGTERM
    os.close(read)
    os.close(write)


def test_every_ray_cluster_a_training_starts_asks_for_a_token_of_its_own():
    """Each training gets Ray's token authentication and a fresh token; one that joins a cluster (RAY_ADDRESS) or is
    given a token keeps what it was given."""
    one, two = ray_auth({"PATH": "/bin"}), ray_auth({"PATH": "/bin"})
    assert one["RAY_AUTH_MODE"] == two["RAY_AUTH_MODE"] == "token" and one["PATH"] == "/bin"
    assert len(one["RAY_AUTH_TOKEN"]) == 64 and one["RAY_AUTH_TOKEN"] != two["RAY_AUTH_TOKEN"]
    for given in ({"RAY_ADDRESS": "10.0.0.1:6379"}, {"RAY_AUTH_TOKEN": "theirs"}, {"RAY_AUTH_MODE": "disabled"}):
        assert ray_auth(given) == given
