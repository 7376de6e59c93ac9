"""A real two-node Ray cluster for the heavy tier: a head and a worker in two containers of the harness's CPU image
(``python -m harness image build-cpu``: the host's interpreter, venv and source mounted read-only) on the Docker engine
DOCKER_HOST names, on an internal network of their own (no port published: only this host and the two containers
reach it), with Ray's token authentication (``RAY_AUTH_MODE=token``, a fresh token in a 0600 file mounted read-only,
never in a container's environment). Each node keeps its own /tmp (each rank's save_path is private to its node);
the head alone mounts the results dir, at the same path, where the job gathers every node's dumps."""

from __future__ import annotations

import contextlib
import json
import secrets
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests
from docker.types import Mount

import harness
from harness.training.executors.docker import connect
from harness.training.executors.docker_image import build_cpu_image
from harness.training.executors.docker_spec import host_python

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container
    from docker.models.networks import Network

IMAGE = "verl-msprobe-harness:cpu"
LABEL = "io.harness.test"
TOKEN_DIR = "/run/harness-ray-token"
RAY = str(Path(sys.executable).with_name("ray"))
NODE = ["--num-cpus=6", "--num-gpus=1", "--object-store-memory=300000000", "--disable-usage-stats", "--block"]
UP_WAIT_S = 120
# the checkout whose harness this process imported: host_python() mounts its package on both nodes, and every
# process there (Ray, the job's entrypoint, verl's workers) must import that one, not the one the venv's editable
# install names (a worktree of another checkout runs its own code; in a plain checkout both are the same)
HARNESS_PKG = Path(harness.__file__).resolve().parent


@dataclass
class TwoNodes:
    client: DockerClient
    network: Network
    token_file: Path
    containers: dict[str, Container] = field(default_factory=dict)
    ips: dict[str, str] = field(default_factory=dict)
    started_s: float = 0.0  # how long the cluster took to come up

    @property
    def address(self) -> str:
        return f"http://{self.ips['head']}:8265"

    @property
    def token(self) -> str:
        return self.token_file.read_text()

    def get(self, path: str) -> Any:
        resp = requests.get(self.address + path, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)
        resp.raise_for_status()
        return resp.json()

    def alive_nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.get("/api/v0/nodes?detail=1")["data"]["result"]["result"] if n["state"] == "ALIVE"]

    def run_in(self, name: str, code: str) -> str:
        """Python run inside a node's container, its stdout."""
        res = self.containers[name].exec_run([sys.executable, "-c", code])
        assert res.exit_code == 0, res.output.decode()
        return str(res.output.decode())

    def files(self, name: str, root: str = "/tmp/harness-ray") -> dict[str, str]:
        """A node's files under ``root``: path -> sha256."""
        code = (
            "import hashlib, os, json, sys\n"
            f"root = {root!r}\n"
            "out = {}\n"
            "for d, _, names in os.walk(root):\n"
            "    for n in names:\n"
            "        p = os.path.join(d, n)\n"
            "        if os.path.isfile(p) and not os.path.islink(p):\n"
            "            out[os.path.relpath(p, root)] = hashlib.sha256(open(p, 'rb').read()).hexdigest()\n"
            "print(json.dumps(out))"
        )
        return dict(json.loads(self.run_in(name, code)))

    def down(self) -> None:
        for c in self.containers.values():
            with contextlib.suppress(Exception):  # killed and removed already
                c.remove(force=True)
        self.containers.clear()
        with contextlib.suppress(Exception):
            self.network.remove()


def two_nodes(results: Path, assets: Path, secrets_dir: Path) -> TwoNodes:
    """Start the cluster; the token in ``secrets_dir`` (0700), the asset dir mounted read-only on both nodes."""
    client = connect()
    try:
        client.images.get(IMAGE)
    except Exception:
        build_cpu_image(IMAGE)
    secrets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    token_file = secrets_dir / "token"
    token_file.touch(mode=0o600)
    token_file.write_text(secrets.token_hex(32))
    tag = uuid.uuid4().hex[:8]
    network = client.networks.create(f"harness-ray-{tag}", driver="bridge", internal=True, labels={LABEL: tag})
    nodes = TwoNodes(client, network, token_file)
    started = time.monotonic()
    mounts = [Mount(target=p, source=p, type="bind", read_only=True) for p in host_python().paths]
    mounts += [Mount(target=TOKEN_DIR, source=str(secrets_dir), type="bind", read_only=True)]
    mounts += [Mount(target=str(assets), source=str(assets), type="bind", read_only=True)]
    common: dict[str, Any] = {
        "environment": {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": f"{TOKEN_DIR}/token",
            "RAY_USAGE_STATS_ENABLED": "0",
            "HOME": "/tmp",
            "PYTHONPATH": str(HARNESS_PKG.parent),
        },
        "network": network.name,
        "shm_size": "1g",
        "mem_limit": "8g",
        "labels": {LABEL: tag},
        "detach": True,
        "init": True,
    }
    try:
        head_mounts = [*mounts, Mount(target=str(results), source=str(results), type="bind", read_only=False)]
        nodes.containers["head"] = client.containers.run(
            IMAGE, [RAY, "start", "--head", "--port=6379", "--dashboard-host=0.0.0.0", *NODE], name=f"ray-head-{tag}",
            hostname="head", mounts=head_mounts, **common,
        )  # fmt: skip
        nodes.ips["head"] = _ip(nodes.containers["head"], network.name)
        _wait(lambda: nodes.get("/api/version"), "the head's dashboard")
        nodes.containers["worker"] = client.containers.run(
            IMAGE, [RAY, "start", f"--address={nodes.ips['head']}:6379", *NODE], name=f"ray-worker-{tag}",
            hostname="worker", mounts=mounts, **common,
        )  # fmt: skip
        nodes.ips["worker"] = _ip(nodes.containers["worker"], network.name)
        _wait(lambda: len(nodes.alive_nodes()) == 2 or None, "two alive nodes")
        for name in nodes.containers:
            imported = nodes.run_in(name, "import harness; print(harness.__file__)").strip()
            assert Path(imported).parent == HARNESS_PKG, f"{name} imports the harness at {imported}, not {HARNESS_PKG}"
    except BaseException:
        nodes.down()
        raise
    nodes.started_s = time.monotonic() - started
    return nodes


def _ip(container: Container, network: str) -> str:
    container.reload()
    return str(container.attrs["NetworkSettings"]["Networks"][network]["IPAddress"])


def _wait(probe: Any, what: str) -> None:
    deadline = time.monotonic() + UP_WAIT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            if probe():
                return
        except Exception as exc:  # not up yet
            last = exc
        time.sleep(1)
    raise AssertionError(f"{what} not up within {UP_WAIT_S}s: {last}")
