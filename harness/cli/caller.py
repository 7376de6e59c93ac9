"""``python -m harness caller pr|nightly|multinode --ref REF [--repository OWNER/NAME]``: the workflow verl adds to
its ``.github/workflows/`` to call this harness, pinned to one commit of it, printed whole, ready to paste
(docs/verl-first-hour.md). The callers are docs/verl-caller-example.yml, docs/verl-nightly-caller-example.yml and
docs/verl-multinode-caller-example.yml, each itself what this command prints for the commit it pins; ``REF`` is
resolved to its commit in this checkout (a branch or a tag moves under verl's CI: the caller pins the sha), and a ref
this checkout does not hold is one line, exit 2."""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from harness import outcomes
from harness.errors import HarnessError
from harness.safeio import read_text

ROOT = Path(__file__).resolve().parents[2]
CALLERS = {"pr": "verl-caller-example.yml", "nightly": "verl-nightly-caller-example.yml",
           "multinode": "verl-multinode-caller-example.yml"}  # fmt: skip
# where verl's callers find the harness (docs/verl-first-hour.md): the examples are printed for it
HOME = "verl-project/verl-msprobe-harness"
SHA = re.compile(r"[0-9a-f]{40}")
REPOSITORY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}")
_USES = re.compile(r"(uses: )[\w.-]+/[\w.-]+(/\.github/workflows/[\w.-]+\.yml@)[0-9a-f]{40}(?: # .*)?")
_REPO = re.compile(r"(harness-repository: )\S+")
_REF = re.compile(r"(harness-ref: )[0-9a-f]{40}(?: # .*)?")


def commit_of(ref: str, root: Path = ROOT) -> str:
    """``ref``'s commit in the harness's checkout at ``root``; a full sha as it is where there is no checkout."""
    proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if proc.returncode == 0:
        return proc.stdout.strip()
    if SHA.fullmatch(ref) and not (root / ".git").exists():
        return ref
    raise HarnessError(f"--ref {ref!r}: not a commit of the harness's checkout at {root} (fetch it, or name a commit)")


def caller(kind: str, sha: str, repository: str) -> str:
    """The caller ``kind`` pinned to ``sha`` of ``repository``: every ``uses:`` of a harness workflow, every
    ``harness-repository`` and ``harness-ref``."""
    if not SHA.fullmatch(sha):
        raise HarnessError(f"{sha!r}: not a commit sha (40 hex digits): pin the harness by commit")
    if not REPOSITORY.fullmatch(repository):
        raise HarnessError(f"--repository {repository!r}: not OWNER/NAME")
    text = read_text(ROOT / "docs" / CALLERS[kind])
    pinned = f"{sha} # harness {sha[:12]}"
    text = _USES.sub(lambda m: f"{m[1]}{repository}{m[2]}{pinned}", text)
    text = _REPO.sub(lambda m: f"{m[1]}{repository}", text)
    return _REF.sub(lambda m: f"{m[1]}{pinned}, the sha of `uses:`", text)


def cmd_caller(args: argparse.Namespace) -> int:
    """Written to the standard output's descriptor itself, past the command line's redaction (harness.outside): every
    byte is this repository's own file, whose ``${{ github.token }}`` expressions are a workflow's, not a secret's."""
    text = caller(args.kind, commit_of(args.ref), args.repository)
    sys.stdout.flush()
    os.write(sys.__stdout__.fileno() if sys.__stdout__ else 1, text.encode())
    return outcomes.EXIT_PASS


def declare(sub: argparse._SubParsersAction) -> None:
    """``caller``'s arguments, declared beside the command (``harness.cli.parser`` gathers every command's)."""
    p = sub.add_parser("caller", help="the workflow verl adds to call this harness, pinned to one of its commits")
    p.add_argument("kind", choices=list(CALLERS), help="pr: the pull-request gates; nightly; multinode")
    p.add_argument("--ref", required=True, help="the harness commit to pin (a ref of this checkout)")
    p.add_argument("--repository", default=HOME, metavar="OWNER/NAME", help="where verl finds the harness")
    p.set_defaults(func=cmd_caller)
