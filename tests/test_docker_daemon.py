"""The docker executor against a real Docker daemon (the one DOCKER_HOST names).

With HARNESS_REQUIRE_DOCKER=1 (CI) a daemon that does not answer FAILS these tests; without it they skip.
They make the CPU image themselves when it is missing (`python -m harness image build-cpu`, under a second).
Kept few and short: one pair of real trainings per executor, the rest fail or are stopped within seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from functools import cache
from pathlib import Path
from typing import Any

import docker.errors
import pytest
from builders import default_signals, write_scenario
from docker import DockerClient

from harness.cli.console import sweep
from harness.errors import InfraError
from harness.scenario.loader import load_scenario
from harness.scenario.settings.docker import DockerRuntime
from harness.training.executors.base import PID_LABEL, owner_labels
from harness.training.executors.docker import connect
from harness.training.executors.docker_image import build_cpu_image
from harness.training.runs import LABEL_PREFIX, ensure_runs

pytestmark = pytest.mark.trains

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = os.environ.get("HARNESS_REQUIRE_DOCKER") == "1"
IMAGE = DockerRuntime().image
DOCKER = {"kind": "docker"}
# small but real: two ranks (gloo FileStore, /dev/shm), one profiled step; budgets that neither timing nor the
# install path (msprobe's stack.json records every frame's source path) can flip
SMALL: dict[str, Any] = {
    "world_size": 2,
    "steps": 3,
    "precision_debugger": {"level": "L0", "steps": [2], "stages": ["actor_compute_log_prob", "actor_update"]},
    "budgets": {
        "overhead": {"max_profiled_ratio": 1000, "max_unprofiled_ratio": 100},
        "disk": {"max_total": "1GB", "max_per_step": None},
    },
}


@cache
def _daemon() -> DockerClient | str:
    try:
        client = connect()
    except InfraError as exc:
        return str(exc)
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        build_cpu_image(IMAGE)
    return client


def daemon() -> DockerClient:
    """The daemon's client; fail (CI) or skip (elsewhere) when none answers."""
    client = _daemon()
    if isinstance(client, str):
        if REQUIRED:
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {client}", pytrace=False)
        pytest.skip(f"no Docker daemon (set DOCKER_HOST; CI requires one): {client.split(': ')[0]}")
    return client


def leftovers(client: DockerClient, **labels: str) -> list[str]:
    filters = {"label": [f"{LABEL_PREFIX}.{k}={v}" for k, v in labels.items()]}
    return [c.name for c in client.containers.list(all=True, filters=filters)]


def pytest_run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-q"]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, env=env, timeout=600)


def summary(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.strip().splitlines()[-1]


def tree(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


def test_docker_run_matches_local_run_and_leaves_no_container(tmp_path):
    client = daemon()
    write_scenario(tmp_path, name="docker_same", **SMALL)
    out: dict[str, Path] = {}
    for executor in ("local", "docker"):
        out[executor] = tmp_path / f"res_{executor}"
        proc = pytest_run("scenarios", f"--executor={executor}", f"--harness-results={out[executor]}", "-rs",
                          "--harness-timing=record", cwd=tmp_path)  # fmt: skip
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert summary(proc).startswith("4 passed, 1 skipped"), summary(proc)  # overhead recorded: not a pass
        assert "docker_same::overhead: not gated (--harness-timing record): overhead.wall.profiled " in proc.stdout
    local, dock = (out[e] / "docker_same" for e in ("local", "docker"))

    assert tree(local).keys() == tree(dock).keys()  # the same layout, file for file
    dumps = [k for k in tree(local) if k.startswith("on/dumps/")]
    assert any(k.endswith("rank1/dump.json") for k in dumps)
    for key in dumps:  # byte for byte, but for the results root in paths
        assert tree(local)[key].read_bytes().replace(bytes(local), b"R") == tree(dock)[key].read_bytes().replace(
            bytes(dock), b"R"
        ), key

    def metrics(root: Path, mode: str) -> list[tuple[int, dict[str, float]]]:
        rows = [json.loads(line) for line in (root / mode / "metrics.jsonl").read_text().splitlines()]
        timers = ("timing_s/", "cpu_s/", "wall_s/", "wait_s/")  # times differ; every other figure matches
        return [(r["step"], {k: v for k, v in r["data"].items() if not k.startswith(timers)}) for r in rows]

    for mode in ("off", "on"):
        assert metrics(local, mode) == metrics(dock, mode)
        assert [r[0] for r in metrics(dock, mode)] == [1, 2, 3]

    def verdicts(root: Path) -> dict[str, bool]:
        return {k: v["passed"] for k, v in json.loads((root / "results.json").read_text())["checks"].items()}

    passing = {"crash": True, "layout": True, "contents": True, "overhead": True, "disk": True}
    assert verdicts(local) == verdicts(dock) == passing

    for mode in ("off", "on"):
        record = json.loads((dock / mode / "run.json").read_text())
        assert record["executor"] == "docker" and record["result"]["exit_code"] == 0
        assert "container harness-docker_same-" in record["result"]["detail"]
        assert "cpu_ppo: 3 steps on 2 rank(s)" in (dock / mode / "train.log").read_text()  # the container's log
    session = json.loads((dock / "trainings.json").read_text())["session"]
    assert leftovers(client, session=session) == []


def test_timeout_stops_the_container_and_removes_it(tmp_path):
    client = daemon()
    scenario = load_scenario(write_scenario(tmp_path, name="docker_timeout", executor={**DOCKER, "timeout_s": 2}))
    session = uuid.uuid4().hex
    with pytest.raises(InfraError, match=r"off run: timed out after 2s \(executor.timeout_s\); killed"):
        ensure_runs(scenario, tmp_path / "res", session)
    record = json.loads((tmp_path / "res" / "docker_timeout" / "off" / "run.json").read_text())
    assert record["result"]["timed_out"] is True and record["result"]["exit_code"] in (137, 143)
    assert leftovers(client, session=session) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_signal_to_pytest_mid_run_removes_the_container(tmp_path, sig):
    """Ctrl-C, and a cancelled CI job's SIGTERM, while a training runs in its container."""
    client = daemon()
    name = f"docker_signal_{uuid.uuid4().hex[:8]}"
    write_scenario(tmp_path, name=name, world_size=1)
    argv = [sys.executable, "-m", "pytest", "scenarios", "--executor=docker", f"--harness-results={tmp_path / 'res'}"]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=default_signals
    )
    try:
        running: list[Any] = []
        deadline = time.monotonic() + 120
        while not running and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
            running = client.containers.list(filters={"label": f"{LABEL_PREFIX}.scenario={name}"})
        assert running, f"no container for {name} appeared; pytest said:\n{proc.stdout and proc.stdout.read()}"
        session = running[0].labels[f"{LABEL_PREFIX}.session"]
        time.sleep(1)  # well inside the training (imports alone take several seconds)
        proc.send_signal(sig)
        output, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == {signal.SIGINT: 2, signal.SIGTERM: 143}[sig], output[-2000:]  # Ctrl-C: pytest's 2
    said = f"harness: interrupted by {sig.name}: stopped container harness-{name}-off-"
    assert said in output and "(removed)" in output, output[-2000:]
    assert leftovers(client, session=session) == []
    assert leftovers(client, scenario=name) == []


def test_missing_image_failing_and_oom_killed_containers_are_infrastructure_errors(tmp_path):
    client = daemon()
    tag = f"{uuid.uuid4().hex[:6]}"
    write_scenario(tmp_path, name=f"noimage_{tag}", executor={**DOCKER, "docker": {"image": "harness-test:absent"}})
    broken = {"env": {"PYTHONHOME": "/absent"}, "unsafe": True, "unsafe_reason": "test: a broken interpreter"}
    write_scenario(tmp_path, name=f"exit1_{tag}", executor={**DOCKER, "docker": broken})
    write_scenario(tmp_path, name=f"oom_{tag}", executor={**DOCKER, "docker": {"memory": "150m"}}, world_size=1)
    proc = pytest_run("scenarios", f"--harness-results={tmp_path / 'res'}", "-rE", cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 1 and summary(proc).startswith("15 errors in"), out[-3000:]  # ERROR, never FAILED
    assert "Traceback" not in out and " failed" not in summary(proc)
    assert out.count("INFRASTRUCTURE ERROR (not a check verdict)") >= 3
    assert (
        "off run: image 'harness-test:absent' not found on the Docker daemon" in out
        and "`python -m harness image build-cpu --tag harness-test:absent`" in out
    )
    assert "off run: training exited with code 1, no Python traceback in its log. Log tail" in out
    assert "Fatal Python error" in out
    assert "UNSAFE container (test: a broken interpreter): env/pass_env PYTHONHOME" in proc.stderr + out
    assert "off run: killed for memory (OOM) with exit code 137: raise executor.docker.memory" in out
    for name in ("noimage", "exit1", "oom"):
        assert leftovers(client, scenario=f"{name}_{tag}") == []


def test_daemon_not_running_is_a_clear_infrastructure_error(tmp_path):
    """No daemon needed: DOCKER_HOST names a socket nobody listens on."""
    write_scenario(tmp_path, name="docker_nodaemon", world_size=1)
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/absent.sock"}
    proc = pytest_run("scenarios", "--executor=docker", f"--harness-results={tmp_path / 'res'}", cwd=tmp_path, env=env)
    assert proc.returncode == 1 and summary(proc).startswith("5 errors in"), proc.stdout[-3000:]
    assert f"off run: Docker daemon not reachable at unix://{tmp_path}/absent.sock" in proc.stdout
    assert "`eval $(.ci/dockerd.sh start)`" in proc.stdout and "Traceback" not in proc.stdout
    cli = subprocess.run(
        [sys.executable, "-m", "harness", "run", str(tmp_path / "scenarios"), "--executor", "docker"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert cli.returncode == 2, cli.stdout + cli.stderr
    said = " ".join(cli.stdout.split())  # rich wraps long lines
    assert "INFRASTRUCTURE ERROR" in said and "off run: Docker daemon not reachable at" in said


def test_free_space_floor_stops_the_container_as_an_infrastructure_error(tmp_path):
    client = daemon()
    name = f"docker_floor_{uuid.uuid4().hex[:8]}"
    write_scenario(tmp_path, name=name, world_size=1)
    res = f"--harness-results={tmp_path / 'res'}"
    proc = pytest_run("scenarios", "--executor=docker", res, "--harness-min-free=1PB", cwd=tmp_path)
    assert proc.returncode == 1 and summary(proc).startswith("5 errors in"), proc.stdout[-3000:]
    assert f"scenario {name}: off run: stopped: " in proc.stdout and "free on the results filesystem" in proc.stdout
    record = json.loads((tmp_path / "res" / name / "off" / "run.json").read_text())
    assert record["result"]["stopped"] and "container harness-" in record["result"]["detail"]
    assert leftovers(client, scenario=name) == []


def test_a_sigkilled_harness_stops_its_container_and_the_next_session_sweeps_it(tmp_path):
    """The training in its container is ended by its watchdog once the harness is SIGKILLed (it trained on, writing
    the results dir, and the container ran on); the stopped container is swept only when its harness process is
    gone, one of a live harness never. Every harness session sweeps at its start, so in the parallel suite another
    may remove the stale one first: asserted is that it is gone after a new session, and the live one is not (the
    line it prints: test_docker_spec.py)."""
    client = daemon()
    name = f"docker_stale_{uuid.uuid4().hex[:8]}"
    write_scenario(tmp_path, name=name, world_size=1, steps=300)  # trains on for minutes unless ended
    argv = [sys.executable, "-m", "harness", "run", "scenarios", "--executor=docker", "--results", str(tmp_path / "r")]
    killed = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not leftovers(client, scenario=name) and killed.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # inside the training (its imports take several seconds)
    finally:
        killed.kill()  # SIGKILL: no cleanup runs
        killed.wait()
    [stale] = leftovers(client, scenario=name)
    container = client.containers.get(stale)
    assert container.labels[PID_LABEL] == str(killed.pid)
    deadline = time.monotonic() + 30  # the watchdog's grace is 10 s a signal
    while container.status in ("created", "running") and time.monotonic() < deadline:
        time.sleep(0.2)
        container.reload()
    assert container.status == "exited", container.status
    log = container.logs().decode(errors="replace")
    assert "harness.training.watchdog: the harness is gone: ending the training" in log, log[-2000:]
    live = client.containers.create(
        IMAGE, ["true"], labels={f"{LABEL_PREFIX}.session": "live", f"{LABEL_PREFIX}.scenario": name, **owner_labels()}
    )
    try:
        proc = pytest_run("scenarios", "--collect-only", cwd=tmp_path)  # a new session: it sweeps at its start
        assert leftovers(client, scenario=name) == [live.name], proc.stdout[-2000:]  # this test's process is alive
        dead = subprocess.Popen(["true"])
        dead.wait()
        client.containers.create(IMAGE, ["true"], labels={**live.labels, PID_LABEL: str(dead.pid)})
        sweep()  # what `harness run` does first
        assert leftovers(client, scenario=name) == [live.name]
    finally:
        live.remove(force=True)


def test_the_dump_cap_holds_in_a_container(tmp_path):
    """The on run's size-bounded tmpfs is mounted in the run dir on the host: the container sees it through the run
    dir's bind mount, and its burst is held there too (the tree kept on the results filesystem, nothing mounted)."""
    from test_long_runs import RUNAWAY

    from harness.training.dumpfs import mounted_under, plan

    daemon()
    name = f"docker_burst_{uuid.uuid4().hex[:8]}"
    write_scenario(tmp_path, name=name, **{**RUNAWAY, "executor": DOCKER})
    argv = [sys.executable, "-m", "harness", "run", "scenarios", "--results", str(tmp_path / "r")]
    proc = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, check=False, timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    left = sum(p.stat().st_size for p in (tmp_path / "r" / name / "on" / "dumps").rglob("*") if p.is_file())
    if (size := plan(2_000_000).size) is None:
        assert f"{name} on: dump cap 2.00 MB polled, not held: " in proc.stderr
        return
    assert f"{name} on: dump cap 2.00 MB held: the dumps on a 3.05 MB tmpfs" in proc.stderr
    assert 2_000_000 < left <= size and mounted_under(tmp_path) == []
