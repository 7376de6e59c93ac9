"""verl's finish hook as the harness exercises it: what the hook writes and how it is read back.

verl (#7408, 0.9.1) runs ``finish_hook_cmd`` once, after the last profiled step, on the ranks ``finish_hook_ranks``
selects, with the node's save_path in ``VERL_PROFILE_SAVE_PATH``; its docs tell a multi-node user to pick one rank a
node, whose command ships that node's directory. A scenario that sets ``precision_debugger.finish_hook_ranks`` gets
this module as the command (``python -m harness.artifacts.finish_hook OUT``): it ships nothing, it records what it
would ship, one JSON line a run appended to ``OUT/rank<R>.jsonl`` (every regular file under the save_path, its size and
sha256; links, FIFOs and devices named, never followed or opened). OUT is ``finish_hook/`` in the run dir (one host)
or in each node's own run dir (a cluster), which the job gathers with the node's dumps. The layout check then compares
each line with what that node held (``harness.checks.finish_hook``).

The writer runs inside verl's worker, after the last profiled step, in the workers' interpreter: it imports nothing
those lack (the reader's pydantic is verl's dependency too)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import sys
from pathlib import Path

from pydantic import Field

from harness.safeio import MB, InputError, read_text
from harness.strict import Strict

MAX_BYTES = 16 * MB  # one rank's manifest file: ~150 bytes a dump file


def listing(root: str) -> tuple[dict[str, tuple[int, str]], list[str]]:
    """Every regular file under ``root`` (path relative to it -> size, sha256), and what else is there ("<path>: a
    symbolic link"), never following a link: what a command shipping ``root`` would find."""
    files: dict[str, tuple[int, str]] = {}
    refused: list[str] = []
    for d, dirs, names in os.walk(root):
        for name in sorted(names) + [n for n in dirs if os.path.islink(os.path.join(d, n))]:
            path = os.path.join(d, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                refused.append(f"{rel}: {'a symbolic link' if stat.S_ISLNK(st.st_mode) else 'not a regular file'}")
                continue
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                while chunk := f.read(4 << 20):
                    digest.update(chunk)
            files[rel] = (st.st_size, digest.hexdigest())
        dirs.sort()
    return dict(sorted(files.items())), sorted(refused)


def write(out: str, environ: dict[str, str]) -> Path:
    """One run of the hook: its line appended to ``out/rank<R>.jsonl`` (appended, never replaced: a hook run twice
    leaves two lines, which the check counts)."""
    save_path, rank = environ.get("VERL_PROFILE_SAVE_PATH", ""), environ.get("VERL_PROFILE_RANK", "")
    files, refused = listing(save_path) if save_path and os.path.isdir(save_path) else ({}, [])
    line = {
        "rank": int(rank),
        "role": environ.get("VERL_PROFILE_ROLE", ""),
        "tool": environ.get("VERL_PROFILE_TOOL", ""),
        "host": socket.gethostname(),
        "save_path": save_path,
        "save_path_exists": os.path.isdir(save_path),
        "files": [{"path": p, "size": size, "sha256": sha} for p, (size, sha) in files.items()],
        "refused": refused,
    }
    os.makedirs(out, exist_ok=True)
    path = Path(out, f"rank{rank}.jsonl")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(line, sort_keys=True) + "\n")
    return path


class HookFile(Strict):
    path: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class HookRun(Strict):
    """One run of the hook on one rank, as it wrote it."""

    rank: int = Field(ge=0)
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
                problems.append(f"{path}:{n}: not a line of the harness's finish hook ({str(exc).splitlines()[0]})")
    return runs, problems


if __name__ == "__main__":  # verl's finish_hook_cmd: python -m harness.artifacts.finish_hook OUT
    print(f"finish hook: wrote {write(sys.argv[1], dict(os.environ))}")
