"""The entrypoint of a run's Ray job: ``python -m harness.training.executors.ray_entry run ... -- MODULE ARGS``, run
by Ray on the node that holds the job's driver (the head), with the run dir at the same path as on the harness's host
(a filesystem they share: what the job gathers there outlives a cluster made for one job).

1. Checks that the run dir is here, then on every alive node (a Ray task pinned to it): makes the run's own dir
   (``NodeRun.root``), places the msprobe config there, and says which inputs (model, data) the node lacks.
2. Runs the training (``MODULE``, verl's ``main_ppo``) in this process: its ``ray.init`` joins the cluster.
3. Reads from Ray which node each rank ran on (the training's actors whose runtime environment sets ``RANK``),
   gathers every node's dumps and metrics into the run dir (``ray_gather``), writes ``nodes.json`` and removes each
   node's run dir.

Under verl's RayJob submitter (executor ``rayjob``) a fresh cluster holds nothing of the run: ``ray_entry setup``
comes first (``setup``: the harness's lease seen renewed, every node on a machine of its own, every node set up from
the run's checked bundle).

A failure of its own (no run dir here, an input missing on a node, a node lost while gathering) is one line
``HARNESS RAY ERROR: ...`` at the end of the job's log, which the executor turns into an infrastructure error; the
training's own failure keeps its exit code and traceback (the crash classifier reads them). SIGTERM (the job
stopped) ends it at once: a stopped run is not gathered, its node dirs are removed by the executor's clean-up job.

A harness killed outright (SIGKILL) stops nothing: from the start the entrypoint watches the harness's lease
(``ray_lease``); once the harness has stopped renewing it, the entrypoint stops the training (an interrupt in its
main thread, as Ctrl-C: the training's driver unwinds out of ``ray.get``; not SIGTERM, after which Ray 2.60 aborts
the process at its next ``ray.init``, measured), ends the driver's connection (Ray then ends the training's actors,
which it owns), waits until no actor of the run is alive, removes the run from every node and fails with its
``HARNESS RAY ERROR:`` line.
Should the training not unwind, the entrypoint exits at once ``ABANDON_S`` later (its actors die with their owner).
"""

from __future__ import annotations

import _thread
import argparse
import contextlib
import hashlib
import json
import os
import runpy
import signal
import socket
import sys
import threading
import time
import traceback
from pathlib import Path
from types import FrameType
from typing import Any

from harness import config
from harness.artifacts.nodes import NodeDoc, NodesRecord
from harness.outcomes import EXIT_ERROR
from harness.training.executors import ray_gather, ray_lease

ERROR = "HARNESS RAY ERROR:"
MARKER = ".ray-job"  # the run dir's proof that the job sees it: the executor writes the job's id there
PREPARE_TIMEOUT_S = 300
GET_TIMEOUT_S = 300  # one message of a node's stream; a node that sends nothing that long is lost
GATE_WAIT_S = 600
ABANDON_S = 180  # a stale lease: the training's unwinding and the clean-up, at most; then the entrypoint exits
ACTORS_GONE_S = 60
JOB_CONFIG = "RAY_JOB_CONFIG_JSON_ENV_VAR"  # the job config Ray hands a job's driver (its runtime environment)
SUPERVISOR = "JobSupervisor"  # Ray's actor that runs a job's entrypoint
PLACEMENT = "Ray's actors of the training whose runtime environment sets RANK (state API)"


class Failed(Exception):
    """The job's own failure, in one line."""


def say(line: str) -> None:
    print(f"harness ray job: {line}", flush=True)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def _pinned(fn: Any, node_id: str, **options: Any) -> Any:
    """``fn`` as a Ray task that runs on that node or not at all."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
    return ray.remote(num_cpus=0, max_retries=0)(fn).options(scheduling_strategy=strategy, **options)


def alive_nodes() -> list[dict[str, Any]]:
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def _doc(n: dict[str, Any], ranks: list[int]) -> NodeDoc:
    """A node of ``ray.nodes()`` as the record has it."""
    head = bool(n.get("Resources", {}).get("node:__internal_head__"))
    return NodeDoc(node_id=n["NodeID"], ip=n.get("NodeManagerAddress", "?"), ranks=ranks, head=head,
                   alive=bool(n.get("Alive")))  # fmt: skip


def prepare_nodes(root: str, run_dir: Path, inputs: list[str]) -> None:
    """Every alive node: its run dir, the msprobe config, the inputs checked; Failed naming each node's lack."""
    import ray

    config = run_dir / "msprobe_config.json"
    files = {"msprobe_config.json": config.read_bytes()} if config.is_file() else {}
    nodes = alive_nodes()
    refs = [_pinned(ray_gather.prepare, n["NodeID"]).remote(root, files, inputs) for n in nodes]
    try:
        facts = ray.get(refs, timeout=PREPARE_TIMEOUT_S)
    except Exception as exc:  # any Ray error here is the cluster's: one line
        raise Failed(f"preparing the nodes failed: {type(exc).__name__}: {_first(exc)}") from None
    problems = []
    for f in facts:
        name = f"node {f['ip']} ({f['hostname']})"
        problems += [f"{name}: {f['error']}"] if f["error"] else []
        problems += [f"{name}: {p} is absent (model and data must lie at the same path on every node)"
                     for p in f["missing"]]  # fmt: skip
        if not f["error"]:
            say(f"{name}: run dir {root} made")
    if problems:
        raise Failed("; ".join(problems))


def _first(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


def train(module: str, args: list[str]) -> int:
    """The training, in this process (its ``ray.init`` joins the cluster); its exit code."""
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return int(exc.code or 0)
        print(exc.code, file=sys.stderr, flush=True)
        return 1
    except Exception:  # the training's own failure: its traceback for the crash classifier
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0


def run_actors(run: str, alive_only: bool = False) -> list[tuple[Any, dict[str, str]]]:
    """The training's actors (``RUN_ENV`` in their environment) with their environment, from Ray's state API."""
    from ray.util.state import list_actors

    from harness.training.executors.ray_cluster import RUN_ENV, actor_env

    filters = [("state", "=", "ALIVE")] if alive_only else None
    found = []
    for actor in list_actors(filters=filters, detail=True, limit=10_000, raise_on_missing_output=False):
        env = actor_env({"serialized_runtime_env": getattr(actor, "serialized_runtime_env", None)})
        if env.get(RUN_ENV) == run:
            found.append((actor, env))
    return found


def placement(run: str) -> dict[str, list[int]]:
    """node id -> the ranks Ray placed there: the training's actors whose runtime environment sets ``RANK``."""
    out: dict[str, set[int]] = {}
    for actor, env in run_actors(run):
        rank, node = env.get("RANK", ""), getattr(actor, "node_id", None)
        if rank.isdigit() and node:
            out.setdefault(node, set()).add(int(rank))
    return {node: sorted(ranks) for node, ranks in out.items()}


def gather(root: str, run_dir: Path, run: str) -> NodesRecord:
    """Every alive node's dumps and metrics into the run dir; the record of what came from where, and of the nodes
    Ray placed ranks on that are gone."""
    import ray

    placed = placement(run)
    nodes = {n["NodeID"]: n for n in ray.nodes()}  # the dead too: a node lost during the run is named
    taken: dict[str, str] = {}
    docs, errors = [], []
    for n in nodes.values():
        if not n.get("Alive"):
            continue
        doc = _doc(n, placed.get(n["NodeID"], []))
        receiver = ray_gather.Receiver(run_dir, taken, doc.name)
        stream = _pinned(ray_gather.ship, doc.node_id, num_returns="streaming").remote(root)
        try:
            for ref in stream:
                msg = ray.get(ref, timeout=GET_TIMEOUT_S)
                if msg[0] == "node":
                    doc.hostname, doc.host = msg[1]["hostname"], msg[1].get("host", "")
                else:
                    receiver.take(msg)
        except Exception as exc:  # a node lost mid-stream: what came is kept, the rest said
            receiver.abandon()
            doc.problem = f"gathering stopped after {receiver.files} files: {type(exc).__name__}: {_first(exc)}"
            errors.append(f"{doc.name} (ranks {doc.ranks}): {doc.problem}")
        doc.files, doc.bytes, doc.refused = receiver.files, receiver.bytes, receiver.refused
        doc.dump_ranks = sorted(receiver.rank_dirs)
        refused = f", {len(doc.refused)} refused" if doc.refused else ""
        say(f"{doc.name}: ranks {doc.ranks} (Ray), gathered {doc.files} files, {doc.bytes} bytes{refused}"
            + (f"; {doc.problem}" if doc.problem else ""))  # fmt: skip
        docs.append(doc)
    for node, ranks in placed.items():
        if not nodes.get(node, {}).get("Alive"):  # placed, then lost with its disk before anything was gathered
            doc = _doc(nodes[node], ranks) if node in nodes else NodeDoc(node_id=node, ip="?", ranks=ranks)
            doc.alive, doc.problem = False, "the node died during the run"
            docs.append(doc)
            errors.append(f"{doc.name} (ranks {ranks}) died during the run: its dumps cannot be gathered")
    error = "; ".join(errors) or None
    return NodesRecord(job=run, nodes=docs, placement=PLACEMENT, complete=error is None, error=error)


def clean_nodes(root: str) -> None:
    import ray

    refs = [_pinned(ray_gather.clean, n["NodeID"]).remote(root) for n in alive_nodes()]
    try:
        left = [f"node {f['ip']}" for f in ray.get(refs, timeout=PREPARE_TIMEOUT_S) if f["left"]]
    except Exception as exc:
        say(f"removing the nodes' run dirs failed: {type(exc).__name__}: {_first(exc)}")
        return
    say(f"run dir {root} removed from every node" + (f" but {', '.join(left)}" if left else ""))


def _gate() -> None:
    """TEST ONLY: hold the gathering until a test has looked at (or changed) the nodes' disks and made the file the
    variable names; the file is then removed, so the next run waits again."""
    if not (gate := config.GATHER_GATE.get()):
        return
    say(f"waiting for {gate} before gathering ({config.GATHER_GATE.name}, TEST ONLY)")
    deadline = time.monotonic() + GATE_WAIT_S
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.5)
    with contextlib.suppress(OSError):
        os.unlink(gate)


def run(args: argparse.Namespace) -> int:
    run_dir = Path(args.run)
    marker = run_dir / MARKER
    here = socket.gethostname()
    if not marker.is_file() or marker.read_text().strip() != args.job:
        raise Failed(
            f"the run dir {run_dir} is not on the node running the job's driver ({here}) at the same path: the "
            "job gathers every node's dumps there, so the results dir must be on a filesystem the harness's host "
            "and the cluster's head share"
        )
    say(f"driver on {here}; run dir {run_dir}")
    last_resort = threading.Timer(ABANDON_S, _exit_stuck)
    last_resort.daemon = True

    def stale(silent_s: float) -> None:
        """In the lease's watch: the training interrupted in the main thread (it unwinds there and ``run`` cleans
        up); should that not end within ABANDON_S, this process exits (its actors die with it)."""
        say(f"the harness's lease unchanged for {silent_s:.0f}s: the harness is gone; stopping the training")
        last_resort.start()
        _thread.interrupt_main()

    # the interrupt lands only where SIGINT is Python's (a process may inherit it ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    watch = ray_lease.Watch(run_dir / ray_lease.FILE, args.lease_stale_s, stale)
    watch.start()
    try:
        code = _run(args, run_dir, watch.expired)
        if not watch.expired.is_set():
            return code
    except (KeyboardInterrupt, SystemExit):  # the interrupt of a stale lease; or the job stopped
        if not watch.expired.is_set():
            raise
    finally:
        watch.close()
    left = abandon(args.node_root, args.job)
    last_resort.cancel()
    raise Failed(
        f"the harness stopped renewing its lease for more than {args.lease_stale_s:g}s (killed, or cut off from the "
        f"run dir): the training was stopped, "
        + (f"{len(left)} of its actors still alive ({', '.join(left)})" if left else "no actor of it is alive")
        + ", its run dir removed from every node"
    )


def _exit_stuck() -> None:
    print(f"{ERROR} the harness's lease went stale and the training did not stop within {ABANDON_S}s: exiting "
          "(its actors end with this driver; its node dirs may be left)", flush=True)  # fmt: skip
    os._exit(EXIT_ERROR)


def abandon(root: str, job: str) -> list[str]:
    """After a stale lease: the training's driver disconnected (Ray ends the actors it owns), then, as a new driver,
    wait until none of the run's actors is alive and remove its node dirs; the class names still alive."""
    import ray

    with contextlib.suppress(Exception):
        ray.shutdown()
    connect()
    deadline = time.monotonic() + ACTORS_GONE_S
    while (left := _training_actors(job)) and time.monotonic() < deadline:
        time.sleep(1)
    clean_nodes(root)
    return left


def _training_actors(job: str) -> list[str]:
    """The class names of the run's alive actors but the job's own supervisor (it carries the job's environment
    and ends with this entrypoint: measured, the one actor left after a stale lease)."""
    names = (str(getattr(a, "class_name", "?")) for a, _ in run_actors(job, alive_only=True))
    return sorted({n for n in names if n != SUPERVISOR})


def adopt_env(path: str) -> None:
    """Under verl's RayJob submitter (executor rayjob) the job's runtime environment is the submitter's, not the
    harness's: the run's variables (its id on every actor, the workload's) are set in this process and added to the
    job config that Ray hands every driver of it (``RAY_JOB_CONFIG_JSON_ENV_VAR``), so every actor and task of the
    training carries them as under the ray executor's runtime environment."""
    env = json.loads(Path(path).read_text())
    os.environ.update(env)
    job = json.loads(os.environ.get(JOB_CONFIG) or "{}")
    job.setdefault("runtime_env", {}).setdefault("env_vars", {}).update(env)
    os.environ[JOB_CONFIG] = json.dumps(job)


def setup(args: argparse.Namespace) -> int:
    """Under verl's RayJob submitter, before ``run``, as verl's own multi-node nightly sets its fresh cluster up (a task
    pinned to every alive node), but nothing read from the shared cache: the job script hands this driver the run's
    bundle as it copied and checked it on this pod's own disk.

    1. The harness's lease is seen renewed before anything (``ray_lease.renewed``): the harness is alive, and this pod
       sees what its host writes into the shared filesystem. It is watched from then on: a harness gone while the
       pods start or the nodes are set up ends the job here, as it ends the training.
    2. The cluster has the nodes asked, each on a machine of its own: two pods on one machine (the same kernel boot
       id) would make a run "across nodes" of one machine, and it is the job's failure, said so.
    3. Every node is set up from the bundle, sent through Ray (``ray_gather.setup_node``: the verl under test installed
       not editable, or the image's release checked; msprobe's wheels; the harness)."""
    lease = Path(args.run) / ray_lease.FILE
    if not ray_lease.renewed(lease, args.lease_stale_s):
        raise Failed(
            f"the harness's lease {lease} did not change within {args.lease_stale_s:g}s as this pod sees it: the "
            "harness is gone, or the shared filesystem does not show this pod what the harness's host writes (its "
            "cache: no close-to-open consistency); nothing was set up"
        )
    signal.signal(signal.SIGINT, signal.default_int_handler)
    watch = ray_lease.Watch(lease, args.lease_stale_s, lambda _silent: _thread.interrupt_main())
    watch.start()
    try:
        _setup(args)
    except KeyboardInterrupt:
        if not watch.expired.is_set():
            raise
        raise Failed(
            f"the harness stopped renewing its lease for more than {args.lease_stale_s:g}s while the nodes were set up "
            "(killed, or cut off from the run dir): the training was never started"
        ) from None
    finally:
        watch.close()
    return 0


def _setup(args: argparse.Namespace) -> None:
    import ray
    from ray import cloudpickle

    # the nodes hold no harness yet: they run this driver's own copy of the node-side code, sent by value
    cloudpickle.register_pickle_by_value(ray_gather)
    ray.init(address="auto", logging_level="WARNING")
    nodes = [n for n in alive_nodes() if float(n.get("Resources", {}).get(args.resource, 0)) > 0]
    if len(nodes) < args.nodes:
        offered = ", ".join(f"{n.get('NodeManagerAddress')}: {n.get('Resources', {}).get(args.resource, 0):g}"
                            for n in alive_nodes()) or "none alive"  # fmt: skip
        raise Failed(f"{args.nodes} nodes with {args.resource} wanted, the RayJob's cluster has {len(nodes)} "
                     f"({offered})")  # fmt: skip
    try:
        facts = ray.get([_pinned(ray_gather.node_facts, n["NodeID"]).remote() for n in nodes], timeout=GET_TIMEOUT_S)
    except Exception as exc:
        raise Failed(f"reading the nodes failed: {type(exc).__name__}: {_first(exc)}") from None
    if problem := one_machine(facts):
        raise Failed(problem)
    bundle = Path(args.bundle).read_bytes()  # this pod's own copy, checked by the job script
    digest, ref = hashlib.sha256(bundle).hexdigest(), ray.put(bundle)
    refs = [_pinned(ray_gather.setup_node, n["NodeID"]).remote(ref, digest, args.verl_version)
            for n in alive_nodes()]  # fmt: skip
    try:
        for fact in ray.get(refs, timeout=PREPARE_TIMEOUT_S):
            say(fact["line"])
    except Exception as exc:  # a node that cannot install the verl under test: the cluster's, one line
        raise Failed(f"setting the nodes up failed: {type(exc).__name__}: {_first(exc)}") from None


def one_machine(facts: list[dict[str, Any]]) -> str | None:
    """Why the nodes the training spans do not stand on machines of their own (their ``host``: the kernel's boot
    id), or None. A node whose host cannot be read is said and not counted."""
    by_host: dict[str, list[str]] = {}
    for f in facts:
        name = f"node {f['ip']} ({f['hostname']})"
        if not f.get("host"):
            say(f"{name}: its machine cannot be told ({ray_gather.BOOT_ID} unreadable): not checked")
            continue
        by_host.setdefault(f["host"], []).append(name)
    shared = {host: names for host, names in by_host.items() if len(names) > 1}
    if not shared:
        say("every node on a machine of its own: " + ", ".join(f"{n[0]} on {h[:8]}" for h, n in by_host.items()))
        return None
    return "; ".join(
        f"{' and '.join(names)} are pods of one machine (kernel boot id {host[:8]})" for host, names in shared.items()
    ) + (f": the training would span {len(by_host)} machine(s), not {len(facts)} (each pod must take a whole "
         "machine: verl's RayJob asks for all 16 NPUs of an A3 node a pod)")  # fmt: skip


def _run(args: argparse.Namespace, run_dir: Path, expired: threading.Event) -> int:
    import ray

    if args.env_json:
        adopt_env(args.env_json)
    connect()
    prepare_nodes(args.node_root, run_dir, args.input)
    ray.shutdown()
    # the training's ray.init passes verl's runtime env: where it names a key the job's has too, verl's wins
    os.environ["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    started = time.monotonic()
    code = train(args.module, args.args)
    say(f"the training ended with exit code {code} after {time.monotonic() - started:.1f} s")
    if expired.is_set():
        return code
    if not ray.is_initialized():
        connect()
    _gate()
    record = gather(args.node_root, run_dir, args.job)
    record.write(run_dir / "nodes.json")
    clean_nodes(args.node_root)
    if record.error:
        if code == 0:
            raise Failed(f"gathering incomplete (nodes.json): {record.error}")
        say(f"gathering incomplete (nodes.json): {record.error}")
    return code


def connect() -> None:
    """This driver joins the cluster; its tasks run this interpreter on every node (the harness is importable)."""
    import ray

    ray.init(address="auto", logging_level="WARNING", runtime_env={"py_executable": sys.executable})


def clean(args: argparse.Namespace) -> int:
    """After a stopped run: every node's run dir removed."""
    connect()
    clean_nodes(args.node_root)
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m harness.training.executors.ray_entry")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run")
    r.add_argument("--run", required=True, help="the run dir, as the harness's host has it")
    r.add_argument("--node-root", required=True, help="the run's own dir on every node")
    r.add_argument("--job", required=True, help="the job's submission id")
    r.add_argument("--input", action="append", default=[], help="a path every node must hold")
    r.add_argument("--lease-stale-s", type=float, default=ray_lease.STALE_S,
                   help="stop the training once the harness's lease in the run dir is unchanged this long")  # fmt: skip
    r.add_argument("--env-json", help="variables every actor of the job gets (verl's RayJob submitter's jobs)")
    r.add_argument("module")
    r.add_argument("args", nargs=argparse.REMAINDER)
    r.set_defaults(func=run)
    s = sub.add_parser("setup")
    s.add_argument("--bundle", required=True, help="the run's bundle (harness, verl, wheels) on this pod's own disk")
    s.add_argument("--verl-version", help="no verl in the bundle: the release the image's own verl must be")
    s.add_argument("--run", required=True, help="the run dir (the harness's lease), as the harness's host has it")
    s.add_argument("--lease-stale-s", type=float, default=ray_lease.STALE_S,
                   help="give up once the harness's lease in the run dir is unchanged this long")  # fmt: skip
    s.add_argument("--nodes", type=int, required=True, help="the nodes the training spans")
    s.add_argument("--resource", required=True, help="the Ray resource of its ranks (NPU, GPU)")
    s.set_defaults(func=setup)
    c = sub.add_parser("clean")
    c.add_argument("--node-root", required=True)
    c.set_defaults(func=clean)
    return p


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except Failed as exc:
        print(f"{ERROR} {exc}", flush=True)
        return EXIT_ERROR  # the job's own failure (its ERROR line, read by the executor): not the training's


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
