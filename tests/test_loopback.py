"""Every server a real training starts listens on loopback only, and its Ray cluster asks for a token of its own.

Runs real_fsdp_l0 (verl's real main_ppo on CPU: Ray's GCS, raylet, agents, workers, TransferQueue, gloo) and,
every 2 s until it ends, lists with psutil the listening sockets of the run's process tree, in each network
namespace the tree's processes are in (the launcher gives Ray one of its own: psutil reads the sockets of the
namespace it runs in, so the listing runs there through nsenter). A socket is reachable from another machine when
it listens on a non-loopback address, or on a wildcard (``0.0.0.0``, ``::``) in a namespace with an interface
besides ``lo``: the test fails on any such socket, and when nothing at all was seen (a listing that cannot see the
sockets would pass otherwise).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = ("127.", "::1", "::ffff:127.")
WILDCARD = ("0.0.0.0", "::")
LIST = """\
import json, sys, psutil
pids = set(json.loads(sys.argv[1]))
only_lo = set(psutil.net_if_addrs()) <= {"lo"}
out = [[c.laddr.ip, c.laddr.port, c.pid, only_lo] for c in psutil.net_connections(kind="inet")
       if c.status == psutil.CONN_LISTEN and c.pid in pids]
print(json.dumps(out))
"""


def reachable(ip: str, only_lo: bool) -> bool:
    return not ip.startswith(LOOPBACK) and not (ip in WILDCARD and only_lo)


def listening(pids: dict[int, str]) -> set[tuple[str, int, str, bool]]:
    """(address, port, process name, whether its namespace has only ``lo``) of every listening socket of
    ``pids``, namespace by namespace."""
    spaces: dict[str, int] = {}
    for pid in pids:
        try:
            spaces.setdefault(os.readlink(f"/proc/{pid}/ns/net"), pid)
        except OSError:
            continue  # ended meanwhile
    found: set[tuple[str, int, str, bool]] = set()
    for pid in spaces.values():
        argv = ["nsenter", f"--net=/proc/{pid}/ns/net", sys.executable, "-c", LIST, json.dumps(list(pids))]
        out = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
        if out.returncode == 0:
            found |= {(ip, port, pids.get(p, "?"), lo) for ip, port, p, lo in json.loads(out.stdout)}
    return found


@pytest.mark.heavy  # a real_fsdp_l0 run of its own (~4 min): .ci/run's 20 minutes hold one already
@pytest.mark.skipif(os.geteuid() != 0, reason="nsenter into the run's network namespace needs root")
def test_a_real_run_listens_on_loopback_only(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "harness", "run", str(ROOT / "scenarios" / "real_fsdp_l0.yaml")]
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen([*argv, "--results", str(tmp_path / "res")], cwd=ROOT, stdout=log, stderr=log)
    seen: set[tuple[str, int, str, bool]] = set()
    auth: dict[str, str] = {}  # Ray's GCS's RAY_AUTH_* variables: its token authentication
    deadline = time.monotonic() + 1200
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            tree = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            break
        names = {}
        for p in tree:
            try:
                names[p.pid] = p.name()
                if names[p.pid] == "gcs_server" and not auth:
                    auth = {k: v for k, v in p.environ().items() if k.startswith("RAY_AUTH")}
            except psutil.Error:
                continue
        seen |= listening(names)
        time.sleep(2)
    if proc.poll() is None:
        proc.kill()
    log.close()
    for ip, port, name, only_lo in sorted(seen):
        print(f"LISTEN {ip}:{port} {name} ({'lo only' if only_lo else 'other interfaces too'})")
    assert proc.wait() == 0, (tmp_path / "run.log").read_text()[-3000:]
    assert any(s[2] == "gcs_server" for s in seen), "Ray's GCS was never seen listening"
    assert not [s for s in seen if reachable(s[0], s[3])], sorted(seen)
    # the cluster asks for a token of its own, held in the environment of the run's processes only
    assert auth.get("RAY_AUTH_MODE") == "token" and re.fullmatch(r"[0-9a-f]{64}", auth.get("RAY_AUTH_TOKEN", "")), auth
    token = auth["RAY_AUTH_TOKEN"].encode()
    assert token not in (tmp_path / "run.log").read_bytes()
    assert not [
        p for p in (tmp_path / "res").rglob("*") if p.is_file() and not p.is_symlink() and token in p.read_bytes()
    ]
