"""The ray executor without a cluster: its scenario block and options, the token's sources, the workload's argv on a
cluster, what the job's node tasks send and how the driver writes it, the checks per node, and how a job's end maps to
a run's (a fake Job Submission client). The real two-node cluster is tests/test_ray_nodes.py (heavy)."""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import os
import re
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from builders import write_dump, write_scenario
from fake_servers import dashboard, drip, elsewhere, nodes_listing, redirect_to

from harness import config
from harness.artifacts.nodes import NodeDoc, NodesRecord
from harness.artifacts.rundir import ScenarioDir
from harness.checks.base import CheckContext
from harness.checks.disk import check_disk
from harness.checks.layout import check_layout
from harness.errors import HarnessError, InfraError
from harness.outside import redact
from harness.pipeline.options import executor_choice
from harness.scenario.loader import ScenarioError, load_scenario
from harness.scenario.settings.ray import RayRuntime
from harness.training.executors import ray_cluster, ray_gather, ray_job
from harness.training.executors.ray_cluster import RUN_ENV, Cluster, actor_env, token
from harness.training.launch import Launch, NodeRun

ROOT = Path(__file__).resolve().parents[1]
TWO_NODES = ROOT / "scenarios" / "two_nodes_fsdp_l1.yaml"


def variant(tmp_path: Path, **changes: Any) -> Path:
    doc = yaml.safe_load(TWO_NODES.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    path = tmp_path / "scenarios" / "two_nodes_fsdp_l1.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


# --- the scenario block and the options ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"executor__ray__address": "172.17.0.2:8265"}, "not the address of a Ray cluster's dashboard"),
        ({"executor__ray__scratch": "tmp/x"}, "an absolute directory below /"),
        ({"executor__ray__scratch": "/tmp/../etc"}, "without '..'"),
        ({"executor__kind": "local"}, "device cpu runs on one node, or on the nodes of a Ray cluster"),
        (
            {"device": "npu", "workload__rollout": "vllm", "executor__kind": "local"},
            "nnodes 2: the training is submitted to a Ray cluster spanning the nodes",
        ),
    ],
)
def test_a_cluster_block_that_cannot_run_is_refused_at_load(tmp_path, changes, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario(variant(tmp_path, **changes))



@pytest.mark.parametrize("kind", ["ray", "rayjob"])
@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({"A=B": "1"}, "key 'A=B' is not a variable name every node takes"),
        ({"": "1"}, "key '' is not a variable name every node takes"),
        ({"MY VAR": "1"}, "key 'MY VAR' is not a variable name every node takes"),
        ({"9LIVES": "1"}, "key '9LIVES' is not a variable name every node takes"),
        ({"A\x00B": "1"}, "key 'A\\x00B' is not a variable name every node takes"),
        ({"OK": "a\x00b"}, "OK: its value holds a NUL byte, which no process environment can hold"),
    ],
    ids=["equals", "empty", "space", "digit-first", "nul-in-key", "nul-in-value"],
)
def test_an_env_key_the_cluster_would_refuse_is_refused_at_load_naming_the_line(tmp_path, kind, env, problem):
    block = {"kind": kind, kind: {"env": env, **({"cache": "/c"} if kind == "rayjob" else {})}}
    path = variant(tmp_path, executor=block)
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    (line,) = err.value.problems
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+: executor\.{kind}\.env: {re.escape(problem)}.*", line), line
    assert load_scenario(variant(tmp_path, executor={**block, kind: {**block[kind], "env": {"_OK_1": "x y=z"}}}))


def test_the_embedded_workload_refuses_a_cluster(tmp_path):
    with pytest.raises(ScenarioError, match="workload cpu_ppo forks its ranks on one host"):
        load_scenario(write_scenario(tmp_path, executor={"kind": "ray"}))


def test_ray_address_selects_the_ray_executor_and_reaches_it_through_the_environment(monkeypatch):
    monkeypatch.delenv(config.RAY_ADDRESS.name, raising=False)
    assert executor_choice(None, None) is None
    assert executor_choice(None, "http://10.0.0.1:8265/") == "ray"
    assert os.environ[config.RAY_ADDRESS.name] == "http://10.0.0.1:8265"
    assert executor_choice("local", None) == "local"  # an explicit executor wins over the environment's cluster
    assert executor_choice(None, None) == "ray"  # HARNESS_RAY_ADDRESS alone: every scenario on the cluster
    with pytest.raises(HarnessError, match="--ray-address with --executor docker"):
        executor_choice("docker", "http://10.0.0.1:8265")
    with pytest.raises(HarnessError, match="--ray-address: 'ray://h:10001' is not the address"):
        executor_choice(None, "ray://h:10001")


def test_the_token_is_read_where_ray_reads_it_and_never_shown(tmp_path):
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("home-token\n")
    (tmp_path / "file").write_text(" file-token ")
    assert token({"RAY_AUTH_TOKEN": "env-token", "RAY_AUTH_TOKEN_PATH": str(tmp_path / "file")}, tmp_path) == (
        "env-token"
    )
    assert token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "file")}, tmp_path) == "file-token"
    assert token({}, tmp_path) == "home-token"
    assert token({}, tmp_path / "nowhere") is None
    with pytest.raises(InfraError, match=r"RAY_AUTH_TOKEN_PATH=.*missing: cannot read the cluster's token") as err:
        token({"RAY_AUTH_TOKEN_PATH": str(tmp_path / "missing")}, tmp_path)
    assert "token" in str(err.value) and "home-token" not in str(err.value)


class Refusing(http.server.BaseHTTPRequestHandler):
    """A dashboard that refuses every request as Ray's token authentication does (HTTP 401)."""

    def do_GET(self) -> None:
        self.send_response(401)
        self.end_headers()
        self.wfile.write(b"Unauthorized: missing or invalid authentication token")

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cluster_unreachable_refusing_the_token_or_short_of_nodes_is_one_line(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "tok-" + "7" * 60)
    with pytest.raises(InfraError) as err:
        Cluster.connect("http://127.0.0.1:1")  # nothing listens
    assert str(err.value).startswith("the Ray cluster at http://127.0.0.1:1: GET /api/version: ConnectionError: ")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refusing)  # loopback only
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(InfraError) as err:
            Cluster.connect(f"http://127.0.0.1:{server.server_port}")
    finally:
        server.shutdown()
    line = str(err.value)
    assert line.startswith(f"the Ray cluster at http://127.0.0.1:{server.server_port} refused the harness's token")
    assert "7777" not in line and len(line.splitlines()) == 1
    cluster = Cluster("http://h:8265", None, {}, authenticated=True)  # type: ignore[arg-type]
    head = {"node_ip": "10.0.0.1", "state": "ALIVE", "resources_total": {"GPU": 1.0}}
    monkeypatch.setattr(cluster, "get", lambda path: [head, {**head, "node_ip": "10.0.0.2", "state": "DEAD"}])
    with pytest.raises(InfraError) as err:
        cluster.check_nodes(NodeRun.new("/tmp/harness-ray", "s", "on", 2, 1, "GPU", None))
    assert str(err.value) == (
        "the Ray cluster at http://h:8265 has 1 alive node(s) with 1 GPU each, the scenario needs 2 "
        "(workload nnodes 2, 1 rank(s) a node); its nodes: 10.0.0.1: 1 GPU"
    )


def test_an_actors_environment_is_read_from_its_serialized_runtime_env():
    actor = {"serialized_runtime_env": '{"env_vars": {"RANK": "1", "HARNESS_RAY_RUN": "harness-x"}}'}
    assert actor_env(actor) == {"RANK": "1", RUN_ENV: "harness-x"}
    assert actor_env({"serialized_runtime_env": "not json"}) == {}
    assert actor_env({}) == {}


# --- the workload on a cluster -------------------------------------------------------------------------------------


@pytest.mark.integration  # the offline check composes verl's config and probes the target's verl
def test_on_a_cluster_verl_runs_main_ppo_with_every_path_on_the_nodes_own_disks(tmp_path):
    from harness.training.workloads.verl_ppo import VerlPpo
    from harness.training.workloads.verl_ppo.config import compose

    scenario = load_scenario(TWO_NODES)
    run = ScenarioDir(tmp_path / scenario.name).run("on")
    launch = VerlPpo().prepare(scenario, run, enabled=True, dry=True)
    node = launch.node
    assert node is not None and node.root.parent.as_posix() == "/tmp/harness-ray"
    assert (node.nnodes, node.per_node, node.resource) == (2, 1, "GPU")
    assert launch.module == "verl.trainer.main_ppo"  # joins the cluster: not the CPU launcher's own Ray
    assert launch.env["VERL_FILE_LOGGER_PATH"] == str(node.metrics)
    assert not VerlPpo().takes_slot(scenario)
    assert f'"dump_path": "{node.dumps}"' in run.msprobe_config.read_text()
    cfg = compose(launch.args[0].removeprefix("--config-name="), launch.args[1:])
    assert cfg.global_profiler.save_path == str(node.dumps)
    assert cfg.global_profiler.global_tool_config.precision_debugger.config_path == str(node.msprobe_config)
    assert (cfg.trainer.nnodes, cfg.trainer.n_gpus_per_node) == (2, 1)
    assert cfg.ray_kwargs.ray_init.num_cpus is None and "num_gpus" not in cfg.ray_kwargs.ray_init  # a driver joining
    assert cfg.ray_kwargs.ray_init.runtime_env.py_executable == sys.executable  # every worker: the target's Python
    other = VerlPpo().prepare(scenario, ScenarioDir(tmp_path / "again").run("on"), enabled=True, dry=True)
    assert other.node is not None and other.node.root != node.root  # two runs never share a node dir


# --- what a node sends and how the driver writes it ---------------------------------------------------------------


def node_tree(root: Path, outside: Path) -> dict[str, bytes]:
    files = {
        "dumps/step_2/actor_update/step0/rank1/dump.json": b'{"data": {}}' * 1000,
        "dumps/step_2/actor_update/step0/rank1/stack.json": b"{}",
        "metrics.jsonl": b'{"step": 1, "data": {}}\n',
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "msprobe_config.json").write_text("{}")  # placed there, never sent back
    outside.parent.mkdir(parents=True, exist_ok=True)
    outside.write_text("a host file")
    (root / "dumps/step_2/actor_update/step0/rank1/construct.json").symlink_to(outside)
    (root / "dumps/step_4").symlink_to(outside.parent)
    os.mkfifo(root / "dumps/step_2/fifo")
    return files


def receive(root: Path, run_dir: Path, taken: dict[str, str], name: str = "node A", chunk: int = 1000) -> Any:
    receiver = ray_gather.Receiver(run_dir, taken, name)
    for msg in ray_gather.ship(str(root), chunk=chunk):
        if msg[0] != "node":
            receiver.take(msg)
    return receiver


def test_a_nodes_dumps_arrive_whole_links_and_fifos_refused_never_followed(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_gather, "node_facts", lambda: {"node_id": "n1", "ip": "10.0.0.2", "hostname": "w"})
    root, run_dir = tmp_path / "node", tmp_path / "run"
    run_dir.mkdir()
    files = node_tree(root, tmp_path / "outside" / "secret")
    got = receive(root, run_dir, taken := {})
    for rel, data in files.items():
        assert (run_dir / rel).read_bytes() == data
    assert sorted(got.refused) == [
        "dumps/step_2/actor_update/step0/rank1/construct.json: a symbolic link",
        "dumps/step_2/fifo: a FIFO",
        "dumps/step_4: a symbolic link",
    ]
    assert not (run_dir / "msprobe_config.json").exists() and not (run_dir / "dumps/step_4").exists()
    assert got.rank_dirs == {1} and got.files == 3
    assert got.bytes == sum(len(d) for r, d in files.items() if r.startswith("dumps/"))  # the node's dumps only
    assert not list(run_dir.rglob("*.part"))
    again = receive(root, run_dir, taken, name="node B")  # the same paths from a second node: the first kept
    assert again.files == 0 and any("also sent by node A; the first kept" in r for r in again.refused)


def test_a_file_that_arrives_short_or_changed_is_not_kept_and_a_node_lost_mid_file_leaves_no_part(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    data = b"x" * 100
    good = hashlib.sha256(data).hexdigest()
    r = ray_gather.Receiver(run_dir, {}, "node A")
    for msg in [("dir", "dumps"), ("file", "dumps/a.json", 100), ("data", data[:60]), ("end", good)]:
        r.take(msg)
    assert not (run_dir / "dumps/a.json").exists() and "dumps/a.json: 60 bytes arrived of 100" in r.refused[0]
    for msg in [("file", "dumps/b.json", 100), ("data", data[:50])]:
        r.take(msg)
    r.abandon()
    assert sorted(p.name for p in (run_dir / "dumps").iterdir()) == []
    for msg in [("file", "../escape", 3), ("data", b"abc"), ("end", hashlib.sha256(b"abc").hexdigest())]:
        r.take(msg)
    assert not (tmp_path / "escape").exists() and "../escape: outside the node's dumps and metrics" in r.refused


def test_a_link_in_the_run_dir_is_never_written_through(tmp_path):
    run_dir, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    run_dir.mkdir()
    elsewhere.mkdir()
    (run_dir / "dumps").symlink_to(elsewhere)
    r = ray_gather.Receiver(run_dir, {}, "node A")
    for msg in [("file", "dumps/x.json", 1), ("data", b"x"), ("end", hashlib.sha256(b"x").hexdigest())]:
        r.take(msg)
    assert list(elsewhere.iterdir()) == [] and "is a symbolic link in the run dir" in r.refused[0]


# --- the checks per node -------------------------------------------------------------------------------------------


def two_nodes(*, worker_bytes: int = 1000, worker_ranks: list[int] | None = None, **worker: Any) -> NodesRecord:
    return NodesRecord(
        job="harness-x",
        nodes=[
            NodeDoc(node_id="a" * 56, ip="10.0.0.1", hostname="head", head=True, ranks=[0], bytes=900, dump_ranks=[0]),
            NodeDoc(
                node_id="b" * 56,
                ip="10.0.0.2",
                hostname="worker",
                ranks=worker_ranks or [1],
                bytes=worker_bytes,
                dump_ranks=[1],
                **worker,
            ),
        ],
        placement="test",
        complete=True,
    )


def test_every_check_names_the_node_of_a_rank_whose_dumps_are_missing(good_case):
    _, ctx = good_case
    two_nodes().write(ctx.dir.run("on").nodes)
    assert check_layout(ctx).passed
    for d in ctx.dir.run("on").dumps.glob("step_*/*/step0/rank1"):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    ctx.__dict__.pop("tree", None)
    res = check_layout(ctx)
    worker = "node 10.0.0.2 (worker, bbbbbbbb)"
    assert f"missing dump dir step_2/actor_compute_log_prob/step0/rank1 on {worker}" in res.problems
    assert f"{worker} (ranks [1]): of its 4 expected dump dirs, none reached the results dir" in res.problems


def test_a_node_over_its_budget_and_a_node_lost_are_failures_naming_it(good_case, tmp_path):
    scenario, ctx = good_case
    scenario = scenario.model_copy(
        update={
            "budgets": scenario.budgets.model_copy(
                update={"disk": scenario.budgets.disk.model_copy(update={"max_per_node": 950})}
            )
        }
    )
    ctx.scenario = scenario
    two_nodes(refused=["dumps/step_2/x: a symbolic link"]).write(ctx.dir.run("on").nodes)
    res = check_disk(ctx)
    assert res.figures["disk.node0_bytes"] == 900 and res.figures["disk.node1_bytes"] == 1000
    assert res.problems == [
        "node1: node 10.0.0.2 (worker, bbbbbbbb) (ranks [1]): 0.00 MB > budgets.disk.max_per_node 0.00 MB"
    ]
    assert (
        "node 10.0.0.2 (worker, bbbbbbbb): dumps/step_2/x: a symbolic link: not gathered" in check_layout(ctx).problems
    )
    ctx.__dict__.pop("nodes", None)
    two_nodes(alive=False, problem="the node died during the run").write(ctx.dir.run("on").nodes)
    assert "node 10.0.0.2 (worker, bbbbbbbb) (ranks [1]) was gone when the job gathered: its dumps are lost" in (
        check_layout(ctx).problems
    )
    ctx.__dict__.pop("nodes", None)
    two_nodes(worker_ranks=[0]).write(ctx.dir.run("on").nodes)  # rank 1's dumps lay where Ray placed no rank 1
    lines = check_layout(ctx).problems
    assert any("held rank1's dumps, Ray placed rank 1 on no node" in line for line in lines)
    assert any("ranks [1]: Ray placed no worker of this run with that RANK" in line for line in lines)


def placed(*ranks_of_nodes: list[int], dump_ranks: list[list[int]] | None = None) -> NodesRecord:
    """A nodes.json of ``len(ranks_of_nodes)`` nodes, node ``i`` holding the ranks Ray placed there (the first the
    head) and, unless said, the dump dirs of those same ranks."""
    held = dump_ranks if dump_ranks is not None else [list(r) for r in ranks_of_nodes]
    return NodesRecord(
        job="harness-x",
        nodes=[
            NodeDoc(
                node_id=f"{i}" * 56,
                ip=f"10.0.0.{i + 1}",
                hostname=f"n{i}",
                head=i == 0,
                ranks=list(ranks),
                bytes=1000 * len(held[i]),
                dump_ranks=held[i],
            )
            for i, ranks in enumerate(ranks_of_nodes)
        ],
        placement="test",
        complete=True,
    )


def test_which_nodes_must_hold_dumps_follows_the_rank_subset_and_rays_placement():
    """The nodes that must hold dumps are those Ray placed a selected rank on, whatever the rank order says."""
    got = {n.hostname: mine for n, mine in placed([0], [1]).holders([1])}
    assert got == {"n0": [], "n1": [1]}
    assert {n.hostname: mine for n, mine in placed([1], [0]).holders([1])} == {"n0": [1], "n1": []}  # Ray's order
    four = placed([0, 2], [1, 3])
    assert {n.hostname: mine for n, mine in four.holders([2, 3])} == {"n0": [2], "n1": [3]}
    assert {n.hostname: mine for n, mine in four.holders([3])} == {"n0": [], "n1": [3]}
    assert {n.hostname: mine for n, mine in four.holders(range(4))} == {"n0": [0, 2], "n1": [1, 3]}


@pytest.fixture
def rank1_case(tmp_path: Path) -> CheckContext:
    """Two ranks, precision_debugger.ranks [1]: rank 1's dumps only, as msprobe's rank filter leaves them."""
    scenario = load_scenario(write_scenario(tmp_path, precision_debugger={"ranks": [1]}))
    sdir = ScenarioDir(tmp_path / "results" / scenario.name)
    for step in scenario.precision_debugger.steps:
        for stage in scenario.precision_debugger.stages:
            write_dump(sdir.run("on").dumps, step, stage, 1)
    return CheckContext(scenario, sdir)


def test_a_rank_subset_on_two_nodes_expects_dumps_on_the_selected_ranks_node_only(rank1_case):
    ctx = rank1_case
    placed([0], [1], dump_ranks=[[], [1]]).write(ctx.dir.run("on").nodes)
    layout, disk = check_layout(ctx), check_disk(ctx)
    assert layout.passed, layout.problems
    assert layout.figures == {"layout.expected_dirs": 4, "layout.found_dirs": 4}
    assert layout.notes == [
        "head node 10.0.0.1 (n0, 00000000): ranks [0] (Ray), expected no dumps (expected ranks [1]), rank dirs [] "
        "gathered",
        "node 10.0.0.2 (n1, 11111111): ranks [1] (Ray), expected the dumps of ranks [1], rank dirs [1] gathered",
    ]
    assert disk.passed and [k for k in disk.figures if k.startswith("disk.node")] == ["disk.node1_bytes"]
    assert disk.notes[-1] == "per node: node1 node 10.0.0.2 (n1, 11111111) ranks [1]: 0.00 MB"


def test_a_rank_subset_fails_a_node_of_an_unselected_rank_that_holds_dumps_naming_it(rank1_case):
    ctx = rank1_case
    write_dump(ctx.dir.run("on").dumps, 2, "actor_update", 0)  # msprobe ignored its rank filter on rank 0
    placed([0], [1], dump_ranks=[[0], [1]]).write(ctx.dir.run("on").nodes)
    head = "head node 10.0.0.1 (n0, 00000000)"
    assert check_layout(ctx).problems == [
        f"{head} (ranks [0]) held the dumps of ranks [0], not among the expected ranks [1]",
        f"unexpected dump dir step_2/actor_update/step0/rank0 on {head}: rank 0 is not among the expected ranks [1]",
    ]
    assert check_disk(ctx).figures["disk.node0_bytes"] == 1000  # the bytes it held are reported, never hidden


def test_a_rank_subset_whose_node_lost_its_dumps_fails_naming_that_node_only(rank1_case):
    ctx = rank1_case
    for d in ctx.dir.run("on").dumps.glob("step_*/*/step0/rank1"):
        for f in d.iterdir():
            f.unlink()
        d.rmdir()
    placed([1], [0], dump_ranks=[[], []]).write(ctx.dir.run("on").nodes)  # Ray placed rank 1 on the head this time
    lines = check_layout(ctx).problems
    head = "head node 10.0.0.1 (n0, 00000000)"
    assert f"{head} (ranks [1]): of its 4 expected dump dirs, none reached the results dir" in lines
    assert f"missing dump dir step_2/actor_update/step0/rank1 on {head}" in lines
    assert not [line for line in lines if "10.0.0.2" in line]


# --- a job's end, with a fake Job Submission client ----------------------------------------------------------------


class FakeClient:
    def __init__(self, statuses: list[str | Exception], info: dict[str, Any], log: str = "") -> None:
        self.statuses, self.info, self.log = statuses, info, log
        self.stopped: list[str] = []
        self.submitted: list[dict[str, Any]] = []

    def get_job_status(self, job: str) -> str:
        if job.endswith("-clean"):
            return "SUCCEEDED"
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        if isinstance(status, Exception):  # the dashboard did not answer this time
            raise status
        return status

    def get_job_info(self, job: str) -> Any:
        return SimpleNamespace(**self.info)

    def stop_job(self, job: str) -> bool:
        self.stopped.append(job)
        self.statuses = ["STOPPED"]
        return True

    def submit_job(self, **kw: Any) -> str:
        self.submitted.append(kw)
        return str(kw["submission_id"])

    async def tail_job_logs(self, job: str) -> Any:
        yield self.log
        await asyncio.sleep(0)


def follow(tmp_path: Path, client: FakeClient, timeout_s: float = 3600, nodes: NodesRecord | None = None) -> Any:
    run = ScenarioDir(tmp_path / "s").run("on")
    run.root.mkdir(parents=True)
    if nodes:
        nodes.write(run.nodes)
    cluster = Cluster("http://h:8265", client, {}, authenticated=True)  # type: ignore[arg-type]
    cluster.actors = lambda run, alive_only=True: []  # type: ignore[method-assign]
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 1, "GPU", None)
    settings = SimpleNamespace(timeout_s=timeout_s)
    started = time.monotonic()
    return ray_job._follow(cluster, node, run, settings, threading.Event(), started, ["python"])  # type: ignore[arg-type]


def test_a_jobs_end_maps_to_a_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_job, "POLL_S", 0.01)
    gathered = two_nodes()
    ok = follow(tmp_path / "1", FakeClient(["RUNNING", "SUCCEEDED"], {"message": "", "driver_exit_code": 0}),
                nodes=gathered)  # fmt: skip
    assert ok.exit_code == 0 and not ok.timed_out
    with pytest.raises(InfraError, match=r"ended SUCCEEDED with nothing gathered \(no nodes\.json in the run dir\)"):
        follow(tmp_path / "1b", FakeClient(["SUCCEEDED"], {"message": "", "driver_exit_code": 0}))
    crashed = follow(tmp_path / "2", FakeClient(["FAILED"], {"message": "exit 1", "driver_exit_code": 1}))
    assert crashed.exit_code == 1  # the crash classifier reads its traceback, as for a local run
    with pytest.raises(InfraError, match="failed before its entrypoint ran: runtime env setup failed"):
        follow(
            tmp_path / "3", FakeClient(["FAILED"], {"message": "runtime env setup failed", "driver_exit_code": None})
        )
    with pytest.raises(InfraError, match="was stopped on the cluster at http://h:8265, not by the harness"):
        follow(tmp_path / "4", FakeClient(["STOPPED"], {"message": "", "driver_exit_code": None}))
    with pytest.raises(InfraError, match=r"HARNESS RAY ERROR|node 10\.0\.0\.2 .* model /m is absent"):
        line = "HARNESS RAY ERROR: node 10.0.0.2 (w): model /m is absent\n"
        follow(tmp_path / "5", FakeClient(["FAILED"], {"message": "", "driver_exit_code": 3}, log=line))
    with pytest.raises(InfraError, match=r"node 10\.0\.0\.2 \(worker, bbbbbbbb\) \(ranks \[1\]\) died during the run"):
        dead = two_nodes(alive=False, problem="the node died during the run")
        follow(tmp_path / "6", FakeClient(["FAILED"], {"message": "", "driver_exit_code": 1}), nodes=dead)
    with pytest.raises(InfraError, match=r"\(worker, bbbbbbbb\) \(ranks \[1\]\) gathering stopped after 2 files"):
        cut = two_nodes(problem="gathering stopped after 2 files: RayTaskError: node died")  # Ray: still alive
        follow(tmp_path / "7", FakeClient(["FAILED"], {"message": "", "driver_exit_code": 1}), nodes=cut)


def test_a_dashboard_that_fails_to_answer_once_abandons_no_healthy_run(tmp_path, monkeypatch):
    """One failed get_job_status ended the harness's follow: it stopped renewing its lease, and the lease then stopped a
    healthy run. A blip is asked again; a dashboard silent past the grace is the cluster lost, in one line."""
    monkeypatch.setattr(ray_job, "POLL_S", 0.01)
    blip = ConnectionError("Connection refused (the dashboard restarting)")
    info = {"message": "", "driver_exit_code": 0}
    ok = follow(tmp_path / "1", FakeClient(["RUNNING", blip, blip, "RUNNING", "SUCCEEDED"], info), nodes=two_nodes())
    assert ok.exit_code == 0
    monkeypatch.setattr(ray_job, "STATUS_GRACE_S", 0.2)
    lost = r"^lost the Ray cluster at http://h:8265 during the run: .*Connection refused.* \(no answer for 0\.2 s\)$"
    with pytest.raises(InfraError, match=lost):
        follow(tmp_path / "2", FakeClient(["RUNNING", blip], info), nodes=two_nodes())


def test_a_timed_out_job_is_stopped_waited_for_and_its_node_dirs_removed(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_job, "POLL_S", 0.01)
    client = FakeClient(["RUNNING"], {"message": "", "driver_exit_code": None})
    res = follow(tmp_path, client, timeout_s=0.05)
    assert res.timed_out and res.exit_code is None
    assert client.stopped and client.stopped[0].startswith("harness-s-on-")
    (clean,) = client.submitted
    assert (
        clean["submission_id"].endswith("-clean") and " clean --node-root /tmp/harness-ray/s-on-" in clean["entrypoint"]
    )


def test_the_jobs_environment_names_the_run_and_holds_no_token(monkeypatch):
    monkeypatch.setenv("RAY_AUTH_TOKEN", "s3cret")
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 1, "GPU", None)
    launch = Launch(module="m", args=[], env={"A": "1"}, workdir=Path("/r"), node=node)
    env = ray_job.runtime_env(launch, RayRuntime(env={"B": "2"}))
    assert env == {"env_vars": {"B": "2", "PYTHONUNBUFFERED": "1", "A": "1", RUN_ENV: node.job}}
    assert "s3cret" not in repr(env) and "s3cret" not in " ".join(
        ray_job.entry_argv(launch, ScenarioDir(Path("/r")).run("on"), "py")
    )


# --- #82: a cluster that steers, stalls, forges or echoes the token ---------------------------------------------


def bounded(call: Any, seconds: float) -> Any:
    """``call()`` in a thread, which must end within ``seconds`` (a hang fails the test, never stops it); its
    exception, if it raised one, is returned."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"still running after {seconds:g} s"
    return out[0]


JOBS = {"GET /api/jobs/": (200, "[]")}


def test_a_dashboard_that_redirects_to_another_host_is_never_followed():
    with elsewhere() as other:
        with dashboard({"GET /api/version": redirect_to(other.url)}) as dash:
            err = bounded(lambda: Cluster.connect(dash.url), 20)
        assert isinstance(err, InfraError) and "GET /api/version was redirected to another host" in str(err)
        with dashboard({**JOBS, "POST /api/jobs/": redirect_to(other.url)}) as dash:
            cluster = Cluster.connect(dash.url)
            err = bounded(lambda: ray_job._submit(cluster, "job-1", ["python"], {"env_vars": {}}, {}), 20)
        assert isinstance(err, InfraError) and "refused the job" in str(err) and "another host" in str(err)
        with dashboard({**JOBS, "GET /api/jobs/j/logs/tail": redirect_to(other.url)}) as dash:

            async def tail() -> list[str]:
                return [chunk async for chunk in Cluster.connect(dash.url).client.tail_job_logs("j")]

            err = bounded(lambda: asyncio.run(tail()), 20)
        assert isinstance(err, InfraError) and "log tail was redirected" in str(err)
    assert other.heard == []


def test_a_dashboard_that_drips_is_abandoned_at_its_bound(monkeypatch):
    monkeypatch.setattr(ray_cluster, "HTTP_TIMEOUT_S", 2.0)
    for answers in ({"GET /api/version": drip}, {**JOBS, "GET /api/v0/nodes": drip}):
        with dashboard(answers) as dash:
            started = time.monotonic()
            err = bounded(lambda: Cluster.connect(dash.url).nodes(), 30)
            assert time.monotonic() - started < 8
        assert isinstance(err, InfraError) and "not answered within 2 s" in str(err), err


@pytest.mark.parametrize(
    "answers",
    [
        {"GET /api/v0/nodes": (200, "[1, 2]")},
        {"GET /api/v0/nodes": (200, '{"result": true, "data": 5}')},
        {"GET /api/v0/nodes": (200, '{"result": false, "msg": "no\\n::error::all good"}')},
        {"GET /api/v0/nodes": (500, "##[error]all good")},
        {"GET /api/v0/nodes": (200, nodes_listing({"GPU": "many"}, {"GPU": [1]}))},
        {"GET /api/v0/nodes": (200, nodes_listing({"GPU": 1}).replace('"10.0.0.1"', '"h\\n::error::all good"'))},
    ],
    ids=["list", "data-a-number", "msg-forged", "old-form", "resources-not-numbers", "ip-forged"],
)
def test_a_state_api_answer_of_another_shape_or_forged_is_one_escaped_line(answers):
    node = NodeRun.new("/tmp/harness-ray", "s", "on", 2, 1, "GPU", None)
    with dashboard({**JOBS, **answers}) as dash:
        err = bounded(lambda: Cluster.connect(dash.url).check_nodes(node), 20)
    assert isinstance(err, InfraError), err
    line = str(err)
    assert "\n" not in line and "##[" not in line and not line.startswith("::"), line


def test_a_clusters_message_is_one_escaped_line(tmp_path, monkeypatch):
    monkeypatch.setattr(ray_job, "POLL_S", 0.01)
    forged = "boom ##[error]all good\n::error title=ok::merge it"
    with pytest.raises(InfraError) as err:
        follow(tmp_path / "1", FakeClient(["FAILED"], {"message": forged, "driver_exit_code": None}))
    with dashboard({**JOBS, "POST /api/jobs/": (500, forged)}) as dash:
        refused = bounded(lambda: ray_job._submit(Cluster.connect(dash.url), "j", ["py"], {}, {}), 20)
    line = f"HARNESS RAY ERROR: node x: {forged}"
    with pytest.raises(InfraError) as entry:
        follow(tmp_path / "2", FakeClient(["FAILED"], {"message": "", "driver_exit_code": 3}, log=line))
    for said in (str(err.value), str(refused), str(entry.value)):
        assert "all good" in said and "\n" not in said and "##[" not in said, said


def test_a_token_a_dashboard_echoes_never_reaches_a_line(tmp_path, monkeypatch):
    """The token from a file (no variable names it, so only its value can mask it), echoed by a dashboard's error
    page as the reason it refused."""
    value = "file-token-7f3a9c01d2e4"
    (tmp_path / "token").write_text(value + "\n")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "token"))
    with dashboard({"GET /api/jobs/": (403, f"unknown credential {value} for this cluster")}) as dash:
        err = bounded(lambda: Cluster.connect(dash.url), 20)
    line = str(err)
    assert isinstance(err, InfraError) and "refused the harness's token: HTTP 403: unknown credential ***" in line
    assert value not in line and value not in redact(f"stored {value}")


def test_the_jobs_log_is_never_copied_through_a_link_in_the_run_dir(tmp_path, capsys):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    run = ScenarioDir(tmp_path / "s").run("on")
    run.root.mkdir(parents=True)
    run.log.symlink_to(outside)
    cluster = Cluster("http://h:8265", FakeClient(["RUNNING"], {}, log="the job's log\n"), {}, authenticated=True)  # type: ignore[arg-type]
    ray_job._copy_logs(cluster, "job-1", run.log)
    assert outside.read_text() == "keep me"
    assert "Ray job job-1: its log is not copied: " in capsys.readouterr().err
