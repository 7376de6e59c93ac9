"""The one way the harness calls a server (harness/remote.py), against real servers on loopback that misbehave:
a drip that never trips a read timeout, redirects to another host, answers too big or not JSON, a stream with an
endless line, a deadline already past. Each is one RemoteError line, in bounded time, and the other host never
hears from us."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from harness.remote import MAX_BYTES, MAX_LINE, Remote, RemoteError

Handle = Callable[[http.server.BaseHTTPRequestHandler], None]


@contextlib.contextmanager
def serving(handle: Handle) -> Iterator[tuple[str, list[str]]]:
    """A loopback server answering every request with ``handle``; its base URL and the requests it heard."""
    heard: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _any(self) -> None:
            heard.append(f"{self.command} {self.path}")
            with contextlib.suppress(OSError):
                handle(self)

        do_GET = do_POST = do_DELETE = _any

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", heard
    finally:
        server.shutdown()
        server.server_close()


def answer(status: int, body: bytes, headers: dict[str, str] | None = None) -> Handle:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)

    return handle


def drip(h: http.server.BaseHTTPRequestHandler) -> None:
    """One byte of the status line every 0.3 s: each read returns within any read timeout, the answer never ends."""
    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100000:
        h.wfile.write(bytes([byte]))
        h.wfile.flush()
        time.sleep(0.3)


@pytest.mark.parametrize("method", ["POST", "DELETE"])
def test_a_server_that_drips_is_abandoned_at_the_total(method: str) -> None:
    with serving(drip) as (base, _):
        started = time.monotonic()
        with pytest.raises(RemoteError, match=rf"{method} /api not answered within 2 s \(a server that stalls"):
            Remote(base, "the submitter").request(method, "/api", total_s=2)
        assert time.monotonic() - started < 5


def test_the_runs_deadline_bounds_a_request_and_a_past_one_sends_nothing() -> None:
    with serving(drip) as (base, heard):
        started = time.monotonic()
        with pytest.raises(RemoteError, match="not answered within 1 s"):
            Remote(base, "x").request("GET", "/a", total_s=60, until=time.monotonic() + 1)
        assert time.monotonic() - started < 4
        with pytest.raises(RemoteError, match="no time left for GET /b before the run's deadline"):
            Remote(base, "x").request("GET", "/b", until=time.monotonic() - 1)
        assert heard == ["GET /a"]


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_to_another_host_is_not_followed(status: int) -> None:
    with serving(answer(200, b"{}")) as (elsewhere, heard_there):
        moved = answer(status, b"", {"Location": elsewhere + "/api/v1/workflows/1"})
        with serving(moved) as (base, _), pytest.raises(RemoteError, match=r"DELETE /api/v1/workflows/1 was redirec"):
            Remote(base, "the submitter").request("DELETE", "/api/v1/workflows/1")
    assert heard_there == []


def test_a_redirect_on_the_same_host_is_followed_a_few_times() -> None:
    def handle(h: http.server.BaseHTTPRequestHandler) -> None:
        if h.path == "/moved":
            answer(200, b'{"ok": 1}')(h)
        elif h.path.startswith("/loop"):
            answer(302, b"", {"Location": "/loop"})(h)
        else:
            answer(308, b"", {"Location": "/moved"})(h)

    with serving(handle) as (base, heard):
        assert Remote(base, "x").request("GET", "/old").json() == {"ok": 1}
        with pytest.raises(RemoteError, match="redirected more than 3 times"):
            Remote(base, "x").request("GET", "/loop")
    assert heard[:2] == ["GET /old", "GET /moved"]


def test_an_answer_that_is_not_json_or_too_big_is_one_line() -> None:
    page = b"<html>\n<title>502 Bad Gateway</title> token 0123456789abcdef\n</html>"
    with serving(answer(200, page)) as (base, _):
        with pytest.raises(RemoteError, match=r"answered HTTP 200 with no JSON: <html>$") as info:
            Remote(base, "the submitter").request("POST", "/api").json()
        assert "\n" not in str(info.value)
    with serving(answer(200, b"[" + b"1," * MAX_BYTES + b"1]")) as (base, _):
        got = Remote(base, "x").request("GET", "/big")
        assert got.cut and len(got.body) == MAX_BYTES
        with pytest.raises(RemoteError, match=rf"with over {MAX_BYTES} bytes: not read"):
            got.json()


def test_credentials_in_the_url_and_an_echoed_token_never_reach_the_line() -> None:
    echo = answer(500, b"Unauthorized: Authorization: Bearer a1b2c3d4e5f6a7b8 was refused")
    with serving(echo) as (base, _):
        url = base.replace("http://", "http://user:hunter22@")
        remote = Remote(url, "the Ray cluster", headers={"Authorization": "Bearer a1b2c3d4e5f6a7b8"})
        got = remote.request("GET", "/api/version")
        line = f"{remote.where}: HTTP {got.status}: {got.line()}"
    assert "hunter22" not in line and "a1b2c3d4e5f6a7b8" not in line
    assert "http://***@127.0.0.1" in line and "Bearer ***" in line


def test_a_stream_yields_lines_as_they_come_cuts_an_endless_one_and_says_a_refusal() -> None:
    def stream(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        for part in (b'{"a": 1}\n{"b"', b": 2}\n", b"y" * (MAX_LINE + 10), b"\n", b'{"c": 3}\n'):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            h.wfile.flush()
        h.wfile.write(b"0\r\n\r\n")

    with serving(stream) as (base, _), Remote(base, "x").lines("/watch") as lines:
        got = list(lines)
    assert got[:2] == ['{"a": 1}', '{"b": 2}'] and len(got[2]) == MAX_LINE and got[3:] == ['{"c": 3}']
    refusing = serving(answer(404, b"no such job\nsecond line"))
    with refusing as (base, _), pytest.raises(RemoteError, match=r"GET /watch: HTTP 404: no such job$"):  # noqa: SIM117
        with Remote(base, "x").lines("/watch") as lines:
            list(lines)


def test_a_stream_that_goes_silent_past_its_read_timeout_breaks_off() -> None:
    def silent(h: http.server.BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b'{"type": "log"}\n')
        h.wfile.flush()
        time.sleep(5)

    with serving(silent) as (base, _):
        started = time.monotonic()
        with pytest.raises(RemoteError, match="GET /watch: the stream broke off"):  # noqa: SIM117
            with Remote(base, "x").lines("/watch", read_s=1) as lines:  # (the error comes from inside the with)
                assert next(lines) == '{"type": "log"}'
                list(lines)
        assert time.monotonic() - started < 4


def test_an_unreachable_server_is_one_line() -> None:
    with pytest.raises(RemoteError, match=r"^the submitter at http://127.0.0.1:9/? ?: POST /api: ConnectionError"):
        Remote("http://127.0.0.1:9", "the submitter").request("POST", "/api", total_s=5)
