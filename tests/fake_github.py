"""A fake of the GitHub REST API on 127.0.0.1, for what the workflows' ``gh`` and github-script call when a workflow
engine runs them (tests/workflow_engine.py): a pull request's files and labels, a repository, its workflow runs and
their artifacts, issues, their labels and comments. Only what the workflows call is here; everything else is a 404,
so a workflow that starts calling something new fails its test rather than passing on a guess.

The same port serves two ways in: plain HTTP (github-script's stand-in reads ``GITHUB_API_URL``) and, for the real
``gh`` (which always talks to https://api.github.com), an HTTPS proxy: ``gh`` is given ``HTTPS_PROXY`` pointing here
and ``SSL_CERT_FILE`` naming a certificate authority made for the test, and the CONNECT tunnel is answered with a
certificate for api.github.com that authority signed. Nothing leaves the machine: the tunnel is never forwarded.

Tokens carry permissions as GitHub's ``GITHUB_TOKEN`` does (``issues: write`` and so on): a call the token may not
make is answered 403 "Resource not accessible by integration", as GitHub answers it; ``faults`` answers a path with
a status of the test's choosing (a 500 of the API, a 403)."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import socket
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

API_HOST = "api.github.com"
READ = {"contents": "read", "pull-requests": "read", "issues": "read", "actions": "read"}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_authority(out: Path) -> tuple[Path, Path, Path]:
    """A certificate authority and api.github.com's certificate signed by it, for this test only: (the authority's
    certificate, the leaf's certificate, the leaf's key)."""
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "workflow engine test authority")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, API_HOST)]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(API_HOST)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = out / "authority.pem", out / "api.pem", out / "api.key"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


@dataclass
class Repo:
    """One repository as the API shows it."""

    full_name: str
    default_branch: str = "main"
    pulls: dict[int, dict[str, Any]] = field(default_factory=dict)
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)
    labels: set[str] = field(default_factory=set)
    runs: list[dict[str, Any]] = field(default_factory=list)


class FakeGitHub:
    """The fake API's state and its server. ``artifacts``: act's artifact server's directory (one folder a run id,
    one a name under it), read for a run's artifacts so what a run uploaded is what the API lists."""

    def __init__(self, tmp: Path, artifacts: Path) -> None:
        self.repos: dict[str, Repo] = {}
        self.tokens: dict[str, dict[str, str]] = {}
        self.faults: list[tuple[re.Pattern[str], int, str]] = []
        self.calls: list[tuple[str, str]] = []
        self.artifacts = artifacts
        self.authority, cert, key = make_authority(tmp / "tls")
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(cert, key)
        self._lock = threading.Lock()
        self._next = 1
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- the state a test sets ------------------------------------------------------------------------------------
    def repo(self, full_name: str, default_branch: str = "main") -> Repo:
        return self.repos.setdefault(full_name, Repo(full_name, default_branch))

    def token(self, value: str, **permissions: str) -> str:
        """A token with ``READ`` and ``permissions`` (``issues="write"``; a key's underscores are its dashes)."""
        self.tokens[value] = READ | {k.replace("_", "-"): v for k, v in permissions.items()}
        return value

    def fault(self, path: str, status: int, message: str = "Server Error") -> None:
        """Answer every call whose path matches ``path`` (a regular expression) with ``status``."""
        self.faults.append((re.compile(path), status, message))

    def pull(self, repo: str, number: int, **fields: Any) -> dict[str, Any]:
        pr = {"number": number, "labels": [], "files": [], "state": "open", **fields}
        self.repo(repo).pulls[number] = pr
        return pr

    def run(self, repo: str, **fields: Any) -> dict[str, Any]:
        """A workflow run the API lists (an engine's run, or one a test adds: another workflow's, a fork's)."""
        with self._lock:
            run_id = fields.pop("id", None) or self._next
            self._next = max(self._next, run_id) + 1
        record = {"id": run_id, "status": "completed", "created_at": _now(), **fields}
        self.repo(repo).runs.insert(0, record)  # newest first, as the API lists them
        return record

    def next_run_id(self) -> int:
        with self._lock:
            self._next += 1
            return self._next - 1

    def open_issues(self, repo: str) -> list[dict[str, Any]]:
        return [i for i in self.repo(repo).issues.values() if i["state"] == "open"]

    # -- the API --------------------------------------------------------------------------------------------------
    def answer(self, method: str, target: str, token: str | None, body: bytes) -> tuple[int, Any, dict[str, str]]:
        url = urlsplit(target)
        path, query = url.path.rstrip("/"), {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.calls.append((method, path))
        for rx, status, message in self.faults:
            if rx.search(path):
                return status, {"message": message}, {}
        perms = self.tokens.get(token or "")
        if perms is None:
            return 401, {"message": "Bad credentials"}, {}
        data = json.loads(body) if body.strip() else {}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)(/.*)?", path)
        if not m or m[1] not in self.repos:
            return 404, {"message": "Not Found"}, {}
        repo, rest = self.repos[m[1]], m[2] or ""
        need = _permission(method, rest)
        if need and not _allows(perms, *need):
            return 403, {"message": "Resource not accessible by integration"}, {}
        return self._route(repo, method, rest, query, data)

    def _route(self, repo: Repo, method: str, rest: str, query: dict[str, str], data: dict[str, Any]) -> tuple[
            int, Any, dict[str, str]]:  # fmt: skip
        if rest == "" and method == "GET":
            owner, name = repo.full_name.split("/")
            return 200, {"full_name": repo.full_name, "name": name, "owner": {"login": owner},
                         "default_branch": repo.default_branch, "has_issues": True}, {}  # fmt: skip
        if m := re.fullmatch(r"/pulls/(\d+)(/files)?", rest):
            pr = repo.pulls.get(int(m[1]))
            if pr is None:
                return 404, {"message": "Not Found"}, {}
            if m[2]:
                return _page(pr["files"], query)
            return 200, {k: v for k, v in pr.items() if k != "files"}, {}
        if m := re.fullmatch(r"/actions/workflows/([^/]+)/runs", rest):
            runs = [r for r in repo.runs if r.get("path", "").split("@")[0].endswith("/" + m[1])]
            runs = [r for r in runs if all(str(r.get(k)) == v for k, v in query.items() if k in ("status", "event"))]
            runs = [r for r in runs if "branch" not in query or r.get("head_branch") == query["branch"]]
            return 200, {"total_count": len(runs), "workflow_runs": runs}, {}
        if m := re.fullmatch(r"/actions/runs/(\d+)/artifacts", rest):
            arts = self._artifacts(int(m[1]))
            if "name" in query:
                arts = [a for a in arts if a["name"] == query["name"]]
            return 200, {"total_count": len(arts), "artifacts": arts}, {}
        if rest == "/issues" and method == "GET":
            want = set(filter(None, query.get("labels", "").split(",")))
            state = query.get("state", "open")
            found = [i for i in sorted(repo.issues.values(), key=lambda i: -i["number"])
                     if (state == "all" or i["state"] == state) and want <= {lb["name"] for lb in i["labels"]}]
            return 200, found, {}  # fmt: skip
        if rest == "/issues" and method == "POST":
            number = max([*repo.issues, *repo.pulls, 0]) + 1
            labels = [{"name": n} for n in data.get("labels", [])]
            repo.issues[number] = {"number": number, "title": data["title"], "body": data.get("body", ""),
                                   "state": "open", "labels": labels, "comments": [],
                                   "html_url": f"https://github.com/{repo.full_name}/issues/{number}"}  # fmt: skip
            return 201, repo.issues[number], {}
        if m := re.fullmatch(r"/issues/(\d+)(/comments)?", rest):
            issue = repo.issues.get(int(m[1]))
            if issue is None:
                return 404, {"message": "Not Found"}, {}
            if m[2] and method == "POST":
                issue["comments"].append(data["body"])
                return 201, {"body": data["body"]}, {}
            if method == "PATCH":
                issue.update({k: v for k, v in data.items() if k in ("title", "state", "body", "state_reason")})
            return 200, issue, {}
        if rest == "/labels" and method == "POST":
            if data["name"] in repo.labels:
                return 422, {"message": "Validation Failed", "errors": [{"code": "already_exists"}]}, {}
            repo.labels.add(data["name"])
            return 201, {"name": data["name"]}, {}
        return 404, {"message": "Not Found"}, {}

    def _artifacts(self, run_id: int) -> list[dict[str, Any]]:
        folder = self.artifacts / str(run_id)
        names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        return [{"id": run_id * 1000 + i, "name": n, "expired": False} for i, n in enumerate(names)]


def _permission(method: str, rest: str) -> tuple[str, str] | None:
    """The permission a call needs: reading a repository's contents, its pull requests, its actions; writing
    issues (labels included)."""
    if rest.startswith(("/issues", "/labels")):
        return ("issues", "write") if method != "GET" else ("issues", "read")
    if rest.startswith("/pulls"):
        return ("pull-requests", "read")
    if rest.startswith("/actions"):
        return ("actions", "read")
    return ("contents", "read")


def _allows(perms: dict[str, str], scope: str, level: str) -> bool:
    return {"none": 0, "read": 1, "write": 2}[perms.get(scope, "none")] >= {"read": 1, "write": 2}[level]


def _page(items: list[Any], query: dict[str, str]) -> tuple[int, Any, dict[str, str]]:
    """One page of a list, with the ``Link`` header ``gh api --paginate`` follows."""
    per, page = int(query.get("per_page", 30)), int(query.get("page", 1))
    chunk = items[(page - 1) * per: page * per]
    headers = {}
    if page * per < len(items):
        headers["Link"] = f'<https://{API_HOST}{{path}}?per_page={per}&page={page + 1}>; rel="next"'
    return 200, chunk, headers


def _handler(api: FakeGitHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_CONNECT(self) -> None:
            """``gh`` through its HTTPS proxy: the tunnel to api.github.com is answered here, never forwarded."""
            if self.path.split(":")[0] != API_HOST:
                self.send_error(403, "only api.github.com")
                return
            self.send_response(200, "Connection established")
            self.end_headers()
            self.wfile.flush()
            conn = api._tls.wrap_socket(self.connection, server_side=True)
            try:
                Handler(conn, self.client_address, self.server)
            except (OSError, ssl.SSLError):
                pass
            finally:
                self.close_connection = True
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            auth = self.headers.get("Authorization", "")
            token = auth.split(None, 1)[1] if " " in auth else None
            status, payload, headers = api.answer(self.command, self.path, token, body)
            out = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(out)))
            for key, value in headers.items():
                self.send_header(key, value.replace("{path}", urlsplit(self.path).path))
            self.end_headers()
            self.wfile.write(out)

        do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _serve

    return Handler
