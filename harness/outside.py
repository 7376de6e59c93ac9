"""Text that came from outside the harness (a server's answer, a job id, a field of a history file, a verl commit's
subject, an exception message that carries one of them) is data, never a command and never a secret shown.

Two steps, each in one place:

- ``redact``: URL credentials, bearer and basic tokens, ``KEY=value`` where KEY names a secret, GitHub's token
  shapes, the values of this process's secret-looking environment variables and every value given to ``secret``
  (the Ray token the harness reads from a file) become ``***``. It runs on every line the command line prints
  (``RedactingStream``) and on every file the harness writes through ``safeio`` (``Versioned.write``), so a
  cluster's error page that echoes a token is stored and shown without it.
- ``shown``: one field as one line: redacted, control characters and line breaks escaped (a ``\\n`` in a server's
  message would start a line of its own), a leading ``::`` and any ``##[`` defused (the GitHub runner reads a line
  that starts with ``::`` as a workflow command, and ``##[`` anywhere in the older form: a commit subject
  ``::error title=ok::merge it`` would have been an annotation of its own), and cut to a length.

Standard library only: ``harness.job`` uses it before anything is installed."""

from __future__ import annotations

import io
import os
import re
from typing import TextIO

MASK = "***"
_SECRET_NAME = r"[A-Za-z0-9_.-]*(?:TOKEN|SECRET|PASSWORD|PASSWD|APIKEY|API_KEY|ACCESS_KEY|PRIVATE_KEY|CREDENTIALS?)"
_PATTERNS = (
    # scheme://user:password@host and scheme://token@host: the whole userinfo
    (re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://)[^\s/@\"'\\<>]+@"), rf"\g<keep>{MASK}@"),
    # an Authorization header's value, wherever it was echoed ("token X" only where X holds a digit: prose is no key)
    (re.compile(r"(?P<keep>\b(?:Bearer|Basic|bearer)\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\g<keep>{MASK}"),
    (re.compile(r"(?P<keep>\b[Tt]oken\s+)(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}"), rf"\g<keep>{MASK}"),
    # KEY=value, "key": "value", X-Auth-Token: value where KEY names a secret (not a number: max_tokens=512 is no
    # secret; a bare word before a colon is prose: "unclosed token: line 1")
    (
        re.compile(rf"(?i)(?P<keep>(?:\b{_SECRET_NAME}\b\s*=|\b{_SECRET_NAME}\b[\"']\s*:|"
                   rf"\b[A-Za-z0-9]+[_-]{_SECRET_NAME}\b\s*:)\s*[\"']?)(?![\d.]+\b)[^\s\"'&,;<>]+"),
        rf"\g<keep>{MASK}",
    ),
    # GitHub's token shapes (classic, fine-grained, app, OAuth, refresh)
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})"), MASK),
)
_ENV_SECRET = re.compile(rf"(?i)^{_SECRET_NAME}$")
_MIN_SECRET = 8  # shorter values are not masked by value (a 3-letter token would mask every word holding it)
_given: set[str] = set()
_secret_names: dict[str, bool] = {}  # an environment variable's name: whether it names a secret (12x faster shown)
# what a line of text must not hold: C0 and C1 controls, DEL and Unicode's own line and paragraph separators
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": " "}
_LIMIT = 300


def secret(value: str | None) -> None:
    """``value`` is masked wherever it would be printed or written from now on in this process (a token read from a
    file, which no environment variable names)."""
    if value and len(value.strip()) >= _MIN_SECRET:
        _given.add(value.strip())


def _values() -> list[str]:
    env = []
    for name in os.environ:  # read on every call (a test, a command sets one), each name matched once a process
        if (secret := _secret_names.get(name)) is None:
            secret = _secret_names[name] = bool(_ENV_SECRET.match(name))
        if secret and len(value := os.environ[name].strip()) >= _MIN_SECRET:
            env.append(value)
    return sorted({*_given, *env}, key=len, reverse=True)  # the longest first: no partial mask


def redact(text: str) -> str:
    """``text`` with every credential this module knows of replaced by ``***`` (module docstring)."""
    for value in _values():
        text = text.replace(value, MASK)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def shown(text: object, limit: int = _LIMIT) -> str:
    """One outside field as one printable line (module docstring): redacted, escaped, defused, at most ``limit``
    characters (``…`` where cut)."""
    line = _CONTROL.sub(lambda m: _ESCAPES.get(m[0], f"\\x{ord(m[0]):02x}" if ord(m[0]) < 256 else
                                               f"\\u{ord(m[0]):04x}"), redact(str(text)))  # fmt: skip
    line = line.replace("##[", "#\\#[")
    if line.lstrip().startswith("::"):
        line = "\\" + line
    return line if len(line) <= limit else line[: limit - 1] + "…"


class RedactingStream(io.TextIOBase):
    """A text stream that redacts what passes through it, a line at a time (a secret is never split across two
    writes of one line); a flush writes what is held. The command line's stdout and stderr go through it."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner
        self._held = ""

    def write(self, s: str) -> int:
        text = self._held + s
        done, sep, self._held = text.rpartition("\n")
        if sep:
            self.inner.write(redact(done + sep))
        return len(s)

    def flush(self) -> None:
        if self._held:
            self.inner.write(redact(self._held))
            self._held = ""
        self.inner.flush()

    def isatty(self) -> bool:
        return self.inner.isatty()

    def fileno(self) -> int:
        return self.inner.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.inner.encoding
