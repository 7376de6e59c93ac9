"""Base against head for real: the fixture verl repository's release, a commit that stops a stage from being
dumped and a neutral commit, run side by side by ``python -m harness compare`` (and pytest's option)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from builders import write_scenario
from conftest import SMALL_TARGET
from verl_repo import VerlRepo

from harness.gate.judge import compare_runs
from harness.gate.numerics.report import entry_of
from harness.gate.observe import observe_results
from harness.pipeline.base_head import OVERHEAD_NOT_JUDGED
from harness.report import verdicts

pytestmark = pytest.mark.trains

SCENARIO = "scenarios/tiny_fsdp_l1.yaml"  # the small variant (conftest.SMALL_TARGET)


def compare(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "harness", "compare", SCENARIO, *args]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=1200)


def compare_shipped(scenario: str, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m harness compare`` on a shipped scenario, in the checkout, with the caller's HARNESS_ settings
    dropped (its defaults are what is tested); its output printed, for pytest's log of a run of minutes."""
    root = Path(__file__).resolve().parents[1]
    argv = [sys.executable, "-m", "harness", "compare", str(root / "scenarios" / scenario), *args]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HARNESS_")} | {"HARNESS_CACHE_DIR": str(cache)}
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, check=False, timeout=3000)
    print(proc.stdout)
    return proc


def test_a_commit_that_stops_dumping_a_stage_is_flagged_by_pytest_under_docker(
    repo: VerlRepo, cache: Path, small: Path
):
    """pytest's option: head is --verl, base is --harness-compare-base; one 'compare' item per scenario."""
    from test_docker_daemon import daemon  # the CPU image on the daemon DOCKER_HOST names (CI requires one)

    daemon()
    res = small / "cmp_bad"
    argv = [sys.executable, "-m", "pytest", "scenarios", "-k", "tiny_fsdp_l1", "-p", "no:cacheprovider", "-q",
            f"--verl={repo.path}@bad", f"--harness-compare-base={repo.path}@v0.9.1", "--harness-compare-repeats=1",
            f"--harness-results={res}", "--executor=docker"]  # fmt: skip
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    proc = subprocess.run(argv, cwd=small, env=env, capture_output=True, text=True, check=False, timeout=1200)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "1 failed" in out and "tiny_fsdp_l1: compare check failed:" in out
    assert (
        "REGRESSED tiny_fsdp_l1: layout check passes on base, fails on head: missing dump dir step_2/actor_update/"
        in out
    )
    assert "REGRESSED tiny_fsdp_l1: structure.actor_update.rank0.names -Functional" in out
    assert "MISSING tiny_fsdp_l1: structure.actor_update.rank0.entries" in out
    assert "MISSING tiny_fsdp_l1: numerics step_2/actor_update dumped on base, missing on head: not compared" in out
    where = res / "compare" / "tiny_fsdp_l1"
    for side in ("base", "head"):
        run = json.loads((where / side / "r0" / "tiny_fsdp_l1" / "on" / "run.json").read_text())
        assert run["executor"] == "docker"
    assert json.loads((where / "compare.json").read_text())["exit_code"] == 1
    head = json.loads((where / "head" / "r0" / "tiny_fsdp_l1" / "results.json").read_text())
    assert {k: v["passed"] for k, v in head["checks"].items()} == {
        "crash": True, "layout": False, "contents": True, "overhead": True, "disk": True,
    }  # fmt: skip


def test_a_neutral_commit_and_a_a_compare_clean(repo: VerlRepo, cache: Path, small: Path):
    """Overhead is not judged here (--judge disk,structure): on a shared runner two timed runs a side leave it
    INCONCLUSIVE (harness.checks.stats), so no off run is trained and it is NOT MEASURED (#85); dump entries, disk
    bytes and every check are decided. The summary ends with where the minutes went."""
    res = small / "cmp_neutral"
    proc = compare(small, cache, f"--base={repo.path}@v0.9.1", f"--head={repo.path}@neutral", "--repeats=2",
                   f"--results={res}", "--judge=disk,structure")  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "compare: 1 ok -> PASS" in proc.stdout
    summary_md = (res / "report" / "summary.md").read_text()
    assert "| tiny_fsdp_l1 | ✅ ok |" in summary_md
    assert "head/base [99.9% interval], samples, noise" in summary_md  # the interval a change is called on
    assert (res / "report" / "tiny_fsdp_l1.png").stat().st_size > 10_000  # base and head side by side
    doc = json.loads((res / "compare.json").read_text())
    assert doc["order"] == ["base 1", "head 1", "base 2"]  # no overhead decided: head once (structure_order)
    figures = {f["metric"]: f for f in doc["scenarios"][0]["figures"]}
    # equal-length environment paths: a neutral commit dumps the same bytes
    assert figures["disk.total_bytes"]["ratio"] == "head/base 1.00x"  # one head run: no spread of pairs
    assert not [m for m in figures if m.startswith("overhead.")]  # no off run: nothing of it measured
    assert OVERHEAD_NOT_JUDGED in doc["scenarios"][0]["notes"]
    assert json.loads((res / "head/r0/tiny_fsdp_l1/results.json").read_text())["runs"].keys() == {"on"}
    phases = {p["phase"] for p in doc["phases"]}
    assert phases == {"set-up", "environment", "start-up", "steps", "judge", "numerics", "reports"}, doc["phases"]
    assert "### Where the minutes went" in summary_md and "| start-up | tiny_fsdp_l1 head r1 on |" in summary_md
    base = [observe_results(res / "base" / f"r{i}" / "tiny_fsdp_l1" / "results.json") for i in (0, 1)]
    a_a = compare_runs("tiny_fsdp_l1", base[:1], base[1:], families=("disk", "structure"))
    assert a_a.status == "ok" and not a_a.findings, verdicts.scenario_lines(a_a)
    # numerics: msprobe's compare of the "on" dumps, head against base, and base's two runs against each other
    assert "note tiny_fsdp_l1: numerics: determinism self-check clean (" in proc.stdout
    assert "note tiny_fsdp_l1: numerics: 3 of 3 step/stage dumps match base (" in proc.stdout
    numerics = doc["scenarios"][0]["numerics"]
    assert numerics["judged"] is True
    stages = numerics["head_vs_base"]["stages"]
    assert [s["stage"] for s in stages] == ["actor_compute_log_prob", "actor_update", "ref_compute_log_prob"]
    assert all(s["rows"] > 100 and s["counts"]["pass"] + s["nonfinite_ok"] == s["rows"] for s in stages), stages
    assert all(Path(c).is_file() and Path(c).is_relative_to(res / "numerics") for s in stages for c in s["csvs"])


@pytest.mark.heavy
def test_a_commit_that_changes_numerics_is_named_by_its_first_diverging_api(
    repo: VerlRepo, cache: Path, tmp_path: Path
):
    """GAE's advantages no longer whitened (verl's compute_gae_advantage_return, called by the critic scenarios):
    every check and figure as on base, only the numbers of actor_update move (its weights took a different update
    at step 1). The verdict names an API whose statistics really differ in the two dump.json files."""
    critic = {
        "workload": {"kind": "cpu_ppo", "critic": True},
        "precision_debugger": SMALL_TARGET["precision_debugger"] | {"stages": ["actor_update"]},
        "expect": {"nonfinite_ok": [r"^Tensor\.narrow\.\d+\.(forward|backward)$"]},
    }
    write_scenario(tmp_path, name="tiny_fsdp_l1", **(SMALL_TARGET | critic))
    res = tmp_path / "cmp_numerics"
    proc = compare(tmp_path, cache, f"--base={repo.path}@v0.9.1", f"--head={repo.path}@numerics", "--repeats=1",
                   f"--results={res}", "--judge=disk,structure")  # fmt: skip
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    regressed = [line for line in proc.stdout.splitlines() if line.startswith("REGRESSED")]
    assert len(regressed) == 1 and regressed[0].startswith("REGRESSED tiny_fsdp_l1: numerics step_2/actor_update: ")
    assert "; first diverging API " in regressed[0], regressed
    (stage,) = json.loads((res / "compare.json").read_text())["scenarios"][0]["numerics"]["head_vs_base"]["stages"]
    named = {entry_of(stage["first"]["name"]), *([stage["first_da"].split(" (")[0]] if stage["first_da"] else [])}
    dumps = {side: res / side / "r0" / "tiny_fsdp_l1" / "on" / "dumps" / "step_2" / "actor_update" / "step0" / "rank0"
             for side in ("base", "head")}  # fmt: skip
    data = {side: json.loads((d / "dump.json").read_text())["data"] for side, d in dumps.items()}
    for api in named:
        assert data["base"][api] != data["head"][api], f"{api} is named, but its statistics are the same"


@pytest.mark.heavy
def test_a_commit_that_waits_in_the_profilers_start_regresses_overhead_with_the_defaults(
    repo: VerlRepo, cache: Path, tmp_path: Path
):
    """The profiler's start backs off 0.25 s before each stage's dump (tests/verl_repo.py ``wait``): no CPU time,
    ~+30 % wall on tiny_fsdp_l1's profiled step, the slowdown the CPU-time figures passed. ``compare`` with no
    options (pairs added while INCONCLUSIVE, harness.pipeline.base_head) says REGRESSED on a gated overhead figure,
    exit 1. The shipped scenario, not the small variant: minutes (2-6 runs a side, each an off and an on training)."""
    res = tmp_path / "cmp_wait"
    proc = compare_shipped(
        "tiny_fsdp_l1.yaml", cache, f"--base={repo.path}@v0.9.1", f"--head={repo.path}@wait", f"--results={res}"
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(ln.startswith("REGRESSED tiny_fsdp_l1: overhead.wall.") for ln in lines), proc.stdout[-3000:]
    assert "compare: 1 regressed -> FAIL" in lines


@pytest.mark.heavy
def test_verl_real_trainer_repeats_itself_so_its_numerics_are_judged(repo: VerlRepo, cache: Path, tmp_path: Path):
    """verl's real trainer on CPU, base against a comment-only commit: base's two runs are the same (the
    determinism self-check clean: the batch order and the rollouts fixed, verl_cpu.sampler and .rollout), so head's
    numerics are judged, every row passing. Before, base drifted (367 of 1172 rows error at step 2) and the real
    tier's numerics were never judged. ~12 min quiet (2 runs a side, overhead not judged).

    What msprobe's rules can flag here: an output that moves while its inputs do not. Two commits that change the
    training were tried and pass every row: GRPO's advantages no longer scaled by the group's std (with two samples
    a prompt they are +-0.707 whatever the scores, and Adam's first step moves each weight by lr whatever the
    gradient's size) and the rollout's default temperature lowered to 0.6 (other tokens: every layer's inputs move
    with its outputs)."""
    res = tmp_path / "cmp_real"
    proc = compare_shipped(
        "real_fsdp_l0.yaml",
        cache,
        f"--base={repo.path}@v0.9.1",
        f"--head={repo.path}@neutral",
        f"--results={res}",
        "--repeats=2",
        "--max-repeats=2",
        "--judge=disk,structure",
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "note real_fsdp_l0: numerics: determinism self-check clean (" in proc.stdout
    assert "note real_fsdp_l0: numerics: 3 of 3 step/stage dumps match base (" in proc.stdout
    numerics = json.loads((res / "compare.json").read_text())["scenarios"][0]["numerics"]
    assert numerics["judged"] is True


@pytest.mark.heavy
def test_a_commit_that_changes_verl_real_trainers_numbers_is_named(repo: VerlRepo, cache: Path, tmp_path: Path):
    """The FSDP engine's parameters in fp32 (tests/verl_repo.py ``fp32``) on verl's real trainer, with the defaults:
    base's own runs repeat (the self-check clean), so head's numerics are judged: REGRESSED, exit 1, the first
    diverging API the embedding, where the weights' dtype first shows. ~9 min (base 2 runs, head 1)."""
    res = tmp_path / "cmp_fp32"
    proc = compare_shipped(
        "real_fsdp_l0.yaml", cache, f"--base={repo.path}@v0.9.1", f"--head={repo.path}@fp32", f"--results={res}"
    )
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "note real_fsdp_l0: numerics: determinism self-check clean (" in proc.stdout
    named = [ln for ln in proc.stdout.splitlines() if ln.startswith("REGRESSED real_fsdp_l0: numerics step_")]
    assert named, proc.stdout[-3000:]
    assert all("first diverging API Module.model." in ln for ln in named), named
    assert "first diverging API Module.model.embed_tokens." in named[0], named
    assert "compare: 1 regressed -> FAIL" in proc.stdout
