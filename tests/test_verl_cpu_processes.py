"""Process hygiene of verl's real trainer on CPU: Ray's daemons, workers and actors (17-19 processes) are
all gone after a run killed by its timeout and after Ctrl-C (SIGINT) to the harness. The heavy tier (~3 min):
``pytest tests/test_verl_cpu_processes.py --harness-heavy``; the tiny workload's timeout and signal paths run in
the everyday suite (test_e2e, test_long_runs)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from builders import default_signals

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.heavy


def ours(results: Path) -> list[psutil.Process]:
    """The processes of runs under ``results``: every verl and Ray process inherits the run's metrics path."""
    out = []
    for p in psutil.process_iter():
        try:
            if p.environ().get("VERL_FILE_LOGGER_PATH", "").startswith(str(results)):
                out.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return out


def raylets() -> int:
    """Host-wide (other users may start Ray meanwhile: reported, not asserted)."""
    return sum(1 for p in psutil.process_iter(["name"]) if p.info["name"] == "raylet")


def scenario(tmp_path: Path, timeout_s: int) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "real_fsdp_l0.yaml").read_text())
    doc["executor"] = {"timeout_s": timeout_s}
    path = tmp_path / "scenarios" / "real_fsdp_l0.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start(tmp_path: Path, timeout_s: int) -> tuple[subprocess.Popen[str], Path]:
    results = tmp_path / "res"
    argv = [sys.executable, "-m", "harness", "run", str(scenario(tmp_path, timeout_s)), "--results", str(results)]
    proc = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=default_signals,
    )
    return proc, results


def wait_for_ray(proc: subprocess.Popen[str], results: Path, limit_s: float = 240) -> int:
    """The run's process count once Ray's workers are up (the trainer's TaskRunner among them)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        procs = ours(results)
        if any("TaskRunner" in " ".join(p.cmdline()) for p in procs if p.is_running()):
            return len(procs)
        time.sleep(1)
    raise AssertionError(f"Ray never came up within {limit_s}s (harness exit code {proc.poll()})")


def gone(results: Path, within_s: float = 20) -> list[psutil.Process]:
    deadline = time.monotonic() + within_s
    while (left := ours(results)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left


def test_a_run_killed_by_its_timeout_leaves_no_process(tmp_path):
    before = raylets()
    proc, results = start(tmp_path, timeout_s=75)
    running = wait_for_ray(proc, results)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 2, out[-2000:]
    assert "timed out after 75s" in out
    assert running >= 5, f"only {running} processes seen while Ray ran"
    assert gone(results) == [], "processes left after the timeout"
    print(f"timeout: {running} processes while running, 0 after; raylets {before} before, {raylets()} after")


def test_ctrl_c_leaves_no_process(tmp_path):
    before = raylets()
    proc, results = start(tmp_path, timeout_s=900)
    running = wait_for_ray(proc, results)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0, out[-2000:]
    assert gone(results) == [], "processes left after Ctrl-C"
    print(f"SIGINT: {running} processes while running, 0 after; raylets {before} before, {raylets()} after")


def test_a_sigkilled_harness_leaves_no_process(tmp_path):
    """SIGKILL to the harness runs none of its cleanup: Ray's daemons, in process groups of their own, and the
    trainer's processes went on. The training's watchdog (in its session) ends them all."""
    proc, results = start(tmp_path, timeout_s=900)
    running = wait_for_ray(proc, results)
    proc.kill()
    proc.communicate(timeout=60)
    assert gone(results, within_s=40) == [], "processes left after the harness was SIGKILLed"
    print(f"SIGKILL: {running} processes while running, 0 after")
