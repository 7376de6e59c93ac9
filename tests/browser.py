"""A real headless Chromium (Debian's package), driven over the DevTools protocol on a pipe (``--remote-debugging-
pipe``: JSON messages on file descriptors 3 and 4, no port opened): a page loaded as a person's browser loads it,
with every console message, uncaught exception, log entry and network request it caused, a script evaluated in it
and a screenshot of it. Used by the page-of-the-nights tests (and by hand for the README's screenshot)."""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NAMES = ("chromium", "chromium-browser")


def find() -> str | None:
    return next((p for n in NAMES if (p := shutil.which(n))), None)


@dataclass
class Loaded:
    """What loading a page caused."""

    requests: list[str] = field(default_factory=list)  # every URL requested, the page's own included
    console: list[str] = field(default_factory=list)  # console messages of level error or warning
    exceptions: list[str] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # the browser's own log entries of level error or warning


class Browser:
    def __init__(self, binary: str, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # the child reads commands on fd 3 and writes on fd 4 (dup2 in the child, as the protocol asks)
        argv = [binary, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
                "--disable-background-networking", "--disable-component-update", f"--user-data-dir={self._profile}",
                "--window-size=1280,900", "about:blank"]  # fmt: skip

        def fds() -> None:  # out of the way first: either pipe end may itself be fd 3 or 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_chrome_r, from_chrome_w)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # dup2 leaves 3 and 4 inheritable; every other descriptor Python made is not (PEP 446), so none else leaks
        self._proc = subprocess.Popen(argv, close_fds=False, preexec_fn=fds, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self._events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.call(f"{domain}.enable", session=True)

    def _read(self) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError("chromium closed its pipe")
            self._buf += chunk
        message, _, self._buf = self._buf.partition(b"\0")
        return dict(json.loads(message))

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self._session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        while True:
            got = self._read()
            if got.get("id") == self._id:
                if "error" in got:
                    raise RuntimeError(f"{method}: {got['error']}")
                return dict(got.get("result", {}))
            self._events.append(got)

    def load(self, url: str) -> Loaded:
        """Navigate to ``url`` and wait for its load event (and a moment for late requests)."""
        self._events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" for e in self._events):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not load")
            self._events.append(self._read())
        self.evaluate("1")  # a round trip: the events sent before it are in
        out = Loaded()
        for e in self._events:
            p = e.get("params", {})
            match e.get("method"):
                case "Network.requestWillBeSent":
                    out.requests.append(p["request"]["url"])
                case "Runtime.consoleAPICalled" if p.get("type") in ("error", "warning", "assert"):
                    out.console.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
                case "Runtime.exceptionThrown":
                    out.exceptions.append(str(p["exceptionDetails"].get("text")))
                case "Log.entryAdded" if p["entry"]["level"] in ("error", "warning"):
                    out.log.append(f"{p['entry']['source']}: {p['entry']['text']}")
        return out

    def evaluate(self, expression: str) -> Any:
        got = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in got:
            raise RuntimeError(f"{expression[:60]}: {got['exceptionDetails']}")
        return got["result"].get("value")

    def screenshot(self, path: Path, height: int | None = None) -> Path:
        """The whole page (or its top ``height`` pixels) as a PNG."""
        root = "document.documentElement"
        width, full = self.evaluate(f"[{root}.scrollWidth, {root}.scrollHeight]")
        clip = {"x": 0, "y": 0, "width": width, "height": min(full, height or full), "scale": 1}
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": True, "clip": clip}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params, session=True)["data"]))
        return path

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, OSError, TimeoutError):
            self.call("Browser.close")
        try:
            self._proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_chrome)
        os.close(self._from_chrome)
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
