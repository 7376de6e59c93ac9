"""The harness's side of an existing Ray cluster: its address, its token, its Job Submission API client, its nodes and
the actors a job left; every failure one line (an ``InfraError``: a cluster that cannot be reached, refuses the
token or lacks nodes is no verdict on verl).

The token is read where Ray itself reads it on this host (``RAY_AUTH_TOKEN``, then the file ``RAY_AUTH_TOKEN_PATH``,
then ``~/.ray/auth_token``) and sent as the ``Authorization`` header of each request: it is never printed, never in
an error line, never in the job's environment and never written under the results dir."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from harness import config
from harness.errors import InfraError
from harness.scenario.settings.ray import RayRuntime, check_address
from harness.training.launch import NodeRun

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

RUN_ENV = "HARNESS_RAY_RUN"  # in every actor's environment: which run an actor was part of (the job's submission id)
TOKEN_ENV, TOKEN_PATH_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
HTTP_TIMEOUT_S = 30
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


def address(rt: RayRuntime) -> str:
    """``HARNESS_RAY_ADDRESS`` (set by ``--ray-address`` too), else the scenario's ``executor.ray.address``."""
    given = config.RAY_ADDRESS.get()
    if given:
        try:
            return check_address(given)
        except ValueError as exc:
            raise InfraError(f"{config.RAY_ADDRESS.name} / --ray-address: {exc}") from None
    if rt.address is None:
        raise InfraError(
            "executor ray: no cluster named: set executor.ray.address in the scenario, or pass --ray-address "
            f"(env {config.RAY_ADDRESS.name}) with the cluster's dashboard address, http://HEAD:8265"
        )
    return rt.address


def token(environ: dict[str, str] | None = None, home: Path | None = None) -> str | None:
    """The cluster's token, from where Ray reads it on this host; None: none is set (a cluster without
    authentication, or one that will refuse the harness)."""
    env = os.environ if environ is None else environ
    if value := env.get(TOKEN_ENV, "").strip():
        return value
    path = Path(env[TOKEN_PATH_ENV]) if env.get(TOKEN_PATH_ENV) else (home or Path.home()) / ".ray" / "auth_token"
    try:
        return path.read_text().strip() or None
    except OSError as exc:
        if env.get(TOKEN_PATH_ENV):
            raise InfraError(f"{TOKEN_PATH_ENV}={path}: cannot read the cluster's token: {exc.strerror}") from None
        return None


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


@dataclass
class Cluster:
    """A reachable cluster that accepted the token: its Job Submission API and its state API."""

    address: str
    client: JobSubmissionClient
    headers: dict[str, str]
    authenticated: bool  # whether it asks for a token at all

    @classmethod
    def connect(cls, addr: str) -> Cluster:
        from ray.exceptions import AuthenticationError
        from ray.job_submission import JobSubmissionClient

        secret = token()
        headers = {"Authorization": f"Bearer {secret}"} if secret else {}
        try:
            client = JobSubmissionClient(addr, headers=headers)
            client.list_jobs()
        except AuthenticationError as exc:
            given = "the harness's token" if secret else "no token (none is set on this host)"
            raise InfraError(
                f"the Ray cluster at {addr} refused {given}: {_line(exc)}; set {TOKEN_ENV} or {TOKEN_PATH_ENV} (or "
                "~/.ray/auth_token) to the cluster's token"
            ) from None
        except (ConnectionError, requests.RequestException, RuntimeError) as exc:
            raise InfraError(
                f"the Ray cluster at {addr} is not reachable: {_line(exc)} (its dashboard, where the Job Submission "
                "API answers: http://HEAD:8265)"
            ) from None
        open_to_all = _get(addr, "/api/version", {}, raw=True).ok
        return cls(addr, client, headers, authenticated=not open_to_all)

    def get(self, path: str) -> Any:
        """The ``data.result`` of a state API call (``/api/v0/...``)."""
        body = _get(self.address, path, self.headers).json()
        if not body.get("result", False):
            raise InfraError(f"the Ray cluster at {self.address}: {path}: {body.get('msg') or 'no result'}")
        return body["data"]["result"]

    def nodes(self) -> list[dict[str, Any]]:
        """Its alive nodes (``node_id``, ``node_ip``, ``is_head_node``, ``resources_total``)."""
        found = self.get("/api/v0/nodes?detail=1&limit=10000")["result"]
        return [n for n in found if n.get("state") == "ALIVE"]

    def check_nodes(self, node: NodeRun) -> list[dict[str, Any]]:
        """Enough alive nodes, each offering the ranks' resource, for the run; InfraError naming what lacks."""
        alive = self.nodes()
        able = [n for n in alive if n.get("resources_total", {}).get(node.resource, 0) >= node.per_node]
        if len(able) < node.nnodes:
            offers = ", ".join(
                f"{n.get('node_ip')}: {n.get('resources_total', {}).get(node.resource, 0):g} {node.resource}"
                for n in alive
            )
            raise InfraError(
                f"the Ray cluster at {self.address} has {len(able)} alive node(s) with {node.per_node} "
                f"{node.resource} each, the scenario needs {node.nnodes} (workload nnodes {node.nnodes}, "
                f"{node.per_node} rank(s) a node); its nodes: {offers or 'none'}"
            )
        return alive

    def actors(self, run: str, alive_only: bool = True) -> list[dict[str, Any]]:
        """The actors of one run (``RUN_ENV`` in their runtime environment)."""
        query = "/api/v0/actors?detail=1&limit=10000" + ("&filter_keys=state&filter_predicates=%3D&filter_values=ALIVE"
                                                        if alive_only else "")  # fmt: skip
        return [a for a in self.get(query)["result"] if actor_env(a).get(RUN_ENV) == run]


def actor_env(actor: dict[str, Any]) -> dict[str, str]:
    """An actor's environment variables, from its serialized runtime environment (state API, detail)."""
    try:
        env = json.loads(actor.get("serialized_runtime_env") or "{}")
    except ValueError:
        return {}
    found = env.get("env_vars") if isinstance(env, dict) else None
    return found if isinstance(found, dict) else {}


def _get(addr: str, path: str, headers: dict[str, str], raw: bool = False) -> requests.Response:
    try:
        resp = requests.get(addr + path, headers=headers, timeout=HTTP_TIMEOUT_S)
    except requests.RequestException as exc:
        raise InfraError(f"the Ray cluster at {addr} did not answer {path}: {_line(exc)}") from None
    if not raw and not resp.ok:
        raise InfraError(f"the Ray cluster at {addr}: {path}: HTTP {resp.status_code} {resp.text[:200]}")
    return resp
