"""verl's finish hook as the harness exercises it: what the hook writes and how it is read back.

verl (#7408, 0.9.1) runs ``finish_hook_cmd`` once, after the last profiled step, on the ranks ``finish_hook_ranks``
selects, with the node's save_path in ``VERL_PROFILE_SAVE_PATH``; its docs tell a multi-node user to pick one rank a
node, whose command ships that node's directory. A scenario that sets ``precision_debugger.finish_hook_ranks`` gets
this module as the command (``python -m harness.artifacts.finish_hook OUT``): it ships nothing, it records what it
would ship, one JSON line a run appended to ``OUT/rank<R>.jsonl`` (every regular file under the save_path, its size and
sha256; links, FIFOs and devices named, never followed or opened; a file or directory it cannot read, or one removed
while it lists, named too, and the rest listed). OUT is ``finish_hook/`` in the run dir (one host)
or in each node's own run dir (a cluster), which the job gathers with the node's dumps. The layout check then compares
each line with what that node held (``harness.checks.finish_hook``).

The writer runs inside verl's worker, after the last profiled step, in the workers' interpreter: it imports nothing
those lack (the reader's pydantic is verl's dependency too). What goes wrong there is one line and exit 2, never a
traceback in verl's log: OUT that is a file, a link or read-only; a rank verl did not export (or not a number), whose
listing is still written, as ``rank-unknown.jsonl``, for the check to name."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
from pathlib import Path

from pydantic import Field

from harness.errors import HarnessError, unexpected
from harness.outcomes import EXIT_ERROR, EXIT_PASS
from harness.outside import shown
from harness.safeio import MB, InputError, open_to_write, output_path, read_text
from harness.strict import Strict

MAX_BYTES = 16 * MB  # one rank's manifest file: ~150 bytes a dump file
PATH_LIMIT = 4096  # a listed path is cut past this (PATH_MAX)
NO_RANK = "rank-unknown.jsonl"  # the listing of a hook run verl gave no rank (or no number) to
USAGE = "usage: python -m harness.artifacts.finish_hook OUT (verl's finish_hook_cmd; OUT: where the listing goes)"


def _digest(path: str) -> tuple[int, str] | None:
    """(bytes read, sha256) of a regular file; None where a link or a FIFO was swapped in after the lstat (never
    followed nor opened for reading: a FIFO would block the hook)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        digest, size = hashlib.sha256(), 0
        while chunk := f.read(4 << 20):
            digest.update(chunk)
            size += len(chunk)
    return size, digest.hexdigest()


def _why(exc: OSError, what: str = "") -> str:
    """What the walk met where it could not read: the file went, or it may not be read."""
    if isinstance(exc, FileNotFoundError):
        return "removed while it was listed"
    return f"unreadable{what} ({exc.strerror or exc})"


def listing(root: str) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """Every regular file under ``root`` (path relative to it -> size, sha256), and a line for everything else
    there ("<path>: a symbolic link", "unreadable (Permission denied)", "unreadable directory (...)", "removed
    while it was listed"), never following a link: what a command shipping ``root`` would find. A file or
    directory it cannot read is named, never skipped in silence: the node held it and shipping would lose it (the
    layout check fails naming it), and the rest is still listed. Paths are shown as one line (a file name is the
    code under test's to choose)."""
    files: dict[str, tuple[int, str]] = {}
    refused: list[str] = []

    def rel(path: str) -> str:
        return shown(os.path.relpath(path, root), PATH_LIMIT)

    def closed(exc: OSError) -> None:  # os.walk's: a directory it could not list
        refused.append(f"{rel(exc.filename or root)}: {_why(exc, ' directory')}")

    for d, dirs, names in os.walk(root, onerror=closed):
        for name in sorted(names) + [n for n in dirs if os.path.islink(os.path.join(d, n))]:
            path = os.path.join(d, name)
            try:
                st = os.lstat(path)
                found = _digest(path) if stat.S_ISREG(st.st_mode) else None
            except OSError as exc:
                refused.append(f"{rel(path)}: {_why(exc)}")
                continue
            if found is None:
                refused.append(
                    f"{rel(path)}: {'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a regular file'}"
                )
            else:
                files[rel(path)] = found
        dirs.sort()
    return dict(sorted(files.items())), sorted(refused)


def rank_of(environ: dict[str, str]) -> tuple[int | None, str]:
    """The rank verl ran the hook on (``VERL_PROFILE_RANK``), or None and why not."""
    raw = environ.get("VERL_PROFILE_RANK")
    if raw is None:
        return None, "VERL_PROFILE_RANK is not set"
    if not (raw.isascii() and raw.isdigit()):
        return None, f"VERL_PROFILE_RANK '{shown(raw)}' is not a rank (a whole number)"
    return int(raw), ""


def write(out: str, environ: dict[str, str]) -> Path:
    """One run of the hook: its line appended to ``out/rank<R>.jsonl`` (appended, never replaced: a hook run twice
    leaves two lines, which the check counts); a run verl gave no rank still lists its node, as ``rank-unknown``
    (the check names it). OUT that is not a directory, a link or a place that cannot be written: OutputError."""
    save_path = environ.get("VERL_PROFILE_SAVE_PATH", "")
    rank = rank_of(environ)[0]
    files, refused = listing(save_path) if save_path and os.path.isdir(save_path) else ({}, [])
    line = {
        "rank": rank,
        "role": environ.get("VERL_PROFILE_ROLE", ""),
        "tool": environ.get("VERL_PROFILE_TOOL", ""),
        "host": socket.gethostname(),
        "save_path": save_path,
        "save_path_exists": os.path.isdir(save_path),
        "files": [{"path": p, "size": size, "sha256": sha} for p, (size, sha) in files.items()],
        "refused": refused,
    }
    path = output_path(out, "OUT", directory=True) / (NO_RANK if rank is None else f"rank{rank}.jsonl")
    with open_to_write(path, append=True) as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return path


def main(argv: list[str], environ: dict[str, str]) -> int:
    """verl's ``finish_hook_cmd``: one line a problem, exit 2, never a traceback (verl prints what the command
    said); the listing is written wherever it can be, a rank's missing number included."""
    if len(argv) != 1:
        print(f"finish hook: {USAGE}", file=sys.stderr)
        return EXIT_ERROR
    try:
        path = write(argv[0], environ)
    except HarnessError as exc:
        print(f"finish hook: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except Exception as exc:  # a bug: one line naming its frame, exit 2
        print(f"finish hook: {unexpected(exc)}", file=sys.stderr)
        return EXIT_ERROR
    print(f"finish hook: wrote {shown(path)}")
    if problem := rank_of(environ)[1]:
        print(f"finish hook: {problem}: listed as {NO_RANK} (verl exports the rank it runs the hook on)",
              file=sys.stderr)  # fmt: skip
        return EXIT_ERROR
    return EXIT_PASS


class HookFile(Strict):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class HookRun(Strict):
    """One run of the hook on one rank, as it wrote it."""

    rank: int | None = Field(ge=0)  # None: verl gave the hook no rank, or no number (``rank_of``)
    role: str
    tool: str
    host: str
    save_path: str
    save_path_exists: bool
    files: list[HookFile]
    refused: list[str]

    @property
    def sizes(self) -> dict[str, tuple[int, str]]:
        """path -> (size, sha256), as ``listing`` names them."""
        return {f.path: (f.size, f.sha256) for f in self.files}


def read_runs(root: Path) -> tuple[list[HookRun], list[str]]:
    """Every hook run recorded under ``root`` (a run dir's ``finish_hook/``), and a line for each file or line that
    does not read (named by file and line: a rank's hook that wrote half a line, a link)."""
    runs: list[HookRun] = []
    problems: list[str] = []
    if not root.is_dir() or root.is_symlink():
        return runs, problems
    for path in sorted(root.iterdir()):
        try:
            text = read_text(path, MAX_BYTES, follow=False)
        except InputError as exc:
            problems.append(f"{path}: {exc}")
            continue
        for n, raw in enumerate(text.splitlines(), 1):
            try:
                runs.append(HookRun.model_validate_json(raw))
            except ValueError as exc:
                problems.append(
                    f"{path}:{n}: not a line of the harness's finish hook ({shown(str(exc).splitlines()[0])})"
                )
    return runs, problems


if __name__ == "__main__":  # verl's finish_hook_cmd: python -m harness.artifacts.finish_hook OUT
    sys.exit(main(sys.argv[1:], dict(os.environ)))
