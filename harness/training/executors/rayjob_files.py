"""What a training submitted through verl's RayJob submitter (executor ``rayjob``) reads from the shared cache, and
how it checks it.

The shared cache (``/root/.cache/cicd_test`` on verl's runners) is the one directory the runner's container and every
pod of the job's cluster see; verl's own jobs use it too (its nightly refills ``verl/`` there) and so do the
pull-request jobs on the same runners, as root. So each training has a directory of its own there,
``verl-msprobe-harness/<job>`` (mode 0700, made fresh: two trainings, two harnesses, verl's nightly never share a
file), holding three files the harness writes and nothing else:

- ``bundle.tar``: the harness's own package, the verl under test (its source tree as the target gives it: a
  checkout's working tree, a commit's archive; or its wheel; a release has none: the image's own verl must be that
  release) and the wheels installed beside it (msprobe);
- ``env.json``: the variables every actor of the training gets (0600: a scenario's ``executor.rayjob.env`` may hold
  what only the job should read);
- ``job.sh``: what the submitter runs on the head pod. It carries the sha256 of the other two as the harness wrote
  them; its own comes in the payload's ``args``. Before it uses anything it checks itself, then copies each file onto
  the pod's own disk and checks the copy (what is checked is what is used: nothing is read twice from the cache), and
  refuses a file rewritten since the harness wrote it, naming it (``HARNESS RAY ERROR:``). Every node is then set up
  from that checked copy, sent through Ray (``ray_entry setup``): no node reads code from the shared cache, and verl
  is installed not editable, so a rewrite of any copy during the training changes nothing it runs.

What this does not hold against (docs/security.md): whoever rewrites ``job.sh`` before the pod has read it runs what
they wrote (its own check is then theirs); only the payload, sent straight to the submitter, is out of their reach.

The directory goes on every way out (``remove``); a harness killed outright leaves it, and the next session sweeps
what is older than ``STALE_AFTER_S`` (``sweep``)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shlex
import shutil
import tarfile
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Literal, cast

import harness
from harness import config
from harness.artifacts.rundir import RunDir
from harness.errors import InfraError
from harness.safeio import Versioned
from harness.scenario.settings.rayjob import RayJobRuntime
from harness.targets.environment import source_tree
from harness.training.executors import ray_entry, ray_gather, ray_lease
from harness.training.executors.ray_cluster import RUN_ENV
from harness.training.launch import Launch, NodeRun

HARNESS_DIR = "verl-msprobe-harness"  # in the shared cache
SWEPT = ("harness-", "job-")  # the directories there: a training's (its job's name), a workflow job's
SCRIPT, ENV, BUNDLE = "job.sh", "env.json", "bundle.tar"
STARTED = "harness rayjob: the training starts"  # the job script's line once every node is set up
# a directory of a run older than this is a killed harness's: no workflow job lives longer (verl's: 240 minutes)
STALE_AFTER_S = 24 * 3600
UNMADE = "(made when it runs)"  # the dry run's stand-in for a digest of what it does not build


class Posted(Versioned):
    """rayjob.json in the run dir: the run id a training's RayJob is POSTed under, written before the POST, so that
    whatever ends the harness (a SIGKILL included) the workflow's clean-up step can DELETE it, and the job id once the
    submitter names it. The clean-up DELETEs only run ids of its own Actions run: the run dir lies in the shared
    cache, and another id written there is not its job to delete."""

    FILE = "rayjob.json"
    REDO = "re-run the scenario with this harness"
    schema_version: Literal[1] = 1
    run_id: str
    attempt: str
    submitter: str
    name_suffix: str
    job_id: str | None = None


@dataclass(frozen=True)
class RunFiles:
    """A training's directory in the shared cache, and the sha256 of each file as the harness wrote it."""

    dir: Path
    digests: Mapping[str, str]

    @property
    def script(self) -> Path:
        return self.dir / SCRIPT


def run_dir(rt: RayJobRuntime, node: NodeRun) -> Path:
    return Path(rt.cache) / HARNESS_DIR / node.job


def job_env(launch: Launch, rt: RayJobRuntime, node: NodeRun) -> dict[str, str]:
    """Every actor's variables: the block's, the workload's, the run's id (how its actors are found)."""
    env = {**rt.env, "PYTHONUNBUFFERED": "1", **launch.env, RUN_ENV: node.job}
    if gate := config.GATHER_GATE.text():
        env[config.GATHER_GATE.name] = gate
    return env


def verl_version(launch: Launch) -> str | None:
    """The release the image's own verl must be, where the bundle holds no verl (a release, the pinned one)."""
    pkg = launch.verl
    return pkg.version if pkg is not None and pkg.kind in ("release", "pinned") else None


def job_script(launch: Launch, run: RunDir, rt: RayJobRuntime, node: NodeRun, digests: Mapping[str, str]) -> str:
    """What the RayJob runs on its head pod (module docstring): its own check, the files copied and checked, every
    node set up from them, then the harness's entrypoint, which runs the training and gathers every node's dumps into
    the run dir. The whole is one function read before it runs: a rewrite of the file once it started changes nothing
    it does."""
    here = run_dir(rt, node)
    entry = ray_entry.__name__
    inputs = [a for p in launch.inputs for a in ("--input", str(p))]
    version = verl_version(launch)
    setup = ["python3", "-m", entry, "setup", "--bundle", f"$here/{BUNDLE}", "--run", str(run.root),
             "--lease-stale-s", f"{ray_lease.STALE_S:g}", "--nodes", str(node.nnodes), "--resource", node.resource,
             *(["--verl-version", version] if version else [])]  # fmt: skip
    run_argv = ["python3", "-m", entry, "run", "--run", str(run.root), "--node-root", str(node.root), "--job", node.job,
                "--lease-stale-s", f"{ray_lease.STALE_S:g}", "--env-json", f"$here/{ENV}", *inputs, "--",
                launch.module, *launch.args]  # fmt: skip
    checked = " ".join(shlex.quote(f"{name}:{digests.get(name, UNMADE)}") for name in (ENV, BUNDLE))
    return "\n".join([
        "#!/usr/bin/env bash",
        f"# written by the harness for RayJob {node.job} (executor rayjob): verl's RayJob submitter runs it on the",
        "# head pod of the job's own KubeRay cluster with its own sha256 as its argument. It uses nothing of the",
        "# shared cache but what it copied onto this pod and found as the harness wrote it (the sha256 below).",
        "set -euo pipefail",
        "main() {",
        f"    local dir={shlex.quote(str(here))} got name want pair",
        f'    fail() {{ echo "{ray_entry.ERROR} $*"; exit 1; }}',
        f'    got=$(sha256sum < "$dir/{SCRIPT}") || fail "$dir/{SCRIPT} cannot be read"',
        f'    [ "${{got%% *}}" = "${{1:-}}" ] || fail "$dir/{SCRIPT} changed since the harness wrote it (sha256 '
        '${got%% *}, the payload names ${1:-none}): refused, nothing run"',
        "    here=$(mktemp -d /tmp/harness-rayjob.XXXXXX)  # global: the trap removes it as the script exits",
        "    trap 'rm -rf -- \"$here\"' EXIT",
        f"    for pair in {checked}; do",
        '        name=${pair%%:*} want=${pair#*:}',
        '        cp -- "$dir/$name" "$here/$name" || fail "$dir/$name cannot be read"',
        '        got=$(sha256sum < "$here/$name")',
        '        [ "${got%% *}" = "$want" ] || fail "$dir/$name changed since the harness wrote it (sha256 ${got%% *}, '
        'written $want): refused, nothing of it used"',
        "    done",
        f'    tar -xf "$here/{BUNDLE}" -C "$here" {ray_gather.BUNDLE_HARNESS}',
        f'    export PYTHONPATH="$here/{ray_gather.BUNDLE_HARNESS}${{PYTHONPATH:+:$PYTHONPATH}}"',
        "    " + _argv(setup),
        f"    echo {shlex.quote(STARTED)}",
        f"    cd {shlex.quote(str(run.root))}",
        "    " + _argv(run_argv),
        "}",
        'main "$@"; exit',
        "",
    ])  # fmt: skip


def _argv(argv: list[str]) -> str:
    """``argv`` as a shell line, ``$here/...`` left for the shell to expand (the pod's own directory)."""
    return " ".join(f'"{a}"' if a.startswith("$here/") else shlex.quote(a) for a in argv)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Hashing:
    """A file object that hashes what goes through it: the bundle's digest is that of the bytes written, never of
    what a read back from the shared cache would give."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out, self.digest = out, hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        return self.out.write(data)


def _regular(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
    """Regular files and directories only (a link would be unpacked on the nodes as the link), no bytecode."""
    if info.name.endswith((".pyc", "/__pycache__")) or "/__pycache__/" in info.name:
        return None
    if not (info.isfile() or info.isdir()):
        return None
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def write_bundle(out: IO[bytes], launch: Launch, rt: RayJobRuntime) -> str:
    """The bundle (module docstring) into ``out``; its sha256."""
    sink = _Hashing(out)
    with (
        tempfile.TemporaryDirectory(prefix="harness-rayjob-") as tmp,
        tarfile.open(fileobj=cast(IO[bytes], sink), mode="w|", format=tarfile.PAX_FORMAT) as tar,
    ):
        tar.add(Path(harness.__file__).parent, f"{ray_gather.BUNDLE_HARNESS}/harness", filter=_regular)
        pkg = launch.verl
        if pkg is not None and pkg.kind not in ("release", "pinned"):
            tree = Path(source_tree(pkg, Path(tmp)))  # a checkout's working tree, a commit's archive; or a wheel
            name = ray_gather.BUNDLE_VERL + (f"/{tree.name}" if tree.is_file() else "")
            tar.add(tree, name, filter=_regular)
        for wheel in sorted(Path(rt.wheels_dir).glob("*.whl")):
            tar.add(wheel, f"{ray_gather.BUNDLE_WHEELS}/{wheel.name}", filter=_regular)
    return sink.digest.hexdigest()


def make(launch: Launch, run: RunDir, rt: RayJobRuntime, node: NodeRun) -> RunFiles:
    """The training's directory, made fresh with its three files (module docstring); InfraError in one line where
    the shared cache cannot take them (full, read-only) or holds something at the name (a link: never written
    through)."""
    here = run_dir(rt, node)
    path = here
    try:
        here.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        os.mkdir(here, 0o700)  # a fresh name (the job's own random tail): what is there was put there by another
        env = json.dumps(job_env(launch, rt, node), indent=1, sort_keys=True).encode()
        _write(path := here / ENV, env, 0o600)
        with _open(path := here / BUNDLE, 0o600) as out:
            bundle = write_bundle(out, launch, rt)
        digests = {ENV: sha256(env), BUNDLE: bundle}
        script = job_script(launch, run, rt, node, digests).encode()
        _write(path := here / SCRIPT, script, 0o700)
    except OSError as exc:
        raise InfraError(shared_cache_problem(exc, path, rt.cache)) from None
    return RunFiles(here, {**digests, SCRIPT: sha256(script)})


def _open(path: Path, mode: int) -> IO[bytes]:
    """A new file in the run's fresh directory: never one that was there, never through a link."""
    return os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode), "wb")


def _write(path: Path, data: bytes, mode: int) -> None:
    with _open(path, mode) as f:
        f.write(data)


def shared_cache_problem(exc: OSError, path: Path, cache: str) -> str:
    """The one line of a shared cache that cannot take a file."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "is full"
        fix = "free space there: each training's bundle, the results dir and every node's gathered dumps lie under it"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        what = "is read-only here"
        fix = "the runner's container must mount it read-write (verl's runners mount /root/.cache)"
    elif exc.errno == errno.EEXIST:
        what, fix = "already holds the training's directory", "another process made it: nothing of it is used"
    else:
        what, fix = "cannot be written", "check that it is mounted"
    return f"the shared cache {cache} {what} ({exc.strerror}, writing {path}): {fix}"


def remove(path: Path) -> str | None:
    """The training's directory gone (a link at its name removed, never followed); None, or why not."""
    try:
        if os.path.islink(path) or not os.path.isdir(path):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        else:
            shutil.rmtree(path)
    except OSError as exc:
        return f"{path} is left in the shared cache: {exc.strerror}"
    return None


def sweep(cache: str, now: float | None = None) -> list[str]:
    """The directories of trainings whose harness was killed outright and of workflow jobs that never reached their
    last step (a runner lost), older than ``STALE_AFTER_S``, removed; one line each. Only the names this harness and
    its workflow give (``SWEPT``); a link is removed, never followed."""
    root, now = Path(cache) / HARNESS_DIR, time.time() if now is None else now
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    lines = []
    for entry in entries:
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        if not entry.name.startswith(SWEPT) or age < STALE_AFTER_S:
            continue
        why = remove(Path(entry.path))
        left = f"left {age / 3600:.0f} h ago by a run that ended without removing it"
        lines.append(why or f"removed {entry.path} from the shared cache: {left}")
    return lines


def payload_script(files: RunFiles | None, rt: RayJobRuntime, node: NodeRun) -> tuple[PurePosixPath, str]:
    """The script the payload names and the argument it passes (its sha256), or the dry run's stand-ins."""
    script = PurePosixPath(run_dir(rt, node)) / SCRIPT
    return script, files.digests[SCRIPT] if files is not None else UNMADE
