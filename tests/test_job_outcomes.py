"""The table of job outcomes (harness.outcomes) and the one command that applies it (python3 -m harness.job): what a CI
job does with each exit, and that no workflow, .ci script or module of the harness decides it anywhere else."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness import job, outcomes
from harness.errors import ScenarioError

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml")) + sorted((ROOT / "docs").glob("*.yml"))
SCRIPTS = sorted(p for p in (ROOT / ".ci").iterdir() if p.is_file() and not p.suffix)
# the harness's own CI: pytest's exits of its own tests, not a verdict on a verl
OWN_CI = {"ci.yml"}


def test_the_table_of_job_outcomes():
    table = {code: outcomes.job_outcome(code) for code in (0, 1, 2, 3)}
    assert {c: (o.action, o.exit, o.level) for c, o in table.items()} == {
        0: ("pass", 0, "notice"),
        1: ("fail", 1, "error"),
        2: ("error", 1, "error"),
        3: ("warn", 0, "warning"),  # a warning: the job stays green
    }
    noisy = outcomes.job_outcome(3, undecided=[f"overhead.stage.s{i} head/base 1.20x [0.90x-1.60x]" for i in range(5)])
    assert noisy.line.endswith("overhead.stage.s0 head/base 1.20x [0.90x-1.60x]; overhead.stage.s1 head/base 1.20x "
                               "[0.90x-1.60x]; overhead.stage.s2 head/base 1.20x [0.90x-1.60x] (+2 more)")  # fmt: skip
    broken = outcomes.job_outcome(2, attempts=2, why="TARGET ERROR: git clone failed")
    assert broken.line.startswith("ERROR (2 attempts), not a verdict on the pull request: ")
    assert "TARGET ERROR: git clone failed. What to do: re-run the failed job" in broken.line
    # a step that gives no verdict (pip, an image build): its exit 1 is an error, never a verdict on verl
    setup = outcomes.job_outcome(1, verdicts=False)
    assert (setup.action, setup.exit) == ("error", 1) and "a verdict" not in setup.line.split(":", 1)[1][:60]
    assert outcomes.job_outcome(143).line.startswith("ERROR, not a verdict on the pull request: stopped by signal 15")
    assert outcomes.job_outcome(127).action == "error"  # no harness exit at all


def test_an_error_is_retried_once_where_the_job_has_time_a_verdict_or_a_signal_never():
    assert outcomes.retries(2, attempt=1, took_s=60, left_s=600)
    assert not outcomes.retries(2, attempt=1, took_s=601, left_s=600)  # another attempt would not end in time
    assert not outcomes.retries(2, attempt=2, took_s=1, left_s=600)  # once
    assert not outcomes.retries(1, attempt=1, took_s=1, left_s=600)  # a verdict stands
    assert not outcomes.retries(3, attempt=1, took_s=1, left_s=600)  # undecided: a warning, not rerun here
    assert not outcomes.retries(143, attempt=1, took_s=1, left_s=600)  # cancelled stays cancelled
    assert outcomes.retries(1, attempt=1, took_s=1, left_s=None, verdicts=False)  # pip's exit 1 in a set-up


def test_an_error_of_the_jobs_own_scenarios_is_not_retried_and_not_blamed_on_the_runner():
    """A caller's ``scenarios`` naming no file fails the same way on every runner: the job said "2 attempts" and told
    the maintainer the runner or the harness was at fault."""
    why = "precision_debugger gate: INVALID SCENARIO: scenarios/nope.yaml: cannot read: No such file or directory"
    assert ScenarioError.label == outcomes.INPUT_ERROR
    assert not outcomes.retries(2, attempt=1, took_s=5, left_s=3000, why=why)
    assert outcomes.retries(2, attempt=1, took_s=5, left_s=3000, why="INFRASTRUCTURE ERROR: a port was lost")
    line = outcomes.job_outcome(2, why=why).line
    assert "What to do: fix the job's scenarios" in line and outcomes.WHAT_TO_DO not in line and why in line


def test_one_exit_for_several_steps_keeps_a_verdict_on_verl():
    """The old nightly: a failed baseline merge overwrote a regression (1) with 2, and a gate's 3 became 0."""
    assert outcomes.steps_exit([1, 2]) == 1 and outcomes.steps_exit([2, 1, 3]) == 1
    assert outcomes.steps_exit([0, 2, 3]) == 2 and outcomes.steps_exit([3, 0]) == 3 and outcomes.steps_exit([0]) == 0
    assert outcomes.steps_exit([0, 127]) == 127  # no harness exit: an error, kept as it was
    assert [outcomes.publishes_baseline(c) for c in (0, 1, 2, 3)] == [True, False, False, True]
    assert outcomes.publishes_baseline(1, accepted=True) and not outcomes.publishes_baseline(2, accepted=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def steps(codes: list[int], seconds: float, clock: Clock):
    calls: list[int] = []

    def once(argv, env):
        calls.append(env.get("HARNESS_DEADLINE"))
        clock.now += seconds
        return codes[len(calls) - 1], "INFRASTRUCTURE ERROR: the runner's disk is full"

    return once, calls


@pytest.mark.parametrize(
    ("codes", "minutes", "took", "tries", "job_exit"),
    [
        ([2, 0], 50, 60, 2, 0),  # a broken runner once: the retry passes, the job is green
        ([2, 2], 50, 60, 2, 1),  # twice: red, not a verdict
        ([2], 50, 30 * 60, 1, 1),  # 30 of 50 minutes gone: another 30 would not fit, no retry
        ([1], 50, 60, 1, 1),
        ([3], 50, 60, 1, 0),
    ],
)
def test_the_job_command_retries_and_publishes(tmp_path, monkeypatch, capsys, codes, minutes, took, tries, job_exit):
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    (results := tmp_path / "results").mkdir()
    clock = Clock()
    once, calls = steps(codes, took, clock)
    assert job.run(["gate"], job.Step("CPU gate", minutes, [results]), once=once, clock=clock) == job_exit
    assert len(calls) == tries
    assert (tmp_path / "results.attempt1").is_dir() == (tries == 2)  # the first attempt kept for the artifact
    out = dict(line.split("=", 1) for line in (tmp_path / "out").read_text().splitlines())
    assert out == {"exit": str(codes[tries - 1]), "action": outcomes.job_action(codes[tries - 1]),
                   "attempts": str(tries), "baseline": "publish" if codes[tries - 1] in (0, 3) else "keep"}  # fmt: skip
    printed = capsys.readouterr().out.splitlines()
    assert printed[-1].startswith(f"::{outcomes.job_outcome(codes[tries - 1]).level} title=CPU gate::")
    if codes == [2]:
        assert "no time left for a second attempt: 30.0 min, 20.0 left" in printed[-1]
    assert (tmp_path / "summary.md").read_text().count("**CPU gate**") == 1


def test_inconclusive_quotes_the_figures_from_the_steps_annotations(tmp_path, capsys):
    notes = tmp_path / "annotations.txt"
    notes.write_text(
        "::warning title=precision_debugger gate::INCONCLUSIVE (exit 3%3A ...)\n"
        "::warning title=INCONCLUSIVE tiny_fsdp_l1::INCONCLUSIVE tiny_fsdp_l1: overhead.profiled head/base 1.08x "
        "[0.97x-1.21x], tolerance 10%25\n"
    )
    record = tmp_path / "outcome.json"  # what the morning's job reads (harness.report.issue)
    assert job.run(["gate"], job.Step("g", annotations=notes, record=record), once=lambda argv, env: (3, "")) == 0
    assert json.loads(record.read_text())["action"] == "warn"
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("::warning title=g::INCONCLUSIVE (exit 3), the job passes with this warning")
    assert line.endswith("overhead.profiled head/base 1.08x [0.97x-1.21x], tolerance 10%25")


def test_an_attempt_that_decided_nothing_is_quoted_with_its_first_error_not_its_last_stderr_line(tmp_path, capsys):
    # verl's pull request #7212 through the CPU gate: the harness's own error (its summary and annotations) came
    # after a tool's warning and the trainings' progress on stderr, which the retry's line quoted as the reason
    notes = tmp_path / "annotations.txt"
    verdict = f"FAIL (1 of 2 scenarios compared) (exit 2: {outcomes.meaning(2)})"
    notes.write_text(
        job.command("error", "precision_debugger gate", verdict) + "\n"
        + job.command("error", "ERROR real_fsdp_l0 (not a verdict on verl)", "head run 1: INFRASTRUCTURE ERROR: "
                      "verl raised AttributeError at verl/plugin/platform/platform_tpu_workarounds.py:191\nLog tail")
        + "\n"
    )  # fmt: skip
    said = "[harness] real_fsdp_l0 off (local): global step 1 of 4, 60s"
    assert job.run(["gate"], job.Step("g", annotations=notes), once=lambda argv, env: (2, said)) == 1
    printed = capsys.readouterr().out.splitlines()
    assert "attempt 1" in printed[0] and said not in printed[0]
    assert printed[0].endswith(
        "ERROR real_fsdp_l0 (not a verdict on verl): head run 1: INFRASTRUCTURE ERROR: verl raised AttributeError "
        "at verl/plugin/platform/platform_tpu_workarounds.py:191; running it once more"
    )
    assert "platform_tpu_workarounds.py:191" in printed[-1] and said not in printed[-1]
    notes.write_text(job.command("error", "precision_debugger gate", verdict) + "\n")  # the verdict line alone
    assert job.run(["gate"], job.Step("g", annotations=notes), once=lambda argv, env: (2, said)) == 1
    assert said in capsys.readouterr().out


# -- nothing decides an exit but outcomes.py ----------------------------------------------------------------------
STATUS = r"\$\{?(?:\w*status\w*|\w*code\w*|rc|\?|PIPESTATUS\[\d\])\}?\"?"
FORBIDDEN_SHELL = {
    "a status ordered by size": re.compile(STATUS + r"\s+-(?:gt|ge|lt|le)\b"),
    "a status compared with a code other than 0": re.compile(STATUS + r"\s+(?:-eq|-ne|=|==|!=)\s+\"?[1-9]"),
    "a code assigned to a status": re.compile(r"\b(?:\w*status\w*|\w*code\w*|rc)=[\"']?[0-9]"),
    "a verdict exited literally": re.compile(r"\bexit\s+[13]\b"),
}
FORBIDDEN_YAML = {
    "continue-on-error (the step's exit re-decided later)": re.compile(r"continue-on-error"),
    "a step's outcome or conclusion read": re.compile(r"steps\.[\w-]+\.(?:outcome|conclusion)"),
}
RUNS_THE_HARNESS = re.compile(r"(?:\bbash \.ci/|-m harness\b(?!\.job))")
THROUGH_THE_TABLE = re.compile(r"-m harness\.job run\b.*\s--\s.*(?:\bbash \.ci/|-m harness\b(?!\.job))")


def _shell_problems(name: str, text: str) -> list[str]:
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        code = line.split(" #", 1)[0] if not line.lstrip().startswith("#") else ""
        out += [f"{name}:{n}: {why}: {line.strip()}" for why, rx in FORBIDDEN_SHELL.items() if rx.search(code)]
    return out


def _steps(path: Path) -> list[tuple[str, dict]]:
    doc = yaml.safe_load(path.read_text())
    return [(f"{path.name}:{job_name}", step) for job_name, j in doc.get("jobs", {}).items() for step in
            j.get("steps", [])]  # fmt: skip


def test_no_exit_code_is_decided_in_a_workflow_or_a_ci_script():
    problems = []
    for script in SCRIPTS:
        problems += _shell_problems(f".ci/{script.name}", script.read_text())
    for path in WORKFLOWS:
        text = path.read_text()
        problems += [f"{path.name}: {why}" for why, rx in FORBIDDEN_YAML.items() if rx.search(text)]
        for where, step in _steps(path):
            problems += _shell_problems(f"{where} {step.get('name', '')!r}", step.get("run", ""))
    assert not problems, "\n".join(problems)


def test_every_step_that_runs_the_harness_ends_through_the_table():
    """A step that runs the harness or a .ci script (its exit decides the job) runs it under python3 -m harness.job
    run, so the table decides: retry, warning or red, with its annotation."""
    bare = []
    for path in WORKFLOWS:
        if path.name in OWN_CI:
            continue
        for where, step in _steps(path):
            lines = step.get("run", "").replace("\\\n", " ").splitlines()  # continued lines joined
            bare += [f"{where} {step.get('name', '')!r}: {line.strip()}" for line in lines
                     if RUNS_THE_HARNESS.search(line) and not THROUGH_THE_TABLE.search(line)]  # fmt: skip
    assert not bare, "\n".join(bare)


OWN_EXITS = ("harness/outcomes.py",)
DECIDERS = re.compile(r"^(?:main|cmd_\w+)$")
CODE_NAMES = re.compile(r"(?:^|_)(?:code|exit|status|returncode|rc)(?:$|_)")


def _literal(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def test_no_exit_code_is_decided_in_the_harness_but_in_outcomes():
    """Entry points return outcomes' constants (a literal 1 or 3 would be a verdict decided there); nothing compares
    an exit with a code but 0 (did it end cleanly); no sys.exit of a literal. The workloads are the programs under
    test: their exits are the training's own, read by harness.artifacts.crash."""
    problems = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in OWN_EXITS or rel.startswith("harness/training/workloads/"):
            continue
        tree = ast.parse(path.read_text())
        for fn in ast.walk(tree):
            if isinstance(fn, ast.FunctionDef) and DECIDERS.match(fn.name):
                for node in ast.walk(fn):
                    if isinstance(node, ast.Return) and node.value is not None and _literal(node.value):
                        problems.append(f"{rel}:{node.lineno}: {fn.name} returns {_literal(node.value)}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                names = [n for n in (node.left, *node.comparators) if isinstance(n, ast.Name | ast.Attribute)]
                ids = [n.id if isinstance(n, ast.Name) else n.attr for n in names]
                codes = [_literal(n) for n in (node.left, *node.comparators)]
                if any(CODE_NAMES.search(i) for i in ids) and any(c for c in codes if c is not None):
                    problems.append(f"{rel}:{node.lineno}: an exit compared with {[c for c in codes if c]}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "exit"
                    and node.args and _literal(node.args[0])):  # fmt: skip
                problems.append(f"{rel}:{node.lineno}: exit({_literal(node.args[0])})")
    assert not problems, "\n".join(problems)


# -- the command itself, as a workflow step runs it -----------------------------------------------------------------
def test_the_job_command_needs_nothing_installed():
    """The set-up step runs under it: harness.job and outcomes import the standard library and each other only."""
    for name in ("job", "outcomes"):
        tree = ast.parse((ROOT / "harness" / f"{name}.py").read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert {m.split(".")[0] for m in imported} - {"harness"} <= sys.stdlib_module_names, name
        assert {m for m in imported if m.startswith("harness")} <= {"harness"}, name  # from harness import outcomes


@pytest.mark.integration
def test_python3_m_harness_job_retries_a_broken_runner_once(tmp_path):
    """As a workflow step runs it: a step that fails with exit 2 the first time and passes the second is green, with a
    warning naming the first attempt; the step's outputs say so."""
    seen = tmp_path / "seen"
    flaky = f"if [ -f {seen} ]; then exit 0; fi; touch {seen}; echo 'INFRASTRUCTURE ERROR: no space left' >&2; exit 2"
    env = {**os.environ, "GITHUB_OUTPUT": str(tmp_path / "out")}
    proc = subprocess.run(
        [sys.executable, "-m", "harness.job", "run", "--title", "t", "--", "bash", "-c", flaky],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == [
        "::warning title=t::attempt 1: an error of the harness, the runner or the input, or nothing compared: not a "
        "verdict on verl, never a pass: INFRASTRUCTURE ERROR: no space left; running it once more",
        "::notice title=t::PASS (exit 0) (2 attempts): no regression",
    ]
    assert "INFRASTRUCTURE ERROR: no space left" in proc.stderr  # passed through
    assert "attempts=2" in (tmp_path / "out").read_text()
    said_by = ((["of", "1", "2"], "1"), (["of", "error", "3"], "2"), (["say", "3", "x", "y"], "::warning title=x::y"))
    for argv, said in said_by:
        got = subprocess.run([sys.executable, "-m", "harness.job", *argv], cwd=ROOT, capture_output=True, text=True,
                             check=True)  # fmt: skip
        assert got.stdout.strip() == said
    missing = subprocess.run([sys.executable, "-m", "harness.job", "run", "--", "no-such-cmd"], cwd=ROOT,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert missing.returncode == 1 and "no-such-cmd: no such command" in missing.stdout
