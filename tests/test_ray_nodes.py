"""verl's real trainer on a real two-node Ray cluster (tests/ray_cluster.py: a head and a worker in two containers on
the Docker engine, an internal network of their own, token authentication), one rank on each node, submitted by
``python -m harness run scenarios/two_nodes_fsdp_l1.yaml --ray-address ...`` as Ray jobs.

In order, on one cluster: bad input that never trains (an unreachable address, no token, a wrong token, too few
nodes, a results dir the head does not share: one line each, exit 2); a run killed by its timeout (the job stopped,
no actor of it alive, every node's run dir removed); the scenario off and on, held before gathering (rank 1's dumps on
the worker's disk only), then every check passing with both ranks' dumps in the results dir, byte for byte the
worker's, each with its node; a held-back node (its dumps deleted before gathering) failing the layout check by name;
a subset of the ranks dumping (precision_debugger.ranks [1]: only rank 1's node holds dumps, and the checks expect
exactly those); verl's finish hook on one rank a node (once each, after the last profiled step, listing what its node
held); the harness SIGKILLed mid-training (its job stops itself once the harness's lease is stale, nothing of it left);
the worker container killed mid-run (a clear infrastructure error naming it), then nothing left: no job running, no
actor alive, no container, no Ray process. The token never appears in the harness's output or the results dir.

The heavy tier (``pytest tests/test_ray_nodes.py --harness-heavy``, ~15 min on 2 cores: docs/several-nodes.md); it
needs the Docker engine (``eval "$(bash .ci/dockerd.sh start)"``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from ray_cluster import LABEL, TwoNodes, two_nodes

from harness.config import RAY_ADDRESS
from harness.errors import InfraError
from harness.scenario.loader import load_scenario
from harness.training.executors import ray_entry, ray_gather, ray_lease
from harness.training.executors.docker import connect
from harness.training.executors.ray_cluster import RUN_ENV, actor_env
from harness.training.slots import heavy_slot
from harness.training.workloads.verl_cpu import assets

pytestmark = [pytest.mark.heavy, pytest.mark.integration, pytest.mark.xdist_group("ray_nodes")]  # one cluster at once

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "scenarios" / "two_nodes_fsdp_l1.yaml"
NAME = SCENARIO.stem
RANK1 = ROOT / "scenarios" / "two_nodes_rank1_fsdp_l1.yaml"  # precision_debugger.ranks [1]
HOOK = ROOT / "scenarios" / "two_nodes_finish_hook_fsdp_l1.yaml"  # verl's finish hook on ranks [0, 1]
REQUIRED = os.environ.get("HARNESS_REQUIRE_DOCKER") == "1"
Pause = Callable[[], None]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TwoNodes, Path]]:
    try:
        connect()
    except InfraError as exc:
        if REQUIRED:
            pytest.fail(f"HARNESS_REQUIRE_DOCKER=1 but {exc}", pytrace=False)
        pytest.skip(f"no Docker engine: {exc}")
    tiny = load_scenario(SCENARIO).workload.tiny
    assets.ensure(tiny)
    with heavy_slot():  # verl's real trainer on this host (in the containers)
        results = tmp_path_factory.mktemp("ray-results")
        nodes = two_nodes(results, assets.paths(tiny).root, tmp_path_factory.mktemp("secrets"))
        print(f"two-node cluster up in {nodes.started_s:.1f}s at {nodes.address}")
        try:
            yield nodes, results
        finally:
            nodes.down()


def command(
    nodes: TwoNodes, results: Path, scenario: Path = SCENARIO, env: dict[str, str] | None = None, *extra: str
) -> tuple[list[str], dict[str, str]]:
    """``python -m harness run`` on the cluster: its argv and environment."""
    base = {k: v for k, v in os.environ.items() if k not in (RAY_ADDRESS.name, "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")}
    base |= {"RAY_AUTH_TOKEN_PATH": str(nodes.token_file), "HARNESS_TIMING": "record"} | (env or {})
    argv = [sys.executable, "-m", "harness", "run", str(scenario), "--heavy", "--results", str(results)]
    return [*argv, "--ray-address", nodes.address, *extra], base


def harness(
    nodes: TwoNodes, results: Path, scenario: Path = SCENARIO, env: dict[str, str] | None = None, *extra: str
) -> tuple[int, str, float]:
    """``python -m harness run`` on the cluster: exit code, stdout+stderr, seconds."""
    argv, base = command(nodes, results, scenario, env, *extra)
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=ROOT, env=base, capture_output=True, text=True, timeout=1800, check=False)
    return proc.returncode, proc.stdout + proc.stderr, time.monotonic() - started


def variant(tmp_path: Path, **changes: Any) -> Path:
    doc = yaml.safe_load(SCENARIO.read_text())
    for dotted, value in changes.items():
        *parents, leaf = dotted.split("__")
        node = doc
        for p in parents:
            node = node[p]
        node[leaf] = value
    path = tmp_path / "scenarios" / SCENARIO.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


class Watch(threading.Thread):
    """Acts on a run's log: at each run's pause before gathering (the gate), calls that run's ``pauses[mode]`` and
    opens the gate; or, on a line, calls ``on_line``."""

    def __init__(self, run_dir: Path, pauses: dict[str, Pause] | None = None,
                 on_line: tuple[str, str, Pause] | None = None) -> None:  # fmt: skip
        super().__init__(daemon=True)
        self.run_dir, self.pauses, self.on_line = run_dir, pauses, on_line
        self.gate = run_dir.parent / "gate"
        self.error: BaseException | None = None
        shutil.rmtree(run_dir, ignore_errors=True)  # an earlier test's logs: the watch reads this run's only
        self.gate.unlink(missing_ok=True)

    @property
    def env(self) -> dict[str, str]:
        return {"HARNESS_TEST_GATHER_GATE": str(self.gate)} if self.pauses is not None else {}

    def _wait_for(self, mode: str, text: str, limit_s: float = 900) -> bool:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                if text in (self.run_dir / mode / "train.log").read_text(errors="replace"):
                    return True
            except OSError:
                pass
            time.sleep(0.5)
        return False

    def run(self) -> None:
        try:
            if self.on_line:
                mode, text, act = self.on_line
                if self._wait_for(mode, text):
                    act()
                return
            for mode in ("off", "on"):
                if not self._wait_for(mode, "waiting for"):
                    return
                if self.pauses and mode in self.pauses:
                    self.pauses[mode]()
                self.gate.touch()
        except BaseException as exc:  # raised in the test after the run
            self.error = exc
            self.gate.touch()


def no_secret(nodes: TwoNodes, out: str, results: Path) -> None:
    token = nodes.token.encode()
    assert token.decode() not in out
    leaked = [p for p in results.rglob("*") if p.is_file() and not p.is_symlink() and token in p.read_bytes()]
    assert leaked == [], f"the token is written in {leaked}"


def rank_files(files: dict[str, str], rank: int) -> dict[str, str]:
    """``<run id>/dumps/<rel>`` of a node's listing -> ``<rel>``, for one rank's dumps."""
    return {p.split("/dumps/", 1)[1]: h for p, h in files.items() if "/dumps/" in p and f"/rank{rank}/" in p}


def test_bad_input_is_one_line_and_trains_nothing(cluster, tmp_path):
    nodes, results = cluster
    assert nodes.network.attrs["Internal"] is True
    for c in nodes.containers.values():
        c.reload()
        assert not c.attrs["HostConfig"].get("PortBindings") and not c.attrs["NetworkSettings"]["Ports"]
    empty = tmp_path / "empty-token"
    empty.write_text("")
    cases = [
        ({}, ["--ray-address", "http://127.0.0.1:9"], None, "the Ray cluster at http://127.0.0.1:9: GET /api/version: "
         "ConnectionError"),
        ({"RAY_AUTH_TOKEN_PATH": str(empty)}, [], None, "refused no token (none is set on this host)"),
        ({"RAY_AUTH_TOKEN": "0" * 64}, [], None, "refused the harness's token: HTTP 403: Forbidden"),
        ({}, [], variant(tmp_path / "three", world_size=3, workload__nnodes=3),
         "has 2 alive node(s) with 1 GPU each, the scenario needs 3"),
        ({}, ["--results", str(tmp_path / "not-shared")], None,
         "is not on the node running the job's driver (head) at the same path"),
    ]  # fmt: skip
    for env, extra, scenario, line in cases:
        rc, out, seconds = harness(nodes, results, scenario or SCENARIO, env, *extra)
        print(f"{line[:50]}...: exit {rc} in {seconds:.1f}s")
        assert rc == 2 and line in out, out[-3000:]
        assert "Traceback" not in out
        no_secret(nodes, out, results)
    assert not [j for j in nodes.get("/api/jobs/") if j["status"] in ("PENDING", "RUNNING")]


def test_a_timed_out_run_stops_its_job_and_leaves_nothing_on_the_cluster(cluster, tmp_path):
    nodes, results = cluster
    before = {j["submission_id"] for j in nodes.get("/api/jobs/")}  # the bad input's refused jobs among them
    rc, out, seconds = harness(nodes, results, variant(tmp_path, executor__timeout_s=45))
    print(f"timeout: exit {rc} in {seconds:.1f}s")
    assert rc == 2 and "timed out after 45s" in out, out[-3000:]
    jobs = [
        j
        for j in nodes.get("/api/jobs/")
        if j["submission_id"] not in before and not j["submission_id"].endswith("-clean")
    ]
    assert jobs and all(j["status"] == "STOPPED" for j in jobs)
    for job in jobs:
        assert alive_actors(nodes, job["submission_id"]) == []
    assert nodes.files("head") == {} and nodes.files("worker") == {}  # every node's run dir removed


def alive_actors(nodes: TwoNodes, run: str) -> list[str]:
    found = nodes.get("/api/v0/actors?detail=1&limit=10000&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE")
    return [a["class_name"] for a in found["data"]["result"]["result"] if actor_env(a).get(RUN_ENV) == run]


def test_every_nodes_dumps_reach_the_results_dir_with_their_node_and_every_check_passes(cluster):
    nodes, results = cluster
    seen: dict[str, Any] = {}

    def before_gathering() -> None:
        seen["head"], seen["worker"] = nodes.files("head"), nodes.files("worker")
        seen["results"] = sorted(p.name for p in (results / NAME / "on").rglob("dump.json"))

    watch = Watch(results / NAME, pauses={"on": before_gathering})
    watch.start()
    rc, out, seconds = harness(nodes, results, env=watch.env)
    watch.join(timeout=60)
    print(f"off and on on two nodes: exit {rc} in {seconds:.1f}s")
    assert watch.error is None, watch.error
    assert rc == 0, out[-4000:]
    # before gathering: rank 1's dumps on the worker's disk only, none in the results dir
    assert rank_files(seen["head"], 0) and not rank_files(seen["head"], 1)
    assert rank_files(seen["worker"], 1) and not rank_files(seen["worker"], 0)
    assert seen["results"] == []
    # after: both ranks' dumps in the results dir, the worker's byte for byte, each with its node, every check passing
    dumps = results / NAME / "on" / "dumps"
    for rank, node in ((0, "head"), (1, "worker")):
        for rel, sha in rank_files(seen[node], rank).items():
            assert hashlib.sha256((dumps / rel).read_bytes()).hexdigest() == sha, rel
    record = yaml.safe_load((results / NAME / "on" / "nodes.json").read_text())
    placed = {n["ip"]: n["ranks"] for n in record["nodes"]}
    assert placed == {nodes.ips["head"]: [0], nodes.ips["worker"]: [1]} and record["complete"] is True
    # the machine under each node: both containers stand on this one (verl's RayJob pods must not: ray_entry setup)
    assert {n["host"] for n in record["nodes"]} == {ray_gather.host_of()} != {""}
    doc = yaml.safe_load((results / NAME / "results.json").read_text())
    verdicts = {name: c["passed"] for name, c in doc["checks"].items()}
    assert verdicts == dict.fromkeys(("crash", "layout", "contents", "overhead", "disk"), True), verdicts
    disk = doc["checks"]["disk"]["figures"]
    for index, node in enumerate(("head", "worker")):  # node<i>: the node of rank i; its dumps' bytes on its disk
        assert disk[f"disk.node{index}_bytes"] == sum(
            (dumps / rel).stat().st_size for rel in rank_files(seen[node], index)
        )
    assert nodes.files("head") == {} and nodes.files("worker") == {}  # gathered, then removed from every node
    no_secret(nodes, out, results)


def test_a_held_back_node_fails_naming_it_and_its_ranks(cluster):
    nodes, results = cluster
    delete = "import glob, shutil; [shutil.rmtree(d) for d in glob.glob('/tmp/harness-ray/*/dumps')]"
    watch = Watch(results / NAME, pauses={"on": lambda: nodes.run_in("worker", delete)})
    watch.start()
    rc, out, seconds = harness(nodes, results, env=watch.env)
    watch.join(timeout=60)
    print(f"held-back node: exit {rc} in {seconds:.1f}s")
    assert watch.error is None, watch.error
    worker = f"node {nodes.ips['worker']} (worker, "
    assert rc == 1, out[-4000:]
    assert (
        f"layout: {worker}" in out and "(ranks [1]): of its 6 expected dump dirs, none reached the results dir" in out
    )
    assert f"missing dump dir step_2/actor_update/step0/rank1 on {worker}" in out


def test_a_rank_subset_dumps_on_its_ranks_node_only_and_the_checks_expect_exactly_that(cluster):
    """precision_debugger.ranks [1] (msprobe's rank filter) on two nodes, one rank each: only the node Ray placed rank
    1 on holds dumps, on its disk before gathering and in the results dir after; layout expects exactly rank 1's dirs
    on that node and none on the other, disk has that node's figure only; every check passes."""
    nodes, results = cluster
    name = RANK1.stem
    seen: dict[str, Any] = {}

    def before_gathering() -> None:
        seen["head"], seen["worker"] = nodes.files("head"), nodes.files("worker")

    watch = Watch(results / name, pauses={"on": before_gathering})
    watch.start()
    rc, out, seconds = harness(nodes, results, RANK1, watch.env)
    watch.join(timeout=60)
    print(f"ranks [1] on two nodes: exit {rc} in {seconds:.1f}s")
    assert watch.error is None, watch.error
    assert rc == 0, out[-4000:]
    record = yaml.safe_load((results / name / "on" / "nodes.json").read_text())
    by_ip = {ip: node for node, ip in nodes.ips.items()}
    placed = {by_ip[n["ip"]]: n for n in record["nodes"]}
    holder = next(node for node, n in placed.items() if n["ranks"] == [1])  # Ray's placement, not rank order
    other = next(node for node in placed if node != holder)
    assert placed[other]["ranks"] == [0] and record["complete"] is True
    # before gathering: rank 1's dumps on its node's disk, not a dump file on the other node's
    assert rank_files(seen[holder], 1)
    assert [p for p in seen[other] if "/dumps/" in p] == []
    assert placed[holder]["dump_ranks"] == [1] and placed[other]["dump_ranks"] == [] and placed[other]["bytes"] == 0
    # after: rank 1's dumps alone in the results dir, byte for byte its node's
    dumps = results / name / "on" / "dumps"
    assert {p.parent.name for p in dumps.rglob("dump.json")} == {"rank1"}
    for rel, sha in rank_files(seen[holder], 1).items():
        assert hashlib.sha256((dumps / rel).read_bytes()).hexdigest() == sha, rel
    doc = yaml.safe_load((results / name / "results.json").read_text())
    verdicts = {check: c["passed"] for check, c in doc["checks"].items()}
    assert verdicts == dict.fromkeys(("crash", "layout", "contents", "overhead", "disk"), True), verdicts
    layout, disk = doc["checks"]["layout"], doc["checks"]["disk"]["figures"]
    assert layout["figures"] == {"layout.expected_dirs": 6, "layout.found_dirs": 6}  # 2 steps x 3 stages, rank 1
    notes = {n.split(":", 1)[0]: n for n in layout["notes"] if "(Ray)" in n}
    assert len(notes) == 2
    holder_note = next(n for n in notes.values() if nodes.ips[holder] + " " in n)
    other_note = next(n for n in notes.values() if nodes.ips[other] + " " in n)
    assert "ranks [1] (Ray), expected the dumps of ranks [1], rank dirs [1] gathered" in holder_note
    assert "ranks [0] (Ray), expected no dumps (expected ranks [1]), rank dirs [] gathered" in other_note
    assert sorted(k for k in disk if k.startswith("disk.node")) == ["disk.node1_bytes"]  # node1: the node of rank 1
    assert disk["disk.node1_bytes"] == sum((dumps / rel).stat().st_size for rel in rank_files(seen[holder], 1))
    assert nodes.files("head") == {} and nodes.files("worker") == {}
    no_secret(nodes, out, results)


def test_verls_finish_hook_runs_once_a_node_after_the_last_profiled_step_listing_what_its_node_holds(cluster):
    """finish_hook_cmd on finish_hook_ranks [0, 1] (one rank a node): each rank's hook ran once, on the node Ray placed
    it on, after step 4 (the last profiled), and listed exactly the dumps that node's disk held before gathering, file
    for file and byte for byte (sha256); the job gathered each node's listing beside its dumps; layout passes."""
    nodes, results = cluster
    name = HOOK.stem
    seen: dict[str, Any] = {}

    def before_gathering() -> None:
        seen["head"], seen["worker"] = nodes.files("head"), nodes.files("worker")

    watch = Watch(results / name, pauses={"on": before_gathering})
    watch.start()
    rc, out, seconds = harness(nodes, results, HOOK, watch.env)
    watch.join(timeout=60)
    print(f"finish hook on two nodes: exit {rc} in {seconds:.1f}s")
    assert watch.error is None, watch.error
    assert rc == 0, out[-4000:]
    doc = yaml.safe_load((results / name / "results.json").read_text())
    verdicts = {check: c["passed"] for check, c in doc["checks"].items()}
    assert verdicts == dict.fromkeys(("crash", "layout", "contents", "overhead", "disk"), True), verdicts
    record = yaml.safe_load((results / name / "on" / "nodes.json").read_text())
    by_ip = {ip: node for node, ip in nodes.ips.items()}
    node_of = {n["ranks"][0]: by_ip[n["ip"]] for n in record["nodes"]}
    assert sorted(node_of) == [0, 1] and set(node_of.values()) == {"head", "worker"}
    hooks = results / name / "on" / "finish_hook"
    assert sorted(p.name for p in hooks.iterdir()) == ["rank0.jsonl", "rank1.jsonl"]
    for rank, node in node_of.items():
        lines = (hooks / f"rank{rank}.jsonl").read_text().splitlines()
        assert len(lines) == 1, lines  # once, not once a profiled step or once a role
        run = json.loads(lines[0])
        assert run["rank"] == rank and run["host"] == node and run["refused"] == []
        listed = {f["path"]: f["sha256"] for f in run["files"]}
        assert listed == rank_files(seen[node], rank)  # what its node's disk held, before gathering
        assert any(p.startswith("step_4/actor_update/step0/") for p in listed)  # after the last profiled step
        notes = [n for n in doc["checks"]["layout"]["notes"] if n.startswith(f"finish hook: rank {rank} on ")]
        assert len(notes) == 1 and f"node {nodes.ips[node]} (" in notes[0] and "ran 1 time(s)" in notes[0], notes
    log = (results / name / "on" / "train.log").read_text(errors="replace")
    assert log.index("[Profiler][finish_hook]") > log.index("step:3 ")  # it ran at step 4, the last profiled
    assert nodes.files("head") == {} and nodes.files("worker") == {}
    no_secret(nodes, out, results)


def test_a_sigkilled_harness_leaves_a_job_that_stops_itself_and_nothing_behind(cluster, tmp_path):
    """The harness killed outright mid-training (SIGKILL: nothing of it runs again, no stop, no clean-up job): its
    lease goes stale, the job's entrypoint stops the training, waits for its actors and removes every node's run
    dir; the job ends on its own within the lease's bound and nothing of the run is left on the cluster."""
    nodes, results = cluster
    before = {j["submission_id"] for j in nodes.get("/api/jobs/")}
    # 30 steps: the training (4-5 s a step here after the first) outlasts the lease's bound after step 1
    argv, env = command(nodes, results, variant(tmp_path, steps=30))
    log = (tmp_path / "harness.log").open("w")
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    started: list[float] = []
    children: list[psutil.Process] = []

    def kill() -> None:
        children.extend(psutil.Process(proc.pid).children(recursive=True))
        os.kill(proc.pid, signal.SIGKILL)
        started.append(time.monotonic())

    watch = Watch(results / NAME, on_line=("off", "step:1 ", kill))
    watch.start()
    try:
        while watch.is_alive() and proc.poll() is None:  # a harness that ends before its step 1 fails the test now
            time.sleep(1)
        watch.join(timeout=30)
        assert watch.error is None and started, (tmp_path / "harness.log").read_text()[-3000:]
        assert proc.wait(30) == -signal.SIGKILL
        jobs = [j for j in nodes.get("/api/jobs/") if j["submission_id"] not in before]
        assert [j["status"] for j in jobs] == ["RUNNING"], jobs  # the harness is gone, its job trains on
        job = jobs[0]["submission_id"]
        assert alive_actors(nodes, job)
        bound = ray_lease.STALE_S + ray_entry.ABANDON_S
        while (status := nodes.get(f"/api/jobs/{job}")["status"]) not in ("SUCCEEDED", "FAILED", "STOPPED"):
            assert time.monotonic() - started[0] < bound + 30, f"the job still {status} after the harness was killed"
            time.sleep(1)
        ended = time.monotonic() - started[0]
        said = nodes.get(f"/api/jobs/{job}/logs")["logs"]
        print(f"harness SIGKILLed: its job {status} on its own {ended:.1f}s later (bound {bound:g}s)")
        assert status == "FAILED" and ended < bound, said[-3000:]
        assert "HARNESS RAY ERROR: the harness stopped renewing its lease" in said
        assert "no actor of it is alive, its run dir removed from every node" in said, said[-3000:]
        assert alive_actors(nodes, job) == []
        assert nodes.files("head") == {} and nodes.files("worker") == {}
        for name, c in nodes.containers.items():  # no process of the run: its driver, trainer or workers
            left = [row[-1] for row in c.top(ps_args="-eo pid,args")["Processes"]
                    if any(k in row[-1] for k in ("ray_entry", "TaskRunner", "WorkerDict", "main_ppo"))]  # fmt: skip
            assert left == [], f"{name}: {left}"
        assert psutil.wait_procs(children, timeout=30)[1] == [], "the harness's children outlived it"
        assert not [j for j in nodes.get("/api/jobs/") if j["status"] in ("PENDING", "RUNNING")]
    finally:
        proc.kill()
        proc.wait()
        log.close()


def test_killing_the_worker_mid_run_is_a_clear_verdict_and_leaves_nothing_behind(cluster):
    nodes, results = cluster
    watch = Watch(results / NAME, on_line=("on", "step:1 ", lambda: nodes.containers["worker"].kill()))
    watch.start()
    rc, out, seconds = harness(nodes, results)
    watch.join(timeout=60)
    print(f"worker killed mid-run: exit {rc} in {seconds:.1f}s")
    assert watch.error is None, watch.error
    assert rc == 2, out[-4000:]
    named = f"node {nodes.ips['worker']} ("  # its host name unread when it never answered; Ray marks it dead or not yet
    assert named in out and ("(ranks [1]) died during the run" in out or "(ranks [1]) gathering stopped" in out), out[
        -4000:
    ]
    jobs = [j for j in nodes.get("/api/jobs/") if j["submission_id"].startswith("harness-")]
    assert all(j["status"] in ("SUCCEEDED", "FAILED", "STOPPED") for j in jobs), jobs
    assert not [a for j in jobs for a in alive_actors(nodes, j["submission_id"])]
    head = nodes.containers["head"]
    ray = [psutil.Process(int(row[1])) for row in head.top()["Processes"] if "ray" in row[-1]]  # host pids
    assert any(p.name() == "raylet" for p in ray)
    client = nodes.client
    nodes.down()
    assert client.containers.list(all=True, filters={"label": LABEL}) == []
    assert client.networks.list(filters={"label": LABEL}) == []
    assert psutil.wait_procs(ray, timeout=30)[1] == [], "Ray processes of the cluster outlived its containers"
