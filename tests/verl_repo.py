"""A local verl git repository made from the installed verl, with commits that matter and one that does not.

``release``: the installed package as it is (verl 0.9.1) plus a minimal build file (a wheel's files carry none). On
top of it, each on its own branch: ``bad`` (verl's precision_debugger integration no longer dumps actor_update: a
silent regression the layout check must catch), ``neutral`` (a comment), ``drift`` (``DistProfiler`` renamed: the
harness's workload no longer finds what it drives) and ``numerics`` (GAE's advantages no longer whitened: every
check passes, only the numbers of actor_update change). And the failures whose party the
verdict must name, each as a pull request would make it: ``crash`` (the profiler's start keeps a record it never
initialised: verl raises inside a profiled stage), ``newdep`` (the profiler imports a new requirement, declared in
the build file, that a ``--no-deps`` target environment lacks) and ``kwarg`` (``FileLogger``'s ``experiment_name``
renamed: verl's positional caller is unaffected, the harness's embedded workload, which passes it by name, raises)
and ``patch`` (``initialize_global_process_group_ray``'s ``backend`` renamed: verl's callers follow, the CPU patch
of verl's real trainer raises). And a slowdown that computes nothing: ``wait`` (the profiler's start backs off 0.25
s before each stage's dump: three profiled stages of tiny_fsdp_l1 make its profiled step ~+30 % in wall time,
measured 2.56 s of it per rank on the loaded 2-core machine, and not a second of CPU time). And ``annotation`` (a
typo in the engine workers' ``actor_update`` annotation: the stage is never collected; only verl's real trainer runs
those workers, the embedded workload annotates its own). And two a pull request could well make: ``bloat``
(msprobe's level forced to ``mix`` "for richer reports": every module's and every API's statistics, whatever the
scenario's level) and ``gc`` (the profiler's start collects garbage before each stage's dump "so the previous
stage's tensors are freed": 0.23 s of CPU a collection in a process with torch, verl, msprobe and transformers
loaded, measured here, as in verl's real trainer; the embedded workload freezes its start-up objects, so there it
costs a few per cent: base against head said ok, head/base 1.04x, benchmarks/pr_verdict.py). And a slowdown that
computes: ``profile`` (the profiler profiles each dumped stage's Python calls with cProfile "to find msprobe's hot
spots", logged at debug level: tiny_fsdp_l1's profiled step head/base 1.41x in base against head,
benchmarks/pr_verdict.py) and ``profile_actor`` (the same in the actor's stages only, ~80 % of the dumped bytes:
sized for ~+30 %). And ``wait_short``: ``wait``'s back-off at 0.11 s, sized for ~+30 % of tiny_fsdp_l1's profiled step
in wall time (``wait`` read head/base 1.73x there: 3 x 0.25 s on a ~1.1 s step). And ``fp32``: the FSDP engine keeps
its parameters in fp32 when no mixed precision is configured ("bf16 log-probs drift from the rollout's"): verl's real
trainer runs FSDP2 with none configured, so every module's outputs change dtype and value in real_fsdp_l0's dumps
(``numerics``, GAE, cannot show there: that scenario runs GRPO). And ``untrainable``: verl's ``simple_timer`` passes its
timer an argument the timer does not take yet (a half-made change): every training fails the same way,
precision_debugger off and on, in verl's own code, as verl's #7212 did on every platform but TPU.
"""

from __future__ import annotations

import functools
import importlib.util
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
TRACKING = Path("verl/utils/tracking.py")
FILE_LOGGER_INIT = (
    r"class FileLogger:\n    def __init__\(self, project_name: str, experiment_name: str\):\n"
    r"        self\.project_name = project_name\n        self\.experiment_name = experiment_name"
)
FILE_LOGGER_RUN_NAME = (
    r"class FileLogger:\n    def __init__(self, project_name: str, run_name: str):\n"
    r"        self.project_name = project_name\n        self.experiment_name = run_name"
)
DISTRIBUTED = Path("verl/utils/distributed.py")
CHECKPOINT = Path("verl/checkpoint_engine/base.py")
RENAMED_BACKEND = r"timeout_second=None, backend=None\)|backend = backend or|backend=backend,(?=\n\s+rank=rank)"
NEWDEP_REQUIREMENT = 'requires-python = ">=3.10"\ndependencies = ["verl-msprobe-stats>=1.0"]\n'
CORE_ALGOS = Path("verl/trainer/ppo/core_algos.py")
PERFORMANCE = Path("verl/utils/profiler/performance.py")
WAIT_S = 0.25
WAIT_SHORT_S = 0.11  # 3 stages of tiny_fsdp_l1: ~0.33 s on a ~1.1 s profiled step (``wait``'s +2.24 x 0.335 s)
PROFILER_START = r"^(\s+)self\._debugger\.start\(model\)\n"  # the debugger's start call
PROFILER_ON_OFF = r"^(\s+)self\._debugger\.(start\(model\)|stop\(\))\n"  # the debugger's start and stop calls
ENGINE_WORKERS = Path("verl/workers/engine_workers.py")
ENGINE_FSDP = Path("verl/workers/engine/fsdp/transformer_impl.py")


@dataclass(frozen=True)
class VerlRepo:
    path: Path
    release: str
    bad: str
    neutral: str
    drift: str
    numerics: str
    crash: str
    newdep: str
    kwarg: str
    patch: str
    wait: str
    annotation: str
    bloat: str
    gc: str
    profile: str
    profile_actor: str
    wait_short: str
    fp32: str
    untrainable: str


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


def _commit(repo: Path, branch: str, message: str, edit: dict[Path, tuple[str, Any]]) -> str:
    """On a new branch from main: replace text in files (regex, replacement or function), commit, return the sha."""
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


def _backends(m: re.Match[str]) -> str:
    return {"backend=backend,": "backend=backends,", "backend = backend or": "backends = backends or"}.get(
        m[0], "timeout_second=None, backends=None)"
    )


def _profiled(m: re.Match[str], prefix: str = "") -> str:
    """The profile commits: a Python profiler on from the debugger's start to its stop, in the stages whose name
    starts with ``prefix``."""
    pad = m[1]
    log = 'logger.debug("slowest calls: %s", pstats.Stats(self._calls).sort_stats("cumulative"))'
    if m[2] == "stop()" and not prefix:
        return f"{pad}import pstats\n\n{pad}self._calls.disable()\n{pad}{log}\n{m[0]}"
    if m[2] == "stop()":
        off = f"{pad}    self._calls.disable()\n{pad}    {log}\n{pad}    self._calls = None\n"
        return f'{pad}import pstats\n\n{pad}if getattr(self, "_calls", None) is not None:\n{off}{m[0]}'
    on = f"{pad}self._calls = cProfile.Profile(builtins=False)\n{pad}self._calls.enable()\n"
    if prefix:
        on = f'{pad}if stage.startswith("{prefix}"):\n' + "".join(f"    {line}\n" for line in on.splitlines())
    return f"{m[0]}{pad}import cProfile\n\n{on}"


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
    crash = _commit(
        root,
        "crash",
        "precision_debugger: remember the step each stage started at",
        {PROFILE: (r"^(\s+)if not self\._should_collect\(stage, global_step\):\n(\s+)return False\n",
                   r"\g<0>\1self._started_at[stage] = global_step\n")},
    )  # fmt: skip
    git(root, "checkout", "-q", "-b", "newdep", "main")
    (root / "pyproject.toml").write_text(PYPROJECT.replace('requires-python = ">=3.10"\n', NEWDEP_REQUIREMENT))
    text = (root / PROFILE).read_text()
    (root / PROFILE).write_text(text.replace("\nimport ", "\nimport verl_msprobe_stats  # noqa: F401\nimport ", 1))
    git(root, "commit", "-q", "-am", "precision_debugger: statistics through verl-msprobe-stats")
    newdep = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    kwarg = _commit(
        root,
        "kwarg",
        "tracking: FileLogger's experiment_name is run_name",
        {TRACKING: (FILE_LOGGER_INIT, FILE_LOGGER_RUN_NAME)},
    )
    patch = _commit(
        root,
        "patch",
        "distributed: backend renamed to backends",
        {
            DISTRIBUTED: (
                r"timeout_second=None, backend=None\)|backend = backend or|backend=backend,(?=\n\s+rank=rank)",
                _backends,
            ),
            CHECKPOINT: (r'timeout_second=None, backend="cpu:gloo"', 'timeout_second=None, backends="cpu:gloo"'),
        },
    )
    git(root, "checkout", "-q", "-b", "wait", "main")
    text = (root / PROFILE).read_text()
    text = text.replace("\nimport os\n", "\nimport os\nimport time\n", 1)
    text = re.sub(
        PROFILER_START,
        rf"\1time.sleep({WAIT_S})  # let the previous stage's dump files settle\n\g<0>",
        text,
        count=1,
        flags=re.M,
    )
    (root / PROFILE).write_text(text)
    git(root, "commit", "-q", "-am", "precision_debugger: back off before each stage's dump")
    wait = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    annotation = _commit(
        root,
        "annotation",
        "engine workers: actor_update annotated as actor_updates",
        {ENGINE_WORKERS: (r'role="actor_update"', 'role="actor_updates"')},
    )
    bloat = _commit(
        root,
        "bloat",
        "precision_debugger: level mix for richer reports",
        {PROFILE: (r"PrecisionDebugger\(config_path=self\.precision_cfg\.config_path, dump_path=dump_path\)",
                   'PrecisionDebugger(config_path=self.precision_cfg.config_path, dump_path=dump_path, level="mix")')},
    )  # fmt: skip
    gc = _commit(
        root,
        "gc",
        "precision_debugger: free the previous stage's tensors before each dump",
        {PROFILE: (PROFILER_START, r"\1import gc\n\n\1gc.collect()\n\g<0>")},
    )  # fmt: skip
    profile = _commit(
        root,
        "profile",
        "precision_debugger: profile each dumped stage's calls (debug log)",
        {PROFILE: (PROFILER_ON_OFF, _profiled)},
    )
    profile_actor = _commit(
        root,
        "profile_actor",
        "precision_debugger: profile the actor's dumped stages' calls (debug log)",
        {PROFILE: (PROFILER_ON_OFF, functools.partial(_profiled, prefix="actor_"))},
    )
    wait_short = _commit(
        root,
        "wait_short",
        "precision_debugger: a short back-off before each stage's dump",
        {PROFILE: (PROFILER_START,
                   rf"\1import time\n\n\1time.sleep({WAIT_SHORT_S})  # let the previous stage's dump settle\n\g<0>")},
    )  # fmt: skip
    fp32 = _commit(
        root,
        "fp32",
        "fsdp engine: parameters in fp32 when no mixed precision is configured",
        {ENGINE_FSDP: (r"^(\s+)param_dtype = torch\.bfloat16\n(?=\s+reduce_dtype = torch\.float32\n)",
                       r"\1param_dtype = torch.float32  # bf16 log-probs drift from the rollout's\n")},
    )  # fmt: skip
    untrainable = _commit(
        root,
        "untrainable",
        "timer: the device synchronized before each section's clock is read",
        {PERFORMANCE: (r"^(\s+)yield from _timer\(name, timing_raw\)\n",
                       r"\1yield from _timer(name, timing_raw, synchronize=True)\n")},
    )  # fmt: skip
    return VerlRepo(
        root, release, bad, neutral, drift, numerics, crash, newdep, kwarg, patch, wait, annotation, bloat, gc, profile,
        profile_actor, wait_short, fp32, untrainable,
    )  # fmt: skip


# the nightly repository's step, by its cause: ``wait`` backs off (no CPU), ``compute`` spends the same seconds of the
# process's own CPU time (a check "that the previous stage's tensors are all finite", as a busy loop)
STEP = {
    "wait": (r"\1import time\n\n\1time.sleep({s})  # let the previous stage's dump settle\n\g<0>",
             "precision_debugger: a short back-off before each stage's dump"),
    "compute": (r"\1import time\n\n\1_t = time.process_time()\n\1while time.process_time() - _t < {s}:  # the "
                r"previous stage's tensors all finite\n\1    pass\n\g<0>",
                "precision_debugger: check the previous stage's tensors before each stage's dump"),
}  # fmt: skip


def make_nightly_repo(
    root: Path, nights: int, step_at: int, wait_s: float = WAIT_SHORT_S, cause: str = "wait"
) -> list[str]:
    """verl's main as a nightly sees it: ``nights`` commits on one first-parent line, one a night, the first the
    installed release; from night ``step_at`` (1-based) on, the profiler's start backs off ``wait_s`` s before each
    stage's dump (``wait_short``'s change: a slowdown that waits, in every profiled stage; ``cause="compute"``: the
    same seconds of CPU, computed), the other commits a comment each. Returns the commits, night 1 first."""
    base = make_verl_repo(root)
    shas = [base.release]
    change, message = STEP[cause]
    for night in range(2, nights + 1):
        path = root / PROFILE
        text = path.read_text()
        if night == step_at:
            text = re.sub(PROFILER_START, change.format(s=wait_s), text, count=1, flags=re.M)
        path.write_text(text + f"# night {night}\n")
        subject = message if night == step_at else "comment"
        git(root, "commit", "-q", "-am", f"{subject} (night {night})")
        shas.append(git(root, "rev-parse", "HEAD"))
    return shas
