"""The harness's side of an existing Ray cluster: its address, its token, its Job Submission API client, its nodes and
the actors a job left; every failure one line (an ``InfraError``: a cluster that cannot be reached, refuses the
token or lacks nodes is no verdict on verl).

The token is read where Ray itself reads it on this host (``RAY_AUTH_TOKEN``, then the file ``RAY_AUTH_TOKEN_PATH``,
then ``~/.ray/auth_token``) and sent as the ``Authorization`` header of each request: it is never printed, never in
an error line, never in the job's environment and never written under the results dir (``outside.secret``: a
dashboard's error page that echoes it is shown and stored masked).

A cluster is outside the harness: every call goes through ``harness.remote`` (bounded, no redirect to another
host). Ray's ``JobSubmissionClient`` keeps its own parsing, but its one HTTP seam, ``_do_request``, is ``Remote``
(``client``), and its log tail, a websocket Remote cannot carry, refuses every redirect (``ray_job``). What the
cluster says is data: every field of it in a line goes through ``outside.shown``."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import requests

from harness import config
from harness.errors import InfraError
from harness.outside import secret, shown
from harness.remote import Remote, RemoteError
from harness.scenario.settings.ray import RayRuntime, check_address
from harness.training.launch import NodeRun

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

RUN_ENV = "HARNESS_RAY_RUN"  # in every actor's environment: which run an actor was part of (the job's submission id)
TOKEN_ENV, TOKEN_PATH_ENV = "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"
HTTP_TIMEOUT_S = 30.0  # one call, its answer whole
MAX_BYTES = 64 << 20  # the list of a cluster's jobs grows with every job it ran (a few KB each)
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
WHAT = "the Ray cluster"


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
        secret(value)
        return value
    path = Path(env[TOKEN_PATH_ENV]) if env.get(TOKEN_PATH_ENV) else (home or Path.home()) / ".ray" / "auth_token"
    try:
        value = path.read_text().strip()
    except OSError as exc:
        if env.get(TOKEN_PATH_ENV):
            raise InfraError(f"{TOKEN_PATH_ENV}={path}: cannot read the cluster's token: {exc.strerror}") from None
        return None
    secret(value)  # no variable names it: masked by value wherever a server echoes it
    return value or None


def said(exc: BaseException) -> str:
    """An exception that may carry a cluster's text (Ray's client puts the answer's body in it) as one line."""
    return shown((str(exc).strip().splitlines() or [type(exc).__name__])[0])


def client(addr: str, headers: dict[str, str]) -> JobSubmissionClient:
    """Ray's Job Submission client whose every plain HTTP call (``_do_request``: the version check, submit, status,
    info, stop, the list of jobs) is a ``Remote`` call: within ``HTTP_TIMEOUT_S`` whole, never redirected to another
    host, the answer capped. Ray's own would wait on a silent dashboard for ever and follow its redirects anywhere
    (``requests.request`` without a timeout). A 401 or 403 is Ray's ``AuthenticationError``, as in Ray's."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    class Bounded(JobSubmissionClient):
        remote: Remote | None = None

        def _do_request(
            self, method: str, endpoint: str, *, data: bytes | None = None, json_data: Any = None, **kwargs: Any
        ) -> requests.Response:
            if self.remote is None:  # Ray's own headers (its token where it found one) are known by now
                self.remote = Remote(self._address, WHAT, self._headers, MAX_BYTES)
            if data is not None or kwargs:  # a package upload: the harness's jobs carry no working_dir
                raise RemoteError(f"{self.remote.where}: {method} {endpoint}: not a call the harness makes")
            answer = self.remote.request(method, endpoint, body=json_data, total_s=HTTP_TIMEOUT_S)
            if answer.status in (401, 403):
                raise AuthenticationError(f"HTTP {answer.status}: {answer.line()}")
            response = requests.Response()  # what Ray's callers read of it
            response.status_code, response.url, response.reason = answer.status, self._address + endpoint, ""
            response._content, response.encoding = answer.body, "utf-8"
            return response

        async def tail_job_logs(self, job_id: str) -> AsyncIterator[str]:
            """The job's log as it comes (Ray's websocket, which ``Remote`` cannot carry), a redirect refused:
            aiohttp would follow it to any host."""
            import aiohttp

            refuse = aiohttp.TraceConfig()
            refuse.on_request_redirect.append(_redirected)
            async with (
                aiohttp.ClientSession(headers=self._headers, trace_configs=[refuse]) as session,
                session.ws_connect(f"{self._address}/api/jobs/{job_id}/logs/tail") as ws,
            ):
                async for msg in ws:
                    if msg.type == aiohttp.WSMsgType.TEXT:
                        yield msg.data

    return Bounded(addr, headers=headers)


async def _redirected(_session: Any, _context: Any, params: Any) -> None:
    location = shown(params.response.headers.get("Location", ""), 200)
    raise RemoteError(f"{WHAT} at {shown(params.url.origin(), 200)}: the job's log tail was redirected ({location}): "
                      "not followed")  # fmt: skip


@dataclass
class Cluster:
    """A reachable cluster that accepted the token: its Job Submission API and its state API."""

    address: str
    client: JobSubmissionClient
    headers: dict[str, str]
    authenticated: bool  # whether it asks for a token at all
    remote: Remote = field(init=False)

    def __post_init__(self) -> None:
        self.remote = Remote(self.address, WHAT, self.headers, MAX_BYTES)

    @classmethod
    def connect(cls, addr: str) -> Cluster:
        from ray.exceptions import AuthenticationError

        given = token()
        headers = {"Authorization": f"Bearer {given}"} if given else {}
        try:
            made = client(addr, headers)
            made.list_jobs()
        except AuthenticationError as exc:
            whose = "the harness's token" if given else "no token (none is set on this host)"
            raise InfraError(
                f"the Ray cluster at {addr} refused {whose}: {said(exc)}; set {TOKEN_ENV} or {TOKEN_PATH_ENV} (or "
                "~/.ray/auth_token) to the cluster's token"
            ) from None
        except RemoteError as exc:  # unreachable, stalled, redirected elsewhere: its own line
            raise InfraError(f"{exc} (its dashboard, where the Job Submission API answers: http://HEAD:8265)") from None
        except Exception as exc:  # Ray's RuntimeError, or its parsing of an answer of another shape
            raise InfraError(
                f"the Ray cluster at {addr} is not a Ray dashboard the harness can use: {said(exc)} (its dashboard, "
                "where the Job Submission API answers: http://HEAD:8265)"
            ) from None
        open_to_all = Remote(addr, WHAT).request("GET", "/api/version", total_s=HTTP_TIMEOUT_S).ok
        return cls(addr, made, headers, authenticated=not open_to_all)

    def get(self, path: str) -> list[dict[str, Any]]:
        """The records of a state API listing (``/api/v0/...``, its ``data.result.result``); those that are not
        records left out. InfraError in one line where the answer is not a listing."""
        answer = self.remote.request("GET", path, total_s=HTTP_TIMEOUT_S)
        where = f"the Ray cluster at {self.address}: {path}"
        if not answer.ok:
            raise InfraError(f"{where}: HTTP {answer.status} {answer.line()}")
        body = answer.json()
        if not isinstance(body, dict) or not body.get("result"):
            raise InfraError(f"{where}: {shown(body.get('msg') if isinstance(body, dict) else body) or 'no result'}")
        found = _at(body, "data", "result", "result")
        if not isinstance(found, list):
            raise InfraError(f"{where}: not a state API listing: {answer.line()}")
        return [r for r in found if isinstance(r, dict)]

    def nodes(self) -> list[dict[str, Any]]:
        """Its alive nodes (``node_id``, ``node_ip``, ``is_head_node``, ``resources_total``)."""
        return [n for n in self.get("/api/v0/nodes?detail=1&limit=10000") if n.get("state") == "ALIVE"]

    def check_nodes(self, node: NodeRun) -> list[dict[str, Any]]:
        """Enough alive nodes, each offering the ranks' resource, for the run; InfraError naming what lacks."""
        alive = self.nodes()
        able = [n for n in alive if offered(n, node.resource) >= node.per_node]
        if len(able) < node.nnodes:
            offers = ", ".join(f"{shown(n.get('node_ip'), 60)}: {offered(n, node.resource):g} {node.resource}"
                               for n in alive)  # fmt: skip
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
        return [a for a in self.get(query) if actor_env(a).get(RUN_ENV) == run]


def offered(node: dict[str, Any], resource: str) -> float:
    """How much of ``resource`` a node of the state API offers (0 where its record says otherwise)."""
    value = _at(node, "resources_total", resource)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _at(doc: Any, *keys: str) -> Any:
    for key in keys:
        doc = doc.get(key) if isinstance(doc, dict) else None
    return doc


def actor_env(actor: dict[str, Any]) -> dict[str, str]:
    """An actor's environment variables, from its serialized runtime environment (state API, detail)."""
    try:
        env = json.loads(actor.get("serialized_runtime_env") or "{}")
    except (TypeError, ValueError, RecursionError):
        return {}
    found = env.get("env_vars") if isinstance(env, dict) else None
    return found if isinstance(found, dict) else {}
