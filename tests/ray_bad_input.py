"""The bad-input table's cases for the Ray executors (tests/bad_input_rows.py, #82): a harness run of the two-node
scenario against a fake RayJob submitter or a fake Ray dashboard on 127.0.0.1 (tests/fake_servers.py) that forges,
steers, stalls or echoes the token, and scenarios whose cluster block holds an env key the cluster would refuse.
Each ``make(tmp, stack)`` keeps its servers alive in ``stack`` while the row runs; a case that must look at more
than the output (the results dir's files, what another host heard, what the shared cache kept) is a function that
runs the harness in this process and adds one line saying what it found."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from fake_servers import dashboard, elsewhere, nodes_listing, serving

ROOT = Path(__file__).resolve().parents[1]
TWO_NODES = ROOT / "scenarios" / "two_nodes_fsdp_l1.yaml"
RUN_ID = "4242"
TOKEN = "file-token-5be0c2a9d17f"  # read from a file: no variable names it, only its value can mask it
Make = Callable[[Path, contextlib.ExitStack], Any]


def two_nodes(tmp: Path, executor: dict[str, Any]) -> Path:
    """The two-node scenario with another executor block, as T/scenarios/two_nodes_fsdp_l1.yaml."""
    doc = yaml.safe_load(TWO_NODES.read_text())
    doc["executor"] = executor
    path = tmp / "scenarios" / TWO_NODES.name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def cluster_env(kind: str, env: dict[str, str]) -> Make:
    """``validate`` of the scenario whose ``executor.<kind>.env`` is ``env``."""
    block = {"env": env, **({"cache": "/root/.cache/cicd_test"} if kind == "rayjob" else {})}
    return lambda tmp, _: ["validate", str(two_nodes(tmp, {"kind": kind, kind: block}))]


def rayjob_served(
    tmp: Path, stack: contextlib.ExitStack, timeout_s: float = 900, **service: Any
) -> tuple[Any, list[str]]:
    """The fake submitter ``Service(**service)`` and the argv of a run of the two-node scenario submitted to it."""
    srv = stack.enter_context(serving(**service))
    block = {"cache": str(tmp / "cache"), "url": srv.url}
    path = two_nodes(tmp, {"kind": "rayjob", "timeout_s": timeout_s, "rayjob": block})
    return srv, [f"GITHUB_RUN_ID={RUN_ID}", "run", str(path), "--heavy", "--results", str(tmp / "cache" / "results")]


def rayjob_argv(tmp: Path, stack: contextlib.ExitStack, timeout_s: float = 900, **service: Any) -> list[str]:
    return rayjob_served(tmp, stack, timeout_s, **service)[1]


def rayjob(timeout_s: float = 900, **service: Any) -> Make:
    """``run`` of the two-node scenario under the rayjob executor, its submitter the fake ``Service(**service)``."""
    return lambda tmp, stack: rayjob_argv(tmp, stack, timeout_s, **service)


def rayjob_redirected(tmp: Path, stack: contextlib.ExitStack) -> Any:
    """The DELETE redirected to another host: a run that also says what that host heard (exit 98 where it heard
    anything)."""
    from bad_input_rows import run_in_process
    from fake_servers import ev, redirect_to

    other = stack.enter_context(elsewhere())
    argv = rayjob_argv(tmp, stack, delete=redirect_to(other.url), watches=[[ev("final", status="TIMEOUT")]])

    def call() -> tuple[int, str]:
        code, text = run_in_process(argv, tmp)
        return (code if not other.heard else 98), f"{text}\nthe other host heard: {other.heard or 'nothing'}"

    return call


def rayjob_leftovers(tmp: Path, stack: contextlib.ExitStack) -> Any:
    """A run, then what the shared cache's directory of the harness kept (each training's directory goes with it)."""
    from bad_input_rows import run_in_process
    from fake_servers import ev

    from harness.training.executors.rayjob_files import HARNESS_DIR

    argv = rayjob_argv(tmp, stack, watches=[[ev("final", status="TIMEOUT")]])

    def call() -> tuple[int, str]:
        code, text = run_in_process(argv, tmp)
        kept = sorted(p.name for p in (tmp / "cache" / HARNESS_DIR).iterdir())
        return code, f"{text}\nleft in the shared cache's {HARNESS_DIR}/: {', '.join(kept) or 'nothing'}"

    return call


def ray_argv(tmp: Path, stack: contextlib.ExitStack, answers: dict[str, Any]) -> list[str]:
    """``run`` on the dashboard, named by HARNESS_RAY_ADDRESS (what ``--ray-address`` sets, in this process's
    environment: set by the row, it goes with the row)."""
    dash = stack.enter_context(dashboard(answers))
    return ["RAY_AUTH_TOKEN=", f"RAY_AUTH_TOKEN_PATH={tmp / 'token'}", f"HARNESS_RAY_ADDRESS={dash.url}", "run",
            str(TWO_NODES), "--heavy", "--results", str(tmp / "r")]  # fmt: skip


CLUSTER = {"GET /api/jobs/": (200, "[]"), "GET /api/v0/nodes": (200, nodes_listing({"GPU": 1}, {"GPU": 1}))}


def ray(answers: dict[str, Any]) -> Make:
    """``run`` of the two-node scenario on the fake dashboard answering ``answers`` beside a cluster of two nodes."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> list[str]:
        (tmp / "token").write_text("")
        return ray_argv(tmp, stack, {**CLUSTER, **answers})

    return make


def token_echoed(where: str, answer: Callable[[str], tuple[int, str]]) -> Make:
    """``run`` on a dashboard that echoes the token (read from a file) at ``where``; then where the token was found:
    the output's lines and the results dir's files."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> Any:
        from bad_input_rows import run_in_process

        (tmp / "token").write_text(TOKEN + "\n")
        argv = ray_argv(tmp, stack, {**CLUSTER, where: answer(TOKEN)})

        def call() -> tuple[int, str]:
            code, text = run_in_process(argv, tmp)
            found = [p for p in (tmp / "r").rglob("*") if p.is_file() and TOKEN in p.read_text(errors="replace")]
            said = sum(TOKEN in line for line in text.splitlines())
            every = sum(p.is_file() for p in (tmp / "r").rglob("*"))
            return code, f"{text}\nthe token: in {said} line(s) printed, in {len(found)} of {every} files of the " \
                         f"results dir {[p.name for p in found] if found else ''}".rstrip()  # fmt: skip

        return call

    return make


def state_error(token: str) -> tuple[int, str]:
    return 200, json.dumps({"result": False, "msg": f"credential {token} may not list nodes", "data": {}})


def ray_redirected(tmp: Path, stack: contextlib.ExitStack) -> Any:
    """The dashboard redirects its first answer to another host: a run that also says what that host heard (exit
    98 where it heard anything)."""
    from bad_input_rows import run_in_process
    from fake_servers import redirect_to

    other = stack.enter_context(elsewhere())
    argv = ray({"GET /api/version": redirect_to(other.url)})(tmp, stack)

    def call() -> tuple[int, str]:
        code, text = run_in_process(argv, tmp)
        return (code if not other.heard else 98), f"{text}\nthe other host heard: {other.heard or 'nothing'}"

    return call


def lease_taken(by: str) -> Make:
    """``run`` under the rayjob executor whose job, as the watch starts, puts ``by`` ("a link", "a directory") at the
    lease's name in the run dir and keeps the watch open past one renewal (a file outside the run dir to keep)."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> list[str]:
        import time

        from fake_servers import STARTED, ev

        from harness.training.executors import ray_lease

        (tmp / "outside.txt").write_text("keep me")
        srv, argv = rayjob_served(tmp, stack, watches=[[STARTED, ev("final", status="TIMEOUT")]])

        def take() -> None:
            lease = srv.run_dir / ray_lease.FILE
            lease.unlink()
            if by == "a link":
                lease.symlink_to(tmp / "outside.txt")
            else:
                lease.mkdir()
            time.sleep(ray_lease.RENEW_S + 1)

        srv.on_watch = take
        return argv

    return make


def beside_verls_own(tmp: Path, stack: contextlib.ExitStack) -> Any:
    """A run inside a workflow run whose own RayJob (verl's, POSTed under the run's id) the submitter holds; then which
    of the run's RayJobs are left there."""
    from bad_input_rows import run_in_process
    from fake_servers import ev

    srv, argv = rayjob_served(tmp, stack, watches=[[ev("final", status="TIMEOUT")]])
    srv.runs[RUN_ID] = True

    def call() -> tuple[int, str]:
        code, text = run_in_process(argv, tmp)
        ours = [run for run in srv.runs if run != RUN_ID]
        said = ", ".join(f"the harness's ({run.rsplit('-', 1)[0]}-…) {'alive' if srv.runs[run] else 'deleted'}"
                         for run in ours)  # fmt: skip
        verls = f"verl's ({RUN_ID}) {'alive' if srv.runs[RUN_ID] else 'deleted'}"
        return code, f"{text}\nthe RayJobs of run {RUN_ID} at the submitter after the run: {verls}, {said}"

    return call
