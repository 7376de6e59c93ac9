"""The container spec the docker executor asks for, per kind (CPU, host Python, NPUs, Ascend runtime, GPUs).

Pure unit tests: no daemon. Each spec is also run through the docker SDK's own argument conversion, so a
misspelled or misplaced kwarg fails here and not on a runner.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from docker.models.containers import _create_container_args
from docker.types import DeviceRequest

from harness.artifacts.rundir import RunDir
from harness.scenario.model import ExecutorSettings
from harness.scenario.settings.docker import DockerRuntime, Mount
from harness.training.executors.base import LABEL_PREFIX, PID_LABEL, owner_labels
from harness.training.executors.docker import DockerExecutor
from harness.training.executors.docker_options import ASCEND_DRIVER_PATHS
from harness.training.executors.docker_spec import container_spec, host_python
from harness.training.launch import Launch
from harness.training.watchdog import watched

LABELS = {"io.harness.session": "s1", "io.harness.scenario": "tiny", "io.harness.run": "on"}


def spec_for(tmp_path: Path, **runtime: Any) -> dict[str, Any]:
    run = RunDir(tmp_path / "results" / "tiny" / "on")
    launch = Launch(
        module="harness.training.workloads.cpu_ppo.train",
        args=[str(run.spec)],
        env={"VERL_FILE_LOGGER_PATH": str(run.metrics)},
        workdir=run.root,
        inputs=[tmp_path / "model", tmp_path / "data"],
    )
    spec = container_spec(launch, run, ExecutorSettings(kind="docker", docker=DockerRuntime(**runtime)), LABELS)
    _create_container_args({**spec, "version": "1.41"})  # raises TypeError on a kwarg create() does not take
    json.dumps(spec)  # dry runs print it
    return spec


def binds(spec: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    return {m["Target"]: (m["Source"], m["ReadOnly"]) for m in spec["mounts"]}


def test_cpu_self_contained_image(tmp_path):
    spec = spec_for(tmp_path)
    run_dir = str(tmp_path / "results" / "tiny" / "on")
    assert spec["image"] == "verl-msprobe-harness:cpu"
    training = ["python3", "-m", "harness.training.workloads.cpu_ppo.train", f"{run_dir}/spec.json"]
    assert spec["command"] == watched("python3", f"fifo:{run_dir}/.harness-alive", training)  # its watchdog, in it
    assert spec["working_dir"] == run_dir
    assert spec["labels"] == LABELS
    assert spec["user"] == f"{os.getuid()}:{os.getgid()}"  # files written in the run dir stay the user's
    assert (spec["shm_size"], spec["network_mode"], spec["init"]) == ("2g", "none", True)
    for key in ("devices", "device_requests", "runtime", "mem_limit", "nano_cpus"):
        assert key not in spec
    assert spec["environment"]["VERL_FILE_LOGGER_PATH"] == f"{run_dir}/metrics.jsonl"


def test_mounts_workspace_rw_inputs_and_extra_mounts_ro(tmp_path):
    spec = spec_for(
        tmp_path,
        mounts=[
            Mount(source="/srv/ckpt", target="/ckpt"),
            Mount(source="/srv/scratch", target="/scratch", read_only=False),
        ],
    )
    assert binds(spec) == {
        str(tmp_path / "results" / "tiny" / "on"): (str(tmp_path / "results" / "tiny" / "on"), False),
        str(tmp_path / "model"): (str(tmp_path / "model"), True),
        str(tmp_path / "data"): (str(tmp_path / "data"), True),
        "/ckpt": ("/srv/ckpt", True),
        "/scratch": ("/srv/scratch", False),
    }
    assert all(m["Type"] == "bind" for m in spec["mounts"])


def test_host_python_image_runs_this_interpreter_with_its_paths_read_only(tmp_path):
    spec = spec_for(tmp_path, image_kind="host_python")
    assert spec["command"][0] == sys.executable
    mounts = binds(spec)
    host = host_python()
    assert "/usr" in host.paths and sys.prefix in host.paths
    assert str(Path(__file__).resolve().parents[1] / "harness") in host.paths
    for p in host.paths:
        assert mounts[p] == (p, True)
    assert mounts[str(tmp_path / "results" / "tiny" / "on")][1] is False
    # no path is mounted twice (nested in another host path)
    assert not [p for p in host.paths for q in host.paths if p != q and p.startswith(q.rstrip("/") + "/")]


def test_npu_devices_map_to_davinci_devices_driver_mounts_and_visible_ids(tmp_path):
    spec = spec_for(tmp_path, npu_devices=[2, 5])
    assert spec["devices"] == [
        "/dev/davinci2:/dev/davinci2:rwm",
        "/dev/davinci5:/dev/davinci5:rwm",
        "/dev/davinci_manager:/dev/davinci_manager:rwm",
        "/dev/devmm_svm:/dev/devmm_svm:rwm",
        "/dev/hisi_hdc:/dev/hisi_hdc:rwm",
    ]
    mounts = binds(spec)
    for p in ASCEND_DRIVER_PATHS:
        assert mounts[p] == (p, True)
    assert set(ASCEND_DRIVER_PATHS) == {
        "/usr/local/Ascend/driver",
        "/usr/local/dcmi",
        "/usr/local/bin/npu-smi",
        "/etc/ascend_install.info",
    }
    # the container holds only the passed chips; the runtime library numbers them from 0
    assert spec["environment"]["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"
    assert "runtime" not in spec and "ASCEND_VISIBLE_DEVICES" not in spec["environment"]


def test_npu_device_nodes_owners_become_supplementary_groups(tmp_path, monkeypatch):
    """On a runner the davinci nodes belong to group HwHiAiUser (crw-rw----): a container running as the host uid
    opens them only with that gid added, which the spec takes from the nodes themselves."""
    real_stat, real_exists = os.stat, os.path.exists
    owners = {"/dev/davinci2": 1001, "/dev/davinci5": 1001, "/dev/davinci_manager": 1001, "/dev/devmm_svm": 0}
    monkeypatch.setattr(os.path, "exists", lambda p: p in owners or real_exists(p))
    monkeypatch.setattr(
        os, "stat", lambda p, *a, **k: SimpleNamespace(st_gid=owners[p]) if p in owners else real_stat(p, *a, **k)
    )
    spec = spec_for(tmp_path, npu_devices=[2, 5])
    assert spec["group_add"] == ["0", "1001"]  # /dev/hisi_hdc absent here: no group of its own
    line = next(ln for ln in DockerExecutor().describe(*_describe_args(tmp_path, npu_devices=[2, 5])) if "user" in ln)
    assert "(groups 0,1001: the device nodes' owners)" in line


def _describe_args(tmp_path: Path, **runtime: Any) -> tuple[Any, ...]:
    run = RunDir(tmp_path / "results" / "tiny" / "on")
    launch = Launch(module="m", args=[], env={}, workdir=run.root, inputs=[])
    return launch, run, ExecutorSettings(kind="docker", docker=DockerRuntime(**runtime)), LABELS


def test_ascend_container_runtime_gets_visible_devices_only(tmp_path):
    spec = spec_for(tmp_path, npu_devices=[2, 5], ascend_runtime=True)
    assert spec["runtime"] == "ascend"
    assert spec["environment"]["ASCEND_VISIBLE_DEVICES"] == "2,5"
    assert "devices" not in spec and "ASCEND_RT_VISIBLE_DEVICES" not in spec["environment"]
    assert not set(ASCEND_DRIVER_PATHS) & set(binds(spec))  # the runtime mounts the driver itself


def test_cuda_gpus_become_a_device_request(tmp_path):
    spec = spec_for(tmp_path, gpus=[0, 3])
    assert spec["device_requests"] == [DeviceRequest(device_ids=["0", "3"], capabilities=[["gpu"]])]
    assert "devices" not in spec and "runtime" not in spec


def test_local_pass_env_patterns_carry_the_job_containers_cann_environment(tmp_path, monkeypatch):
    """In verl's job container CANN's set_env.sh variables make the NPUs usable; the local executor passes the
    patterns a scenario names (executor.local.pass_env), and still nothing else of the host."""
    from harness.training.executors.local import _env

    monkeypatch.setenv("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest")
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/Ascend/driver/lib64")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    launch = Launch(module="m", args=[], env={"HF_HUB_OFFLINE": "0"}, workdir=tmp_path, inputs=[])
    local = {"pass_env": ["ASCEND_*", "LD_LIBRARY_PATH"], "env": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "x"}}
    env = _env(launch, ExecutorSettings(kind="local", local=local))
    assert env["ASCEND_TOOLKIT_HOME"] == "/usr/local/Ascend/ascend-toolkit/latest"
    assert env["LD_LIBRARY_PATH"] == "/usr/local/Ascend/driver/lib64" and env["TRANSFORMERS_VERBOSITY"] == "x"
    assert env["HF_HUB_OFFLINE"] == "0"  # the harness's own variables win over the scenario's
    assert "GITHUB_TOKEN" not in env and "ASCEND_TOOLKIT_HOME" not in _env(launch, ExecutorSettings(kind="local"))


def test_environment_is_an_allowlist_never_the_host_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_secret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setenv("PATH", "/host/only/bin")
    monkeypatch.setenv("HF_ENDPOINT", "https://mirror.example")
    monkeypatch.delenv("NOT_SET_ON_HOST", raising=False)
    spec = spec_for(
        tmp_path,
        pass_env=["HF_ENDPOINT", "NOT_SET_ON_HOST"],
        env={"OMP_NUM_THREADS": "1", "VERL_FILE_LOGGER_PATH": "/scenario/cannot/redirect"},
    )
    env = spec["environment"]
    assert "hunter2" not in json.dumps(env) and "ghp_secret" not in json.dumps(env)
    assert "PATH" not in env  # the image's PATH, not the host's
    assert env["HOME"] == "/tmp" and env["LANG"] == "C.UTF-8" and env["PYTHONUNBUFFERED"] == "1"
    assert env["HF_ENDPOINT"] == "https://mirror.example" and "NOT_SET_ON_HOST" not in env
    assert env["OMP_NUM_THREADS"] == "1"
    assert env["VERL_FILE_LOGGER_PATH"].endswith("/tiny/on/metrics.jsonl")  # the harness's own wins
    assert set(env) <= {"LANG", "LC_ALL", "TZ", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "HOME",
                        "PYTHONUNBUFFERED", "HF_ENDPOINT", "OMP_NUM_THREADS", "VERL_FILE_LOGGER_PATH"}  # fmt: skip


@pytest.mark.parametrize(("memory", "cpus"), [("8g", 1.5), ("512m", 2)])
def test_user_and_limits(tmp_path, memory, cpus):
    spec = spec_for(tmp_path, user="1000:1000", memory=memory, cpus=cpus, network="none", shm_size="64m")
    assert spec["user"] == "1000:1000"
    assert spec["mem_limit"] == spec["memswap_limit"] == memory  # no swap beyond the limit
    assert spec["nano_cpus"] == int(cpus * 1e9)
    assert (spec["network_mode"], spec["shm_size"]) == ("none", "64m")


def test_runtime_settings_reject_unknown_fields():
    with pytest.raises(ValueError, match="Extra inputs are not permitted"):
        DockerRuntime(gpu=[0])  # type: ignore[call-arg]


class _Containers:
    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def list(self, **_: Any) -> list[Any]:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "lines"),
    [
        (requests.ReadTimeout("read timed out"), ["stale containers not looked for: the Docker daemon did not answer"]),
        (requests.ConnectionError("no such socket"), []),
    ],
)
def test_the_sweep_says_when_a_busy_daemon_kept_it_from_looking(exc, lines):
    """No daemon: nothing of ours can be on it. A daemon too busy to answer may hold a stale container: said."""
    client = SimpleNamespace(containers=_Containers(exc))
    got = DockerExecutor(client=client).sweep()  # type: ignore[arg-type]
    assert [line[: len(want)] for line, want in zip(got, lines, strict=True)] == lines


class _Api:
    def __init__(self) -> None:
        self.removed: list[str] = []

    def remove_container(self, name: str, force: bool) -> None:
        self.removed.append(name)


def test_the_sweep_removes_a_dead_harness_container_and_says_so():
    """Only a container whose harness process (on this host) is gone; one of a live harness stays."""
    dead = subprocess.Popen(["true"])
    dead.wait()
    labels = {f"{LABEL_PREFIX}.session": "s", f"{LABEL_PREFIX}.scenario": "tiny", **owner_labels()}
    stale = SimpleNamespace(
        id="c1", name="harness-tiny-off-1", status="exited", labels={**labels, PID_LABEL: str(dead.pid)}
    )
    live = SimpleNamespace(id="c2", name="harness-tiny-on-2", status="running", labels=labels)
    api = _Api()
    client = SimpleNamespace(containers=SimpleNamespace(list=lambda **_: [stale, live]), api=api)
    assert DockerExecutor(client=client).sweep() == [  # type: ignore[arg-type]
        f"removed stale container harness-tiny-off-1 (exited; scenario tiny, its harness pid {dead.pid} is gone)"
    ]
    assert api.removed == ["c1"]
    forged = {**stale.labels, f"{LABEL_PREFIX}.scenario": "tiny\n::error title=sweep::all good"}  # the daemon's
    client.containers.list = lambda **_: [SimpleNamespace(id="c3", name="##[error]x", status="exited", labels=forged)]
    assert DockerExecutor(client=client).sweep() == [  # type: ignore[arg-type]
        "removed stale container #\\#[error]x (exited; scenario tiny\\n::error title=sweep::all good, its harness pid "
        f"{dead.pid} is gone)"
    ]
