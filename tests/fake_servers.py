"""The servers the Ray executors speak to, faked on 127.0.0.1 only, for their tests and the bad-input table.

- ``Service``: verl's RayJob submitter as its submit script sees it: ``/healthz`` answers ok, POST answers ``post``,
  each watch streams ``watches`` in turn (chunked, so that a stream cut short is not one that ended), DELETE
  answers ``{"deleted": 1}`` and removes the RayJobs of its run id; each may instead be handled by a function of the
  request (a drip, a redirect). Like the job the harness's job script runs, it writes the run's ``nodes.json`` into
  the run dir the script names before the watch ends (``gathers``), so a SUCCEEDED job has gathered.
- ``Dashboard``: a Ray cluster's dashboard answering each ``METHOD /path`` it is given (Ray 2.60's version by default).
- ``Heard``: another host that records what reaches it: a redirect's target, which must hear nothing."""

from __future__ import annotations

import contextlib
import http.server
import json
import shlex
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.artifacts.nodes import NodesRecord
from harness.training.executors import rayjob_files


def ev(kind: str, **fields: Any) -> str:
    return json.dumps({"type": kind, **fields})


STARTED = ev("log", line=rayjob_files.STARTED)
RUNNING = ev("status", status="RUNNING", rayjob_status="RUNNING", job_deployment_status="Running", message="")
SUCCEEDED = ev("final", status="SUCCEEDED")
CUT = "\0cut"  # a watch's line: the connection broken here, mid-stream (no chunked end: the client sees it cut)
SILENT = "\0silent"  # a watch's line: nothing more sent, the connection held open (a dead connection)
Handle = Callable[["Handler"], None]


class Service(http.server.ThreadingHTTPServer):
    """``post`` is the answer to POST (status, body) or a handler, ``watches`` the lines of each watch connection in
    turn (the last repeated; ``None``: status events until the client goes; ``CUT``, ``SILENT``: see above), ``delete``
    a handler of DELETE. It keeps the RayJobs POSTed to it by run id (``alive``), and a DELETE it answers 2xx removes
    those of its run id, as verl's submitter does."""

    daemon_threads = True

    def __init__(
        self,
        post: tuple[int, str] | Handle,
        watches: list[list[str] | None],
        delete: Handle | None = None,
        gathers: bool = True,
    ) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.post, self.watches, self.delete, self.gathers = post, watches, delete, gathers
        self.requests: list[tuple[str, str]] = []
        self.payloads: list[dict[str, Any]] = []
        self.scripts: list[str] = []  # the job script each POST named, as it was when POSTed
        self.on_watch: Any = None
        self.run_dir: Path | None = None
        self.runs: dict[str, bool] = {}  # run id -> alive
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def deleted(self) -> list[str]:
        return [p for m, p in self.requests if m == "DELETE"]

    def watched(self) -> int:
        return sum(m == "GET" for m, _ in self.requests)

    def alive(self) -> list[str]:
        """The run ids of the RayJobs POSTed here that no DELETE removed."""
        return [run for run, alive in self.runs.items() if alive]

    def remove(self, path: str) -> None:
        """What a DELETE of ``path`` (/api/v1/workflows/RUN?attempt=N) removes: every RayJob of that run id."""
        run = path.split("?", 1)[0].rsplit("/", 1)[-1]
        for known in self.runs:
            if known == run:
                self.runs[known] = False

    def gather(self) -> None:
        """What the job's entrypoint writes once it has gathered every node (no node here: nothing else)."""
        if self.gathers and self.run_dir is not None and self.run_dir.is_dir():
            NodesRecord(job="fake", nodes=[], placement="the fake submitter", complete=True).write(
                self.run_dir / "nodes.json"
            )


def run_dir_of(script: str) -> Path | None:
    """The run dir the harness's job script gathers into (its ``ray_entry run --run DIR``)."""
    with contextlib.suppress(OSError):
        for line in Path(script).read_text().splitlines():
            try:
                words = shlex.split(line, comments=True)
            except ValueError:
                continue
            if "--run" in words and "run" in words and "setup" not in words:
                return Path(words[words.index("--run") + 1])
    return None


class Handler(http.server.BaseHTTPRequestHandler):
    server: Service
    protocol_version = "HTTP/1.1"  # a watch is chunked: a stream cut short is told from one that ended

    def do_POST(self) -> None:
        self.server.requests.append(("POST", self.path))
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.payloads.append(json.loads(body))
        script = Path(str(self.server.payloads[-1].get("script", "")))
        self.server.scripts.append(script.read_text() if script.is_file() else "")
        self.server.run_dir = run_dir_of(str(script))
        if callable(self.server.post):
            self.server.post(self)
            return
        code, text = self.server.post
        if code in range(200, 300):
            self.server.runs[str(self.server.payloads[-1].get("github_run_id"))] = True
        self.send(code, text.encode())

    def do_DELETE(self) -> None:
        self.server.requests.append(("DELETE", self.path))
        if self.server.delete is not None:
            self.server.delete(self)
            return
        self.server.remove(self.path)
        self.send(200, b'{"deleted": 1}')

    def do_GET(self) -> None:
        if self.path == "/healthz":  # the health check verl's workflow (and the harness's) makes first
            self.send(200, b"ok")
            return
        self.server.requests.append(("GET", self.path))
        lines = self.server.watches.pop(0) if len(self.server.watches) > 1 else self.server.watches[0]
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if self.server.on_watch:
            self.server.on_watch()
        try:
            if lines is None:
                while not self.server.stopping.is_set():  # a watch that never ends
                    self.chunk((RUNNING + "\n").encode())
                    time.sleep(0.05)
                return
            self.server.gather()
            held = bytearray()
            for line in lines:
                if line in (CUT, SILENT):
                    self.chunk(bytes(held))
                    held.clear()
                    if line == SILENT:
                        self.server.stopping.wait()
                    self.close_connection = True
                    return
                held += (line + "\n").encode()
                if len(held) > 1 << 16:
                    self.chunk(bytes(held))
                    held.clear()
            self.chunk(bytes(held))
            self.wfile.write(b"0\r\n\r\n")  # the stream's clean end
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def drip(handler: Handler) -> None:
    """An answer whose every byte comes 0.3 s after the one before: no read ever times out, it never ends."""
    with contextlib.suppress(OSError):
        for byte in b"HTTP/1.0 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000:
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(0.3)


def redirect_to(url: str) -> Handle:
    return lambda handler: handler.send(307, b"", {"Location": url + handler.path})


@contextlib.contextmanager
def serving(
    post: tuple[int, str] | Handle = (200, '{"job_id": "rayjob-1"}'),
    watches: list[list[str] | None] | None = None,
    **kw: Any,
) -> Iterator[Service]:
    """A fake submitter, serving until the block ends."""
    srv = Service(post, watches if watches is not None else [[STARTED, SUCCEEDED]], **kw)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.stopping.set()
        srv.shutdown()
        srv.server_close()


class Heard(http.server.ThreadingHTTPServer):
    """Another host on loopback that records whatever reaches it (a redirect's target: it must hear nothing)."""

    daemon_threads = True

    def __init__(self) -> None:
        heard: list[str] = []

        class Record(http.server.BaseHTTPRequestHandler):
            def _any(self) -> None:
                heard.append(f"{self.command} {self.path}")
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            do_GET = do_POST = do_DELETE = _any

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Record)
        self.heard = heard

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@contextlib.contextmanager
def elsewhere() -> Iterator[Heard]:
    srv = Heard()
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def job_id_is(job: str) -> tuple[int, str]:
    return 200, json.dumps({"job_id": job})


class Dashboard(http.server.ThreadingHTTPServer):
    """A Ray dashboard: ``answers`` maps ``"METHOD /path"`` (no query) to (status, body) or a handler; anything else
    is a 404. The version check Ray's client makes first answers Ray 2.60 unless given."""

    daemon_threads = True

    def __init__(self, answers: dict[str, tuple[int, str] | Handle]) -> None:
        super().__init__(("127.0.0.1", 0), Route)
        self.answers = {"GET /api/version": (200, json.dumps({"ray_version": "2.60.0"})), **answers}
        self.requests: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Route(Handler):
    server: Dashboard  # type: ignore[assignment]
    protocol_version = "HTTP/1.1"

    def _any(self) -> None:
        key = f"{self.command} {self.path.split('?', 1)[0]}"
        self.server.requests.append(key)
        if self.headers.get("Content-Length"):
            self.rfile.read(int(self.headers["Content-Length"]))
        answer = self.server.answers.get(key, (404, "not found"))
        if callable(answer):
            answer(self)
        else:
            self.send(answer[0], answer[1].encode(), {"Content-Type": "application/json"})

    do_GET = do_POST = do_DELETE = _any  # type: ignore[assignment]


@contextlib.contextmanager
def dashboard(answers: dict[str, tuple[int, str] | Handle]) -> Iterator[Dashboard]:
    srv = Dashboard(answers)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def nodes_listing(*resources: dict[str, Any]) -> str:
    """The state API's answer listing one alive node per ``resources``."""
    found = [{"node_id": f"{i}" * 56, "node_ip": f"10.0.0.{i + 1}", "state": "ALIVE", "is_head_node": i == 0,
              "resources_total": r} for i, r in enumerate(resources)]  # fmt: skip
    return json.dumps({"result": True, "msg": "", "data": {"result": {"result": found}}})
