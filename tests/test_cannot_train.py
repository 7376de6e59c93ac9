"""A head that cannot train where base did: a verdict on the pull request (exit 1), not the runner's; a verl failing
only on the harness's CPU platform, which lags a method verl's own platforms define, is the harness's (exit 2).

The real runs: test_blame (a commit of the test repository that breaks training off and on alike); verl's #7212
through the CPU gate (docs/verl-pull-requests.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import outcomes
from harness.errors import FailedAlike, InfraError
from harness.gate.judge import ComparePolicy
from harness.gate.observe import Observation
from harness.report import verdicts
from harness.training.workloads.verl_cpu.lag import lagging
from harness.training.workloads.verl_cpu.names import PLATFORM_CLASS

CRASH = {
    "party": "infrastructure",
    "alike": "verl",
    "reason": "both runs failed the same way, precision_debugger off and on: ...",
    "exception": f"AttributeError: '{PLATFORM_CLASS}' object has no attribute 'get_tpu_env_vars'",
    "where": "verl/plugin/platform/platform_tpu_workarounds.py:191 in get_platform_worker_env_vars",
}


def comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: dict[str, list[int]], overhead: bool = False, **kw: str
):
    """base against head of one scenario (``overhead``: decided, ABBA pairs; else base, head, base); ``fails``: per
    side the runs (1-based) that fail off and on alike (``FailedAlike``, as ``ensure_runs`` raises it)."""
    from builders import comparing, write_scenario

    from harness.scenario.loader import load_scenario

    budgets = {"overhead": {"max_profiled_ratio": 10, "max_unprofiled_ratio": 2, "compare": overhead}}
    scenario = load_scenario(write_scenario(tmp_path, budgets=budgets))
    ran: list[str] = []

    def observe(scenario, where):
        side, n = where.parent.name, int(where.name[1:]) + 1
        ran.append(f"{side} {n}")
        if n in fails.get(side, []):
            raise FailedAlike(f"scenario {scenario.name}: off run: {CRASH['reason']}", crash=CRASH)
        return Observation("tiny", {}, {}, {}, {}, checks={"layout": True})

    no_numerics = lambda *args: pytest.fail("no numerics without both sides' dumps")  # noqa: E731
    session, target = comparing(monkeypatch, observe, no_numerics)
    c = session.compare([scenario], target, target, ComparePolicy(repeats=2)).judgement(accepted=kw.get("accepted"))
    return c, ran


def test_a_head_that_fails_off_and_on_alike_where_base_trained_is_a_verdict_on_it(tmp_path, monkeypatch):
    c, ran = comparison(tmp_path, monkeypatch, {"head": [1]})
    assert ran == ["base 1", "head 1"]  # no more runs: another says nothing new
    assert c.exit_code == 1 and c.verdict[1] == "FAIL", verdicts.lines(c)
    (sc,) = c.scenarios
    assert sc.status == "regressed" and sc.compared
    (finding,) = sc.findings
    assert finding == (
        f"REGRESSED {sc.scenario}: {outcomes.CANNOT_TRAIN}: verl raised {CRASH['exception']} at {CRASH['where']} "
        "with precision_debugger off and on alike, where base trained on this runner: the pull request breaks the "
        "training itself"
    )
    said = verdicts.lines(c)
    assert not any(outcomes.ACCEPT_LABEL in line for line in said)  # the label accepts no head that cannot train
    assert outcomes.job_outcome(c.exit_code).action == "fail"
    assert not outcomes.retries(c.exit_code, 1, 60.0, 3600.0)  # never retried as the runner's
    # the accept label says head's dumps change on purpose: it never turns a head that cannot train green
    c, _ = comparison(tmp_path / "accepted", monkeypatch, {"head": [1]}, accepted="label precision-debugger-intended")
    assert c.exit_code == 1 and c.accepted is None, verdicts.lines(c)
    assert "note: not accepted (label precision-debugger-intended): head cannot train (tiny_case)" in verdicts.lines(c)


def test_failing_alike_stays_an_error_where_base_did_not_train_or_head_once_did(tmp_path, monkeypatch):
    c, ran = comparison(tmp_path / "both", monkeypatch, {"base": [1], "head": [1]})
    assert c.exit_code == 2 and not c.scenarios[0].findings, verdicts.lines(c)  # the runner, the inputs: nothing tells
    assert any(e.startswith("head run 1: INFRASTRUCTURE ERROR") for e in c.scenarios[0].errors)
    # head trained once, then failed: not the pull request's for certain (the machine's flake, a race)
    c, ran = comparison(tmp_path / "once", monkeypatch, {"head": [2]}, overhead=True)
    assert ran == ["base 1", "head 1", "head 2", "base 2"]
    assert c.exit_code == 2 and not c.scenarios[0].findings, verdicts.lines(c)
    assert issubclass(FailedAlike, InfraError) and FailedAlike("x", crash={}).label == "INFRASTRUCTURE ERROR"


def platform(root: Path, base: str, cuda: str) -> str:
    d = root / "verl" / "plugin" / "platform"
    d.mkdir(parents=True)
    (d / "platform_base.py").write_text(f"class PlatformBase:\n{base}")
    (d / "platform_cuda.py").write_text(f"class CudaPlatform(PlatformBase):\n{cuda}")
    (d / "platform_tpu.py").write_text("class TpuPlatform(PlatformBase):\n    def get_tpu_env_vars(self): ...\n")
    return str(root)


def test_the_harness_cpu_platform_lagging_verl_is_the_harness_not_verl(tmp_path):
    """An AttributeError on the harness's platform for a method verl's PlatformBase or CUDA platform defines, or an
    abstract method of PlatformBase it lacks: the harness's (its platform lags verl). One that only verl's TPU
    platform defines (verl's #7212): verl's CUDA and NPU runners fail the same way, verl's own."""
    missing = "AttributeError: '{}' object has no attribute '{}'"
    site = platform(tmp_path, "    def ray_noset_envvars(self): ...\n    tag: str = ''\n", "    def empty(self): ...\n")
    said = lagging(missing.format(PLATFORM_CLASS, "ray_noset_envvars"), site)
    assert said and "lacks ray_noset_envvars, which verl defines in verl/plugin/platform/platform_base.py" in said
    assert lagging(missing.format(PLATFORM_CLASS, "empty"), site)
    assert lagging(missing.format(PLATFORM_CLASS, "tag"), site)
    assert lagging(missing.format(PLATFORM_CLASS, "get_tpu_env_vars"), site) is None  # verl's TPU platform only
    assert lagging(missing.format("DataProto", "ray_noset_envvars"), site) is None  # not the harness's class
    assert lagging(missing.format(PLATFORM_CLASS, "ray_noset_envvars"), None) is None  # nothing to read
    assert lagging(missing.format(PLATFORM_CLASS, "ray_noset_envvars"), str(tmp_path / "gone")) is None
    abstract = f"TypeError: Can't instantiate abstract class {PLATFORM_CLASS} without an implementation for abstract"
    assert "lacks a method verl's PlatformBase declares abstract" in (lagging(abstract + " method 'x'", site) or "")
    assert lagging(None, site) is None


def test_the_platform_class_named_is_the_harness_cpu_platform():
    pytest.importorskip("verl")
    from harness.training.workloads.verl_cpu.cpu_platform import CpuPlatform

    assert CpuPlatform.__name__ == PLATFORM_CLASS
