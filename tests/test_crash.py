"""Whose code failed a training (harness.artifacts.crash), read from logs that real failed trainings left.

tests/data/crash_logs holds the tails of two real logs of verl 0.9.1 with ``precision_debugger.strict: true`` and a
critic: the embedded workload (a forked rank's traceback, as torch's start_processes re-prints it) and verl's real
main_ppo (two RayTaskError hops, Ray's coloured prefixes, hydra's override line). The other cases are built from
those logs' shapes; the end-to-end runs of the test repository's commits are in test_blame.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.artifacts.crash import Frame, classify, last_traceback
from harness.artifacts.record import ExecResult

LOGS = Path(__file__).parent / "data" / "crash_logs"
VERL_RAISE = "verl/utils/profiler/precision_debugger_profile.py:176 in _should_collect"


def _log(tmp_path: Path, text: str) -> Path:
    (path := tmp_path / "train.log").write_text(text)
    return path


def _failed(code: int = 1) -> ExecResult:
    return ExecResult(exit_code=code, wall_s=3.0)


@pytest.mark.parametrize("log", ["cpu_ppo_strict_critic.log", "main_ppo_strict_critic.log"])
def test_the_strict_critic_crash_is_verls_with_the_line_that_raised(log: str) -> None:
    crash = classify(_failed(), LOGS / log, 600)
    assert crash is not None and crash.party == "verl" and crash.verdict
    assert crash.exception == "ValueError: Unknown precision_debugger stage: train_batch"
    assert crash.where == VERL_RAISE
    assert crash.reason == f"verl raised {crash.exception} at {VERL_RAISE}"


def test_ray_hops_are_unwrapped_to_the_remote_exception() -> None:
    tb = last_traceback((LOGS / "main_ppo_strict_critic.log").read_text())
    assert tb is not None and tb.exception == "ValueError"
    assert [f.function for f in tb.frames[-3:]] == ["wrapper", "start", "_should_collect"]
    assert tb.frames[0].party == "other"  # <frozen runpy>


@pytest.mark.parametrize(
    ("file", "party", "where"),
    [
        ("/e/envs/0123/lib/python3.11/site-packages/verl/workers/engine_workers.py", "verl", "verl/workers/"),
        ("/src/verl/verl/utils/profiler/profile.py", "verl", "verl/utils/profiler/profile.py"),
        ("/usr/lib/python3/dist-packages/msprobe/pytorch/dump.py", "msprobe", "msprobe/pytorch/dump.py"),
        (
            "/home/ci/verl-harness/harness/training/workloads/verl_cpu/patches.py",
            "harness",
            "harness/training/workloads/verl_cpu/",
        ),
        ("/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", "other", "/venv/"),
        ("/venv/lib/python3.11/site-packages/verl_tools/harness/x.py", "other", "/venv/"),  # not verl's own package
        ("<frozen runpy>", "other", "<frozen runpy>"),
    ],
)
def test_files_belong_to_the_package_they_sit_in(file: str, party: str, where: str) -> None:
    frame = Frame(file, 7, "f")
    assert frame.party == party and frame.where().startswith(where)


def _traceback(*frames: str, exception: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for f in frames:
        lines += [f'  File "{f}", line 10, in fn', "    call()", "    ^^^^^^"]
    return "\n".join([*lines, exception, ""])


HARNESS = "/home/ci/verl-msprobe-harness/harness/training/workloads/cpu_ppo/train.py"
VERL = "/v/lib/python3.11/site-packages/verl/utils/profiler/precision_debugger_profile.py"
MSPROBE = "/v/lib/python3.11/site-packages/msprobe/pytorch/debugger/precision_debugger.py"
TORCH = "/v/lib/python3.11/site-packages/torch/nn/functional.py"


@pytest.mark.parametrize(
    ("frames", "exception", "party"),
    [
        ((HARNESS, VERL, MSPROBE, TORCH), "RuntimeError: shape mismatch", "msprobe"),  # msprobe's call into torch
        ((HARNESS, VERL), "AttributeError: 'X' object has no attribute '_started_at'", "verl"),
        ((VERL, HARNESS), "TypeError: __init__() got an unexpected keyword argument 'stages'", "harness"),
        ((HARNESS, VERL), "ModuleNotFoundError: No module named 'verl_msprobe_stats'", "environment"),
        ((HARNESS, VERL), "ModuleNotFoundError: No module named 'verl.utils.gone'", "verl"),  # verl's own module
        ((HARNESS, VERL), "OSError: [Errno 28] No space left on device", "infrastructure"),
        ((HARNESS, VERL), "ray.exceptions.ActorDiedError: The actor died unexpectedly", "infrastructure"),
        ((HARNESS, TORCH), "MemoryError", "infrastructure"),
        ((TORCH,), "RuntimeError: boom", "infrastructure"),  # none of verl, msprobe, the harness
    ],
)
def test_the_party_is_the_innermost_frame_of_the_code_under_test(
    tmp_path: Path, frames: tuple[str, ...], exception: str, party: str
) -> None:
    log = _log(tmp_path, "step 1\n" + _traceback(*frames, exception=exception) + "shutting down\n")
    crash = classify(_failed(), log, 600)
    assert crash is not None and crash.party == party, crash
    if party == "environment":
        assert crash.module == "verl_msprobe_stats" and "'verl_msprobe_stats'" in crash.reason


def test_the_last_traceback_counts(tmp_path: Path) -> None:
    """A warning's traceback earlier in the log (caught, logged, carried on) is not the one that ended the run."""
    earlier = _traceback(VERL, exception="ValueError: handled and logged")
    last = _traceback(HARNESS, exception="KeyError: 'x'")
    crash = classify(_failed(), _log(tmp_path, earlier + "more steps\n" + last), 600)
    assert crash is not None and crash.party == "harness" and crash.exception == "KeyError: 'x'"


@pytest.mark.parametrize(
    ("result", "text", "reason"),
    [
        (ExecResult(exit_code=None, wall_s=600, timed_out=True), "", "timed out after 600s"),
        (ExecResult(exit_code=137, wall_s=5, oom_killed=True), "", "killed for memory (OOM)"),
        (ExecResult(exit_code=-9, wall_s=5), "", "was killed by signal 9"),
        (_failed(1), "Segmentation fault (core dumped)\n", "no Python traceback"),
    ],
)
def test_the_runner_failing_is_infrastructure(tmp_path: Path, result: ExecResult, text: str, reason: str) -> None:
    crash = classify(result, _log(tmp_path, text), 600)
    assert crash is not None and crash.party == "infrastructure" and reason in crash.reason


def test_a_clean_exit_is_no_crash(tmp_path: Path) -> None:
    assert classify(ExecResult(exit_code=0, wall_s=1.0), _log(tmp_path, _traceback(VERL, exception="E: x")), 60) is None


def test_a_log_that_is_a_link_is_not_read(tmp_path: Path) -> None:
    """The log is written by the code under test: a link out of the results dir is never followed."""
    target = _log(tmp_path, _traceback(VERL, exception="ValueError: from elsewhere"))
    (link := tmp_path / "linked.log").symlink_to(target)
    crash = classify(_failed(), link, 60)
    assert crash is not None and crash.party == "infrastructure"


def test_a_logs_text_in_a_crash_and_in_a_log_tail_is_one_escaped_line_never_a_workflow_command(tmp_path: Path) -> None:
    """The training's log is the code under test's: its exception's message and its last lines are quoted in the
    error lines a workflow prints (harness.outside.shown), never as a command of the runner's."""
    from types import SimpleNamespace

    from harness.training.runs import _verdict

    forged = "ValueError: ##[error]all good, merge it\x07"
    crash = classify(_failed(), _log(tmp_path, _traceback(VERL, exception=forged)), 600)
    assert crash is not None and crash.party == "verl"
    where = "verl/utils/profiler/precision_debugger_profile.py:10 in fn"
    assert crash.reason == f"verl raised ValueError: #\\#[error]all good, merge it\\x07 at {where}"
    log = _log(tmp_path, "step 1\n::error title=verl::all good, merge it\n##[warning]x\x07carried\n")
    error, crash = _verdict(_failed(), (600, "executor.timeout_s"), log, SimpleNamespace(facts={}))  # type: ignore[arg-type]
    assert crash is not None and crash.party == "infrastructure" and error is not None
    tail = ["step 1", "\\::error title=verl::all good, merge it", "#\\#[warning]x\\x07carried"]
    assert error.splitlines()[1:] == tail
