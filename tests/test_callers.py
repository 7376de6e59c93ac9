"""Every documented caller, read as verl's CI would run it: with the inputs it documents it can end green on an
unchanged verl and red on a breaking one (what each decides, whom it tells, in what time)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from builders import write_scenario
from conftest import SMALL_TARGET

from harness.artifacts.figures import FAMILIES
from harness.cli import main
from harness.pipeline.base_head import families, structure_order
from harness.scenario.loader import load_scenario
from harness.targets.pair import merge_base
from harness.targets.spec import parse_target

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"


def _load(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _inputs(name: str) -> dict:
    return _load(WORKFLOWS / name)[True]["workflow_call"]["inputs"]


def test_the_ascend_gate_decides_what_one_run_a_side_can_and_leaves_overhead_to_the_nightly():
    """verl-compare.yml with the caller's inputs (one scenario, one run a side): base once, head once, no pair added
    while an overhead ratio is undecided (two runs cannot decide one: the old default kept adding pairs to 6 a side,
    past the 40-minute job, or ended INCONCLUSIVE, which failed it); structure, layout, contents, disk, numerics and
    crash decided, overhead reported. The label that accepts an intended change reaches it as it reaches the CPU
    gate."""
    caller = _load(ROOT / "docs" / "verl-caller-example.yml")["jobs"]
    gate = caller["ascend-gate"]["with"]
    inputs = _inputs("verl-compare.yml")
    repeats = gate.get("repeats", inputs["repeats"]["default"])
    paths = sorted(ROOT.glob(gate.get("scenarios", inputs["scenarios"]["default"])))
    assert repeats == 1 and paths
    for path in [*paths, *sorted((ROOT / "scenarios").glob("qwen2_0_5b_*.yaml"))]:
        scenario = load_scenario(path)
        decided = families(scenario, FAMILIES)
        assert decided == {"disk", "structure"}, (path.name, decided)
        assert structure_order(repeats) == [("base", 0), ("head", 0)]
    assert gate["accept"] == caller["cpu-gate"]["with"]["accept"]
    assert _load(WORKFLOWS / "verl-compare.yml")["jobs"]["compare"]["env"]["HARNESS_ACCEPT"] == "${{ inputs.accept }}"


# -- the pair compared is the pull request's change (harness.targets.pair) -----------------------------------------
def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, env=os.environ | env)
    return out.stdout.strip()


def _commit(repo: Path, name: str) -> str:
    (repo / f"{name}.txt").write_text(name)
    _git(repo, "add", f"{name}.txt")
    _git(repo, "commit", "-q", "-m", name)
    return _git(repo, "rev-parse", "HEAD")


def moved_main(tmp_path: Path) -> dict[str, str]:
    """main: root - point - fix1 - fix2 (moved after the pull request branched at point); pr: point - change;
    merge: GitHub's refs/pull/N/merge, main's tip merged with pr (first parent main)."""
    repo = tmp_path / "verl"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    c = {"root": _commit(repo, "root"), "point": _commit(repo, "point")}
    _git(repo, "checkout", "-q", "-b", "pr")
    c["change"] = _commit(repo, "change")
    _git(repo, "checkout", "-q", "main")
    c["fix1"], c["fix2"] = _commit(repo, "fix1"), _commit(repo, "fix2")
    _git(repo, "merge", "-q", "--no-ff", "-m", "merge", "pr")
    c["merge"] = _git(repo, "rev-parse", "HEAD")
    _git(repo, "reset", "-q", "--hard", c["fix2"])
    _git(repo, "checkout", "-q", "--orphan", "other")
    c["unrelated"] = _commit(repo, "unrelated")
    return c


def test_the_pair_is_the_pull_requests_change_where_main_moved_after_the_branch_point(tmp_path, capsys):
    """pull_request.base.sha is main's tip (fix2), two commits past where the pull request branched: compared is
    head against the branch point, and the report says so; GitHub's merge commit against its first parent as given;
    a head that is not a descendant of the base, unrelated histories and two repositories are one line each, exit 2
    (the gates compared main's tip: its two commits were blamed on the pull request)."""
    c = moved_main(tmp_path)
    repo = tmp_path / "verl"
    spec = parse_target(f"{repo}@{c['fix2']}", verl_option="--base").verl
    head = parse_target(f"{repo}@pr", verl_option="--head").verl
    base, line = merge_base(spec, head)
    assert base.commit == c["point"] and head.commit == c["change"]
    assert "the base branch moved 2 commit(s) after the pull request branched; compared against their merge base " \
           f"{c['point'][:12]} (the branch point)" in line  # fmt: skip
    merged = parse_target(f"{repo}@{c['merge']}").verl
    assert merge_base(spec, merged)[0].commit == c["fix2"]  # refs/pull/N/merge and its first parent: as given
    assert "a merge commit: the pull request as it would merge" in merge_base(spec, merged)[1]
    same = merge_base(spec, spec)
    assert same[0].commit == c["fix2"] and "(A/A)" in same[1]
    assert main(["pair", "--base", f"{repo}@main", "--head", f"{repo}@pr"]) == 0
    assert capsys.readouterr().out == f"base={c['point']}\nhead={c['change']}\n"
    for base_ref, head_ref, said in (
        ("pr", c["point"], "is not a descendant of base pr"),
        ("main", "other", "share no history"),
    ):
        assert main(["pair", "--base", f"{repo}@{base_ref}", "--head", f"{repo}@{head_ref}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("TARGET ERROR: ") and said in err[0], err
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", str(repo), str(clone))
    assert main(["pair", "--base", f"{clone}@main", "--head", f"{repo}@pr"]) == 2
    assert "of one repository" in capsys.readouterr().err


def test_the_gates_compare_head_with_its_merge_base_from_one_checkout_of_its_history():
    """Both reusable gates check verl out once, with its history, and pass both refs of that checkout to a compare
    that takes their merge base (they compared pull_request.base.sha: the base branch's tip)."""
    for name, script in (("verl-cpu-gate.yml", "cpu-gate"), ("verl-compare.yml", "ascend-job")):
        (job,) = _load(WORKFLOWS / name)["jobs"].values()
        checkouts = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
        (verl,) = [s for s in checkouts if s["with"].get("path", "").startswith(".verl")]
        assert verl["with"]["path"] == ".verl/head" and verl["with"]["fetch-depth"] == 0
        assert '".verl/head@$BASE_REF" ".verl/head@$HEAD_REF"' in " ".join(s.get("run", "") for s in job["steps"])
        assert "--merge-base" in (ROOT / ".ci" / script).read_text()


@pytest.mark.integration
@pytest.mark.trains
def test_the_cpu_gate_does_not_blame_a_pull_request_for_what_main_merged_after_it_branched(tmp_path, repo, cache):
    """The CPU gate as the caller runs it on the fixture repository: main moved after the pull request branched (it
    merged ``bad``: actor_update no longer dumped); the pull request is ``neutral`` (a comment). pull_request.base.sha
    is main's tip: compared against it, head dumps a stage base does not (REGRESSED structure, blamed on the pull
    request); against the merge base, PASS, and the report names the pair."""
    scenario = write_scenario(tmp_path, name="tiny_fsdp_l1", **SMALL_TARGET)
    results = tmp_path / "results"
    env = os.environ | {"HARNESS_CACHE_DIR": str(cache), "RESULTS": str(results), "HARNESS_STACK": "harness",
                        "CPU_GATE_REPEATS": "--repeats 2 --max-repeats 2 --judge disk,structure",
                        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}  # fmt: skip
    proc = subprocess.run(
        ["bash", ".ci/cpu-gate", "pr", f"{repo.path}@{repo.bad}", f"{repo.path}@{repo.neutral}", str(scenario)],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=1800,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = (results / "compare.txt").read_text().splitlines()
    assert lines[0].startswith(f"note: the pair: base {repo.bad} ") and f"merge base {repo.release[:12]}" in lines[0]
    assert lines[-1] == "compare: 1 ok -> PASS"
    assert "the pair: base" in (tmp_path / "summary.md").read_text()
