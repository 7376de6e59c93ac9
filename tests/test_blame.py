"""Verdicts that blame the right party, on real trainings: verl's failures are verdicts (exit 1), the harness's and
the environment's are errors (exit 2), nothing compared is never a pass, and a target is verl or it is refused.

The failures come from commits in the test repository (tests/verl_repo.py) as a pull request would make them, and
from verl 0.9.1's own strict mode with a critic (its engine workers' ``train_batch`` role), not from knobs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from builders import write_scenario
from conftest import SMALL_TARGET
from verl_repo import VerlRepo, git

from harness import outcomes

ROOT = Path(__file__).resolve().parents[1]
STRICT_BUG = "^ValueError: Unknown precision_debugger stage: train_batch$"


def harness(cache: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")} | {"HARNESS_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "harness", *args]
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=900)


def one_line(out: str, start: str) -> str:
    line = next((ln for ln in out.splitlines() if start in ln), None)
    assert line is not None, out[-3000:]
    print(line)
    return line


@pytest.fixture(scope="module")
def small_l1(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scenario(tmp_path_factory.mktemp("blame"), name="blame_l1", **SMALL_TARGET)


@pytest.mark.trains
def test_a_raise_inside_a_profiled_stage_is_a_verdict_on_verl(repo: VerlRepo, cache: Path, small_l1: Path) -> None:
    proc = harness(cache, "run", str(small_l1), "--verl", f"{repo.path}@crash", "--results", str(small_l1.parent / "r"))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    line = one_line(proc.stdout, "crash: verl crashed the on run")
    assert (
        "AttributeError: 'PrecisionDebuggerProfiler' object has no attribute '_started_at' at "
        "verl/utils/profiler/precision_debugger_profile.py:194 in start; the off run exited cleanly" in line
    )
    assert f"reproduce: python -m harness run scenarios/blame_l1.yaml --verl {repo.path}@crash" in line
    assert "INFRASTRUCTURE" not in proc.stdout + proc.stderr


@pytest.mark.trains
def test_a_requirement_the_environment_lacks_is_an_environment_error(
    repo: VerlRepo, cache: Path, small_l1: Path
) -> None:
    proc = harness(
        cache, "run", str(small_l1), "--verl", f"{repo.path}@newdep", "--results", str(small_l1.parent / "n")
    )
    assert proc.returncode == 2, proc.stdout[-3000:]
    line = one_line(proc.stdout, "ENVIRONMENT ERROR")
    assert "imports 'verl_msprobe_stats', which its environment lacks (verl declares " in line
    assert "verl-msprobe-stats>=1.0" in line and "crash" not in line.split(":")[0]


@pytest.mark.trains
def test_verl_changing_under_the_harness_is_a_harness_error(repo: VerlRepo, cache: Path, small_l1: Path) -> None:
    proc = harness(cache, "run", str(small_l1), "--verl", f"{repo.path}@kwarg", "--results", str(small_l1.parent / "k"))
    assert proc.returncode == 2, proc.stdout[-3000:]
    line = one_line(proc.stdout, "HARNESS ERROR (not a verdict on verl)")
    assert "off run: harness raised TypeError: FileLogger.__init__() got an unexpected keyword argument" in line
    assert "harness/training/workloads/cpu_ppo/train.py:" in line


@pytest.mark.trains
def test_a_head_that_cannot_train_where_base_did_is_a_verdict_on_it(repo: VerlRepo, cache: Path, small_l1: Path):
    """verl's timer called with an argument it does not take (``untrainable``; verl's #7212 broke every platform but
    TPU so): alone, every training failing the same way off and on is no verdict on the tool (exit 2: the inputs, the
    runner or verl's trainer); against its base, which trained on the same runner, it is the pull request's (exit 1,
    never retried)."""
    head = f"{repo.path}@untrainable"
    proc = harness(cache, "run", str(small_l1), "--verl", head, "--results", str(small_l1.parent / "u"))
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-2000:]
    line = one_line(proc.stdout, "INFRASTRUCTURE ERROR")
    assert "both runs failed the same way, precision_debugger off and on: verl raised TypeError" in line
    res = small_l1.parent / "uc"
    proc = harness(cache, "compare", str(small_l1), "--base", f"{repo.path}@v0.9.1", "--head", head, "--results",
                   str(res), "--judge", "disk,structure")  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    line = one_line(proc.stdout, "REGRESSED blame_l1: head cannot train (precision_debugger off too)")
    assert (
        "verl raised TypeError: _timer() got an unexpected keyword argument 'synchronize' at "
        "verl/utils/profiler/performance.py:168 in simple_timer with precision_debugger off and on alike" in line
    )
    assert "where base trained on this runner: the pull request breaks the training itself" in line
    assert f"reproduce blame_l1: python -m harness compare scenarios/blame_l1.yaml --base {repo.path}@" in proc.stdout
    assert "\ncompare: 1 regressed -> FAIL\n" in proc.stdout and outcomes.ACCEPT_LABEL not in proc.stdout
    assert json.loads((res / "compare.json").read_text())["order"] == ["base 1", "head 1"]


def _strict_critic(root: Path, declared: bool) -> Path:
    doc = yaml.safe_load((ROOT / "scenarios" / "tiny_critic_fsdp_l1.yaml").read_text())
    doc["precision_debugger"]["strict"] = True
    doc["steps"], doc["precision_debugger"]["steps"] = 3, [2]  # the crash comes in the first profiled step
    if declared:
        doc["expect"]["known_bugs"] = [{"raises": STRICT_BUG, "reason": "verl's strict mode and its critic role"}]
    path = root / "scenarios" / "tiny_critic_strict.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.mark.trains
def test_verls_strict_mode_with_a_critic_crashes_and_a_declared_bug_is_an_xfail(tmp_path: Path, cache: Path) -> None:
    """verl's own raise (``_should_collect``) on the role the embedded workload gives the critic, as verl's engine
    workers do: exit 1 undeclared; declared under pytest, the crash item is the expected failure and the other items
    are skipped as not checked (never passed)."""
    plain = _strict_critic(tmp_path / "plain", declared=False)
    proc = harness(cache, "run", str(plain), "--results", str(tmp_path / "r"))
    assert proc.returncode == 1, proc.stdout[-3000:]
    line = one_line(proc.stdout, "crash: verl crashed the on run")
    assert "ValueError: Unknown precision_debugger stage: train_batch at " in line
    assert "verl/utils/profiler/precision_debugger_profile.py:176 in _should_collect" in line

    root = _strict_critic(tmp_path / "declared", declared=True).parents[1]
    argv = [sys.executable, "-m", "pytest", "scenarios", "-p", "no:cacheprovider", "-q", "-rxs"]
    env = os.environ | {"HARNESS_CACHE_DIR": str(cache)}
    run = subprocess.run([*argv, f"--harness-results={tmp_path / 'p'}"], cwd=root, env=env, capture_output=True,
                         text=True, check=False, timeout=900)  # fmt: skip
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.stdout.strip().splitlines()[-1].startswith("5 skipped, 1 xfailed"), run.stdout[-3000:]
    assert "XFAIL scenarios/tiny_critic_strict.yaml::crash - known verl bug: verl's strict mode" in run.stdout
    assert "the on run crashed: see the crash check" in run.stdout


@pytest.mark.integration
def test_compare_with_every_scenario_skipped_compares_nothing(repo: VerlRepo, cache: Path, tmp_path: Path) -> None:
    spec = f"{repo.path}@{repo.release}"
    qwen = str(ROOT / "scenarios" / "qwen2_0_5b_fsdp_l1.yaml")  # needs an NPU: skipped here
    proc = harness(cache, "compare", "--base", spec, "--head", spec, qwen, "--results", str(tmp_path / "c"))
    assert proc.returncode == 2, proc.stdout[-3000:]
    last = [ln for ln in proc.stdout.splitlines() if ln.startswith("compare: ")][-1]
    print(last)
    assert (
        last == "compare: 1 skipped -> NOTHING COMPARED (0 of 1 scenarios had a figure or check judged on both sides)"
    )


@pytest.mark.integration
def test_a_target_that_is_not_verl_is_refused(cache: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    (other / "other_pkg").mkdir(parents=True)
    (other / "other_pkg" / "__init__.py").write_text("")
    (other / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "other-project"\nversion = "1.0"\n'
    )
    git(other, "init", "-q", "-b", "main")
    git(other, "add", "-A")
    git(other, "commit", "-q", "-m", "another project")
    proc = harness(cache, "target", "--verl", f"{other}@main")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.strip() == (
        f"TARGET ERROR: --verl {other}@main is not verl: installing it gave other-project (name a verl checkout, "
        "repository, release or wheel)"
    )
    for empty in (["--verl", ""], ["--verl", "  "]):
        proc = harness(cache, "target", *empty)
        assert proc.returncode == 2 and proc.stderr.startswith(f"TARGET ERROR: --verl is empty ({empty[1]!r}: an unset")
    env = os.environ | {"HARNESS_VERL": "", "HARNESS_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "harness", "target"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("TARGET ERROR: HARNESS_VERL is empty ('': an unset")


@pytest.mark.heavy
def test_verl_changing_under_a_cpu_patch_of_the_real_trainer_is_a_harness_error(
    repo: VerlRepo, cache: Path, tmp_path: Path
) -> None:
    """verl's real main_ppo: the harness's gloo wrapper of initialize_global_process_group_ray passes ``backend``,
    which the commit renamed (its callers in verl follow): the patch raises, and the harness says so."""
    real = str(ROOT / "scenarios" / "real_fsdp_l0.yaml")
    proc = harness(cache, "run", real, "--verl", f"{repo.path}@patch", "--results", str(tmp_path / "r"))
    assert proc.returncode == 2, proc.stdout[-3000:]
    line = one_line(proc.stdout, "HARNESS ERROR (not a verdict on verl)")
    assert "harness raised TypeError: initialize_global_process_group_ray() got an unexpected keyword argument" in line
    assert "harness/training/workloads/verl_cpu/patches.py:" in line
