"""A local verl git repository made from the installed verl, with commits that matter and one that does not.

``release``: the installed package as it is (verl 0.9.1) plus a minimal build file (a wheel's files carry none).
On top of it, each on its own branch: ``bad`` (verl's precision_debugger integration no longer dumps
actor_update: a silent regression the layout check must catch), ``neutral`` (a comment), ``drift``
(``DistProfiler`` renamed: the harness's workload no longer finds what it drives) and ``numerics`` (GAE's
advantages no longer whitened: every check passes, only the numbers of actor_update change).
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "verl"
version = "0.9.1"
requires-python = ">=3.10"

[tool.setuptools.packages.find]
include = ["verl*"]

[tool.setuptools.package-data]
"*" = ["**/*.yaml", "**/*.json", "version/*", "py.typed"]
"""
PROFILE = Path("verl/utils/profiler/precision_debugger_profile.py")
CORE_ALGOS = Path("verl/trainer/ppo/core_algos.py")


@dataclass(frozen=True)
class VerlRepo:
    path: Path
    release: str
    bad: str
    neutral: str
    drift: str
    numerics: str


def git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "harness",
        "GIT_AUTHOR_EMAIL": "harness@example.invalid",
        "GIT_COMMITTER_NAME": "harness",
        "GIT_COMMITTER_EMAIL": "harness@example.invalid",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def _commit(repo: Path, branch: str, message: str, edit: dict[Path, tuple[str, str]]) -> str:
    """On a new branch from main: replace text in files (regex, replacement), commit, return the sha."""
    git(repo, "checkout", "-q", "-b", branch, "main")
    for path, (pattern, repl) in edit.items():
        for f in [repo / path] if (repo / path).is_file() else sorted((repo / path).rglob("*.py")):
            text = f.read_text()
            new = re.sub(pattern, repl, text, flags=re.M)
            if new != text:
                f.write_text(new)
    git(repo, "commit", "-q", "-am", message)
    sha = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")
    return sha


def make_verl_repo(root: Path) -> VerlRepo:
    spec = importlib.util.find_spec("verl")
    assert spec and spec.submodule_search_locations, "the project venv has no verl"
    installed = Path(next(iter(spec.submodule_search_locations)))
    root.mkdir(parents=True)
    shutil.copytree(installed, root / "verl", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / ".gitignore").write_text("build/\n*.egg-info/\n__pycache__/\n")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "verl 0.9.1 (from the installed package)")
    git(root, "tag", "v0.9.1")
    release = git(root, "rev-parse", "HEAD")
    bad = _commit(
        root,
        "bad",
        "precision_debugger: skip actor_update",
        {PROFILE: (r"^(\s+)if stage in _SKIP_STAGES:\n", r'\1if stage in _SKIP_STAGES or stage == "actor_update":\n')},
    )
    neutral = _commit(root, "neutral", "comment only", {PROFILE: (r"\Z", "# a comment that changes nothing\n")})
    drift = _commit(root, "drift", "rename DistProfiler to Profiler", {Path("verl"): (r"\bDistProfiler\b", "Profiler")})
    numerics = _commit(
        root,
        "numerics",
        "GAE: advantages not whitened",
        {CORE_ALGOS: (r"^(\s+returns = advantages \+ values\n)\s+advantages = verl_F\.masked_whiten\(.*\n", r"\1")},
    )
    return VerlRepo(root, release, bad, neutral, drift, numerics)
