"""The one way the harness calls a server (verl's RayJob submitter, a Ray cluster's dashboard): a server is outside
the harness, so nothing it does may steer or stall a run.

- Every request is bounded whole: connect and read timeouts, and a total for the request and its answer, within the
  run's deadline where the caller gives one. A server that drips one byte every few seconds never trips a read
  timeout, so the total is kept by waiting on the request from this thread (``_bounded``): past it the request is
  abandoned and the caller gets one line.
- Redirects are followed only to the same scheme, host and port (a few hops at most): a redirect to another host is
  refused, never followed (a DELETE sent there would delete whatever that host names so, with our headers).
- An answer's body is read up to a cap (a 50 MB page is not read whole), and a stream's lines are cut at a length.
- What reaches an error line is redacted and escaped (``harness.outside.shown``): the URL's credentials, a token a
  server echoes. Every failure is a ``RemoteError`` (an InfraError: a server that misbehaves is no verdict on verl).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import requests
import urllib3

from harness.errors import InfraError
from harness.outside import shown

CONNECT_S = 10.0
READ_S = 30.0
TOTAL_S = 60.0
MAX_BYTES = 1 << 20  # an answer's body read at most (a JSON answer is a few KB)
MAX_LINE = 1 << 20  # a stream's line cut past this
MAX_HOPS = 3
CHUNK = 1 << 16
REDIRECTS = (301, 302, 303, 307, 308)
HTTP_OK = range(200, 300)  # an HTTP status, not an exit
SERVER_FAILED = range(500, 600)


class RemoteError(InfraError):
    """A server that could not be reached, stalled, redirected elsewhere or answered what cannot be read."""


class Redirected(RemoteError):
    """A server that sent the request to another host (or round in circles): asking it again changes nothing."""


@dataclass(frozen=True)
class Answer:
    """A server's answer, its body read whole up to ``MAX_BYTES`` (``cut``: there was more)."""

    status: int
    body: bytes
    cut: bool
    where: str  # "the X at URL" (redacted), for error lines

    @property
    def ok(self) -> bool:
        return self.status in HTTP_OK

    @property
    def server_failed(self) -> bool:
        """A 5xx: the server may answer otherwise the next time (a 4xx will not)."""
        return self.status in SERVER_FAILED

    def json(self) -> Any:
        """The body as JSON; RemoteError in one line where it is not (an HTML page, a truncated body)."""
        if self.cut:
            raise RemoteError(f"{self.where} answered HTTP {self.status} with over {len(self.body)} bytes: not read")
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            raise RemoteError(f"{self.where} answered HTTP {self.status} with no JSON: {self.line()}") from None

    def line(self) -> str:
        """The body's first line, short and shown as data (a proxy's HTML page is not printed whole)."""
        text = self.body.decode("utf-8", errors="replace").strip()
        return shown((text.splitlines() or ["(empty body)"])[0], 200)


class Remote:
    """One server, at ``base`` (scheme://host[:port][/prefix]), called as ``what`` in error lines."""

    def __init__(self, base: str, what: str, headers: dict[str, str] | None = None, max_bytes: int = MAX_BYTES) -> None:
        self.base = base.rstrip("/")
        self.what = what
        self.max_bytes = max_bytes  # a Ray cluster's list of jobs grows with every job it ran: more than a JSON answer
        self.where = f"{what} at {shown(self.base, 200)}"
        self.session = requests.Session()
        self.session.headers.update(headers or {})
        origin = urlsplit(self.base)
        self._origin = (origin.scheme, origin.hostname, origin.port)

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        total_s: float = TOTAL_S,
        until: float | None = None,
    ) -> Answer:
        """``method`` on ``path`` and its whole answer, within ``total_s`` and before ``until`` (a monotonic time:
        the run's deadline) where given. RemoteError in one line: unreachable, stalled, redirected elsewhere."""
        budget = total_s if until is None else min(total_s, until - time.monotonic())
        if budget <= 0:
            raise RemoteError(f"{self.where}: no time left for {method} {path} before the run's deadline")
        return _bounded(lambda: self._call(method, path, params, body, budget), budget,
                        f"{self.where}: {method} {path} not answered within {budget:.0f} s (a server that stalls or "
                        "drips its answer)")  # fmt: skip

    @contextmanager
    def lines(self, path: str, params: dict[str, str] | None = None, read_s: float = READ_S) -> Iterator[Iterator[str]]:
        """A streamed answer's lines (NDJSON, a log), each bounded by ``read_s`` of silence and cut at ``MAX_LINE``;
        the caller bounds the whole. A non-2xx answer is a RemoteError carrying its first line."""
        started = time.monotonic()
        answer = self._send("GET", path, params, None, (CONNECT_S, read_s), started, TOTAL_S)
        try:
            if answer.status_code not in HTTP_OK:
                said = _read(answer, started, TOTAL_S, self.where).line()
                raise RemoteError(f"{self.where}: GET {path}: HTTP {answer.status_code}: {said}")
            yield _lines(answer, path, self.where)
        finally:
            answer.close()

    def close(self) -> None:
        self.session.close()

    def _call(self, method: str, path: str, params: dict[str, str] | None, body: Any, budget: float) -> Answer:
        started = time.monotonic()
        timeout = (min(CONNECT_S, budget), min(READ_S, budget))
        answer = self._send(method, path, params, body, timeout, started, budget)
        try:
            return _read(answer, started, budget, self.where, self.max_bytes)
        finally:
            answer.close()

    def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        body: Any,
        timeout: tuple[float, float],
        started: float,
        budget: float,
    ) -> requests.Response:
        """The request, redirects followed on the same origin only; the answer not yet read."""
        url = self.base + path
        for _ in range(MAX_HOPS + 1):
            try:
                answer = self.session.request(
                    method, url, params=params, json=body, timeout=timeout, stream=True, allow_redirects=False
                )
            except requests.RequestException as exc:
                raise RemoteError(f"{self.where}: {method} {path}: {type(exc).__name__}: {_first(exc)}") from None
            if answer.status_code not in REDIRECTS:
                return answer
            location = urljoin(url, answer.headers.get("Location", ""))
            answer.close()
            there = urlsplit(location)
            if (there.scheme, there.hostname, there.port) != self._origin:
                raise Redirected(f"{self.where}: {method} {path} was redirected to another host "
                                  f"({shown(location, 200)}): not followed")  # fmt: skip
            if time.monotonic() - started > budget:
                break
            url, params = location, None
        raise Redirected(f"{self.where}: {method} {path}: redirected more than {MAX_HOPS} times: not followed")


def _bounded(call: Any, budget: float, late: str) -> Answer:
    """``call()`` in a thread of its own, waited for ``budget`` seconds: its answer, or a RemoteError ``late`` (the
    thread is left to its socket's read timeout; it holds nothing of the run)."""
    out: list[Answer | BaseException] = []

    def run() -> None:
        try:
            out.append(call())
        except BaseException as exc:  # handed to the caller's thread as it is
            out.append(exc)

    worker = threading.Thread(target=run, name="harness-remote", daemon=True)
    worker.start()
    worker.join(budget + 1.0)
    if not out:
        raise RemoteError(late)
    if isinstance(out[0], BaseException):
        raise out[0]
    return out[0]


def _read(answer: requests.Response, started: float, budget: float, where: str = "", cap: int = MAX_BYTES) -> Answer:
    """The body up to ``cap`` bytes, one read at a time (``read1``: a drip returns what came), ``budget`` kept."""
    raw, data = answer.raw, bytearray()
    try:
        while len(data) <= cap and time.monotonic() - started <= budget:
            chunk = raw.read1(CHUNK) if hasattr(raw, "read1") else raw.read(CHUNK)
            if not chunk:
                break
            data += chunk
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise RemoteError(f"{where}: the answer broke off: {type(exc).__name__}: {_first(exc)}") from None
    if time.monotonic() - started > budget and not raw.isclosed():
        raise RemoteError(f"{where}: its answer took over {budget:.0f} s (a server that drips its answer)")
    return Answer(answer.status_code, bytes(data[:cap]), len(data) > cap, where)


def _lines(answer: requests.Response, path: str, where: str) -> Iterator[str]:
    """The answer's lines as they come, each at most ``MAX_LINE`` (the rest of a longer line dropped)."""
    held, dropping = bytearray(), False
    try:
        while chunk := answer.raw.read1(CHUNK):
            *done, rest = bytes(chunk).split(b"\n")
            for piece in done:
                if not dropping:
                    held += piece
                    yield held[:MAX_LINE].decode("utf-8", errors="replace")
                held, dropping = bytearray(), False
            if not dropping:
                held += rest
                if len(held) > MAX_LINE:
                    yield held[:MAX_LINE].decode("utf-8", errors="replace")
                    held, dropping = bytearray(), True
        if held and not dropping:
            yield held.decode("utf-8", errors="replace")
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        raise RemoteError(f"{where}: GET {path}: the stream broke off: {type(exc).__name__}: {_first(exc)}") from None


def _first(exc: BaseException) -> str:
    return shown((str(exc).strip().splitlines() or [type(exc).__name__])[0], 200)
