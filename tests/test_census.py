"""The census of a verl's annotated stages (harness.targets.census): read by ast from its source, never imported;
base against head says an added, removed or renamed role first; the pull-request gate's trigger derived from it;
an intended change accepted by the label the report names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from verl_repo import ENGINE_WORKERS, PROFILE, VerlRepo, git

from harness import outcomes
from harness.gate.files import CompareDoc
from harness.gate.judge import Judgement, ScenarioVerdict, compare_runs
from harness.report import verdicts
from harness.report.compare import compare_markdown
from harness.report.github import annotation_lines
from harness.targets.census import (
    CALLER,
    Census,
    annotations_of,
    census,
    census_of,
    census_of_files,
    changed_lines,
    diff,
    read_tables,
    trigger_of,
)
from harness.targets.spec import parse_target, pinned_target

ROOT = Path(__file__).resolve().parents[1]
WORKERS = """\
from verl.utils.profiler import DistProfiler as DP, DistProfilerExtension

ROLE = "computed"


class Worker:
    @DP.annotate(color="red", role="actor_update", scheduled=True)
    def update_actor(self, data):
        return data

    @DP.annotate(color="blue", role=ROLE)
    def compute(self, data):
        return data

    class Inner:
        @DistProfiler.annotate(role="rollout_generate")
        async def generate(self):
            return None


def plain():
    return DistProfiler.annotate(role="ref_compute_log_prob")(lambda self: None)
"""
TABLES = """\
_STAGE_TO_ROLE = {"actor_update": "actor", "ref_compute_log_prob": "ref", "compute_rm_score": "reward_model"}
_MODEL_ATTRS_BY_ROLE = {"actor": ("actor.engine.module", "actor_module"), "ref": ("ref.engine.module",)}
_SKIP_STAGES = {"rollout_generate"}
"""


def test_every_annotation_form_with_its_function_and_role():
    found = annotations_of("verl/workers/w.py", WORKERS)
    assert [(a.line, a.function, a.role, a.expression, a.scheduled) for a in found] == [
        (7, "Worker.update_actor", "actor_update", "", True),
        (11, "Worker.compute", None, "ROLE", False),  # not a literal: said, not guessed
        (16, "Worker.Inner.generate", "rollout_generate", "", False),
        (22, "plain", "ref_compute_log_prob", "", False),  # a call, not a decorator: the enclosing function
    ]


def test_what_precision_debugger_does_with_each_role():
    tables, problem = read_tables(TABLES)
    assert problem is None and tables is not None
    c = Census(source="t", annotations=annotations_of("verl/workers/w.py", WORKERS), tables=tables)
    assert c.treatment("actor_update").startswith("dumped: binds the actor model (actor.engine.module, actor_module")
    assert c.treatment("rollout_generate").startswith("ignored")
    assert c.treatment("compute_rm_score").startswith("dumped: known (reward_model), no model attributes")
    assert c.treatment("train_batch").startswith("UNKNOWN to precision_debugger")
    text = "\n".join(c.lines())
    assert re.search(r"verl/workers/w\.py:7 +actor_update \(scheduled\) on Worker\.update_actor: dumped", text)
    assert "<ROLE> on Worker.compute: role not a literal" in text
    assert "known, annotated nowhere (never dumped): compute_rm_score" in text


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (None, "precision_debugger_profile.py: not in this verl"),
        ("_STAGE_TO_ROLE = {\n", "precision_debugger_profile.py:1: does not parse (SyntaxError"),
        ("_STAGE_TO_ROLE = dict(actor_update='actor')\n", "no literal _STAGE_TO_ROLE dict at module level"),
        ("import os\n", "no literal _STAGE_TO_ROLE dict at module level"),
    ],
)
def test_a_profiler_module_missing_or_unreadable_is_one_line(text, said):
    tables, problem = read_tables(text)
    assert tables is None and problem is not None and said in problem and "\n" not in problem


def _census(tables: str | None, workers: str) -> Census:
    t, problem = read_tables(tables)
    return Census(source="x", annotations=annotations_of("verl/workers/w.py", workers), tables=t, problem=problem)


def test_head_against_base_renamed_added_removed_and_treatment_changed():
    base = _census(TABLES, WORKERS)
    renamed = WORKERS.replace('role="actor_update"', 'role="actor_updates"')
    assert diff(base, _census(TABLES, renamed)) == (
        [
            "annotated role renamed: actor_update -> actor_updates at verl/workers/w.py:7 (Worker.update_actor): on "
            "head UNKNOWN to precision_debugger: never dumped, a warning each call, ValueError under strict: true"
        ],
        [],
    )
    added = WORKERS + '\n\n@DistProfiler.annotate(role="critic_update")\ndef update_critic(self):\n    pass\n'
    (line,) = diff(base, _census(TABLES, added))[0]
    assert line.startswith("annotated role added: critic_update at verl/workers/w.py:25 (update_critic): on head UNK")
    (line,) = diff(base, _census(TABLES, WORKERS.replace('    @DP.annotate(color="red", role="actor_update", '
                                                          'scheduled=True)\n', "")))[0]  # fmt: skip
    assert line.startswith("annotated role removed: actor_update (was at verl/workers/w.py:7 (Worker.update_actor))")
    (line,) = diff(base, _census(TABLES.replace('"ref_compute_log_prob": "ref", ', ""), WORKERS))[0]
    assert line.startswith("role ref_compute_log_prob: dumped: binds the ref model") and "UNKNOWN" in line
    assert diff(base, _census(TABLES + "# a comment\n", WORKERS)) == ([], [])  # nothing changed: nothing said
    (line,) = diff(base, _census(None, WORKERS))[0]
    assert line.startswith("head: verl/utils/profiler/precision_debugger_profile.py: not in this verl")
    assert diff(_census(None, WORKERS), _census(None, WORKERS)) == (
        [],
        ["census: verl/utils/profiler/precision_debugger_profile.py: not in this verl (no precision_debugger: every "
         "stage unknown to it) (on base too)"],
    )  # fmt: skip


def test_a_census_finding_is_read_first_fails_the_comparison_and_an_intended_one_is_accepted():
    ok = compare_runs("tiny", [], [])  # a scenario whose runs are not here: an error of its own
    ok.errors = []
    ok.checks_judged = 1
    found = ["annotated role renamed: actor_update -> actor_updates at verl/workers/engine_workers.py:711"]
    c = Judgement("compare", "verl@base", "verl@head", [ok], census=found)
    assert c.verdict == (1, "FAIL") and verdicts.lines(c)[0] == f"REGRESSED census: {found[0]}"
    assert verdicts.lines(c)[1] == f"note: {outcomes.ACCEPT_HINT}" and outcomes.ACCEPT_LABEL in verdicts.lines(c)[1]
    md = compare_markdown(c)
    assert md.splitlines()[2] == f"- **REGRESSED census: {found[0]}**"  # under the heading, before base and head
    doc = CompareDoc.of(json.loads(verdicts.compare_doc(c).model_dump_json()))
    assert annotation_lines(doc)[1].startswith("::error title=REGRESSED census (head's annotated stages)::annotated")
    c.accepted = f"label {outcomes.ACCEPT_LABEL}"
    assert c.verdict == (0, f"ACCEPTED as intended (label {outcomes.ACCEPT_LABEL})")
    assert verdicts.lines(c)[1].startswith("ACCEPTED as intended (label precision-debugger-intended): every finding")
    assert annotation_lines(verdicts.compare_doc(c))[0].startswith("::warning title=REGRESSED census")
    undecided = ScenarioVerdict("noisy", ok.policy, undecided=["INCONCLUSIVE noisy: overhead"], checks_judged=1)
    assert Judgement("compare", "b", "h", [ok, undecided], census=found, accepted="x").exit_code == 3
    broken = ScenarioVerdict("broken", ok.policy, errors=["head run 1: INFRASTRUCTURE ERROR: lost"])
    assert Judgement("compare", "b", "h", [ok, broken], census=found, accepted="x").exit_code == 2  # never accepted


def test_a_schema_2_compare_json_still_reads():
    c = Judgement("compare", "b", "h", [])
    doc = json.loads(verdicts.compare_doc(c).model_dump_json())
    for key in ("census", "notes", "accepted", "head_lines"):
        doc.pop(key)
    doc["schema_version"] = 2
    assert CompareDoc.of(doc).census == []


def test_the_census_of_a_pull_requests_commits_names_the_renamed_annotation_and_nothing_else(repo: VerlRepo):
    """On the test repository's commits (tests/verl_repo.py), each as a pull request makes it: the typo in the
    engine workers' annotation is a finding (the embedded workload never runs those workers), the profiler's
    changes that keep its tables are none (the trainings judge them)."""

    def of(ref: str) -> Census:
        return census(parse_target(f"{repo.path}@{ref}").verl)

    base = of(repo.release)
    assert {a.role for a in base.annotations} >= {"actor_update", "ref_compute_log_prob", "train_batch"}
    (finding,), _ = diff(base, of(repo.annotation))
    assert re.fullmatch(
        r"annotated role renamed: actor_update -> actor_updates at verl/workers/engine_workers\.py:\d+ "
        r"\(ActorRolloutRefWorker\.update_actor\): on head UNKNOWN to precision_debugger: .*",
        finding,
    )
    for quiet in (repo.neutral, repo.bad, repo.wait, repo.numerics):
        assert diff(base, of(quiet)) == ([], []), quiet
    assert census_of(pinned_target()).model_dump(exclude={"source"}) == base.model_dump(exclude={"source"})


def test_a_patch_as_the_trigger_reads_it():
    patch = """diff --git a/verl/a.py b/verl/b.py
similarity index 90%
rename from verl/a.py
rename to verl/b.py
--- a/verl/a.py
+++ b/verl/b.py
@@ -1 +1 @@
--- a removed line that looks like a header
+DistProfiler
diff --git a/docs/new.md b/docs/new.md
new file mode 100644
--- /dev/null
+++ b/docs/new.md
@@ -0,0 +1 @@
+precision_debugger
"""
    changes = changed_lines(patch)
    assert changes == {
        "verl/a.py": [],
        "verl/b.py": ["--- a removed line that looks like a header", "+DistProfiler"],
        "docs/new.md": ["+precision_debugger"],
    }
    trigger = trigger_of(Census(source="x"))
    assert trigger.fires(changes) and not trigger.fires({"docs/new.md": ["+precision_debugger"]})


def test_the_callers_trigger_is_the_one_the_census_implies_and_fires_on_what_it_must(repo: VerlRepo):
    """docs/verl-caller-example.yml's changes job carries what ``target --trigger`` derives from verl (verl main and
    the pinned 0.9.1 annotate in the same files); on the test repository's commits it fires on those that change
    the integration and not on the others."""
    trigger = trigger_of(census(parse_target(f"{repo.path}@{repo.release}").verl))
    step = yaml.safe_load((ROOT / "docs" / "verl-caller-example.yml").read_text())["jobs"]["changes"]["steps"][0]
    assert step["env"]["PATHS"] == trigger.path_regex() and step["env"]["LINES"] == trigger.lines
    assert CALLER in trigger.paths and "verl/workers/engine_workers.py" in trigger.paths

    def fires(commit: str) -> bool:
        return trigger.fires(changed_lines(git(repo.path, "show", "--format=", "-M", "-U0", commit)))

    assert all(fires(c) for c in (repo.annotation, repo.bad, repo.drift, repo.wait, repo.bloat))
    assert not any(fires(c) for c in (repo.numerics, repo.kwarg, repo.patch, repo.fp32))


@pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed (the changes job's filter runs in gh's jq)")
def test_the_changes_jobs_filter_on_a_files_api_answer(tmp_path):
    """The changes job's jq program, run by jq on what the files API returns: a path, a renamed path, a changed
    line naming the integration, a file whose diff the API leaves out under verl/; not a changed config key, not a
    document."""
    job = yaml.safe_load((ROOT / "docs" / "verl-caller-example.yml").read_text())["jobs"]["changes"]
    step = job["steps"][0]
    program = re.search(r"--jq '(.*?)'(?: 2>[^)]*)?\)", step["run"], re.S)
    assert program
    files = [
        {"filename": "verl/utils/profiler/profile.py", "patch": "@@ -1 +1 @@\n-a\n+b"},
        {"filename": "verl/trainer/config/ppo_trainer.yaml", "patch": "@@ -1 +1 @@\n-  lr: 1\n+  lr: 2"},
        {"filename": "verl/trainer/ppo/ray_trainer.py", "patch": "@@ -9 +9 @@\n-x\n+self.wg.start_profile(role=r)"},
        {"filename": "verl/workers/new.py", "previous_filename": "verl/workers/engine_workers.py", "patch": ""},
        {"filename": "verl/big.py"},
        {"filename": "docs/precision_debugger.md", "patch": "@@ -1 +1 @@\n-precision_debugger\n+PrecisionDebugger"},
        {"filename": "verl/trainer/main_ppo.py", "patch": "@@ -1 +1 @@\n # DistProfiler in context only"},
    ]
    env = {k: v for k, v in step["env"].items() if k in ("PATHS", "LINES")}
    out = subprocess.run(
        ["jq", "-r", program[1]], input=json.dumps(files), env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [
        "verl/utils/profiler/profile.py",
        "verl/trainer/ppo/ray_trainer.py",
        "verl/workers/new.py",
        "verl/big.py",
    ]  # not a document that names it, nor a line that only stands beside a change


@pytest.mark.integration
def test_target_stages_lists_the_census_and_says_a_broken_profiler_in_one_line(repo: VerlRepo, tmp_path):
    """``harness target --stages``: no environment made for a checkout; a checkout whose profiler module does not
    parse or is gone is described all the same, its problem in one line, exit 0."""
    checkout = tmp_path / "verl"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(checkout)], check=True)

    def stages() -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "harness", "target", "--verl", str(checkout), "--stages", "--trigger"]
        return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=ROOT)

    ran = stages()
    assert ran.returncode == 0, ran.stderr
    lines = ran.stdout.splitlines()
    assert lines[0].startswith("stages of verl@") and "precision_debugger knows 6 stages" in lines[0]
    assert any(re.search(r"engine_workers\.py:\d+ +actor_update \(scheduled\) on Act.*: dumped", ln) for ln in lines)
    assert any("train_batch on TrainingWorker.train_batch: UNKNOWN" in ln for ln in lines)
    assert lines[-2].startswith("trigger paths: ^(verl/utils/profiler/|")
    (checkout / PROFILE).write_text("_STAGE_TO_ROLE = {\n")
    ran = stages()
    assert ran.returncode == 0 and "  census: verl/utils/profiler/precision_debugger_profile.py:1: does not parse" in (
        ran.stdout
    )
    (checkout / PROFILE).unlink()
    (checkout / ENGINE_WORKERS).write_text("def broken(:\n    DistProfiler\n")
    ran = stages()
    said = [ln for ln in ran.stdout.splitlines() if "census:" in ln or "unreadable:" in ln]
    assert ran.returncode == 0 and said == [
        "  census: verl/utils/profiler/precision_debugger_profile.py: not in this verl (no precision_debugger: every "
        "stage unknown to it)",
        "  unreadable: verl/workers/engine_workers.py:1: does not parse (SyntaxError)",
    ]


FORGED = """\
_STAGE_TO_ROLE = {"actor_update": "actor", "x\\n::error title=census::all good": "actor"}
_SKIP_STAGES = {"##[error]skip"}
"""
FORGING_WORKERS = """\
class Worker:
    @DistProfiler.annotate(role="actor_update\\n::notice title=ok::merge it")
    def update(self, data):
        return data

    @DistProfiler.annotate(role=f"##[warning]{data}")
    def compute(self, data):
        return data
"""


def test_a_verl_sources_strings_are_printed_as_one_escaped_line_never_as_a_workflow_command():
    """A role literal, a table's names and a file's name are the pull request's text: the census and its diff (the
    compare's findings) print each as one line, escaped (harness.outside.shown)."""
    tables, _ = read_tables(FORGED)
    broken = census_of_files("h", [("verl/x\n::error::y.py", b"DistProfiler(")], None).unreadable
    head = Census(
        source="h", annotations=annotations_of("verl/w.py", FORGING_WORKERS), tables=tables, unreadable=broken
    )
    said = [*head.lines(), *diff(_census(TABLES, WORKERS), head)[0]]
    printed = "\n".join(said).splitlines()
    assert len(printed) == len(said) and not [ln for ln in printed if ln.lstrip().startswith("::") or "##[" in ln]
    assert "  verl/w.py:2  actor_update\\n::notice title=ok::merge it on Worker.update: UNKNOWN" in "\n".join(printed)
    assert "  unreadable: verl/x\\n::error::y.py:1: does not parse (SyntaxError)" in printed
