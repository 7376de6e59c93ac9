"""Each kind of broken artifact fails the right check with a readable message, and only that check."""

from __future__ import annotations

import json
import shutil

import pytest
from builders import write_dump, write_metrics, write_scenario

from harness import outcomes
from harness.checks import CHECKS, CheckContext
from harness.checks.known_gap import check_gap
from harness.checks.overhead import around, in_run, samples
from harness.errors import InfraError
from harness.scenario.loader import load_scenario


def verdicts(ctx: CheckContext) -> dict[str, list[str]]:
    fresh = CheckContext(ctx.scenario, ctx.dir)
    return {name: check(fresh).problems for name, check in CHECKS.items()}


def failing(ctx: CheckContext) -> dict[str, list[str]]:
    return {k: v for k, v in verdicts(ctx).items() if v}


def test_good_tree_passes_every_check(good_case):
    _, ctx = good_case
    assert failing(ctx) == {}
    figures = CHECKS["overhead"](CheckContext(ctx.scenario, ctx.dir)).figures
    assert figures["overhead.wall.profiled"] == pytest.approx(72**0.5, abs=1e-3)  # the median of 8x and 9x, in logs
    assert figures["overhead.wall.stage.actor_update"] == pytest.approx(72**0.5 * 1.5, abs=1e-3)
    assert figures["overhead.sample.wall.profiled.step2.rank0"] == 8.0  # wall time: one sample per step (rank 0's view)
    assert figures["overhead.interval.wall.profiled"] == "8.49x [8.00x-9.00x], 2 samples, noise ±6%"


def test_missing_rank_dir_fails_layout(good_case):
    _, ctx = good_case
    shutil.rmtree(ctx.tree.root / "step_4" / "actor_update" / "step0" / "rank1")
    assert failing(ctx).keys() == {"layout"}
    assert failing(ctx)["layout"] == ["missing dump dir step_4/actor_update/step0/rank1"]


def test_dir_for_unprofiled_step_fails_layout(good_case):
    _, ctx = good_case
    write_dump(ctx.tree.root, 3, "actor_update", 0)
    problems = failing(ctx)["layout"]
    assert problems == [
        "unexpected dump dir step_3/actor_update/step0/rank0: step 3 is not profiled (precision_debugger.steps [2, 4])"
    ]


def test_extra_stage_fails_layout(good_case):
    _, ctx = good_case
    write_dump(ctx.tree.root, 2, "ref_compute_log_prob", 0)
    (problem,) = failing(ctx)["layout"]
    assert "step_2/ref_compute_log_prob/step0/rank0" in problem
    assert "not in the stage set" in problem


def test_proc_dir_and_stray_files_fail_layout(good_case):
    _, ctx = good_case
    (ctx.tree.root / "step_2" / "actor_update" / "step0" / "proc1234").mkdir()
    (ctx.tree.root / "notes.txt").write_text("x")
    problems = "\n".join(failing(ctx)["layout"])
    assert "proc<pid>" in problems and "torch.distributed was not initialised" in problems
    assert "unexpected path notes.txt" in problems


def test_missing_stack_json_fails_layout(good_case):
    _, ctx = good_case
    (ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "stack.json").unlink()
    assert failing(ctx)["layout"] == ["step_2/actor_update/step0/rank0: missing stack.json"]


def test_dumps_from_the_off_run_fail_layout(good_case):
    _, ctx = good_case
    write_dump(ctx.dir.run("off").dumps, 2, "actor_update", 0)
    assert "off run" in failing(ctx)["layout"][0]


def test_truncated_dump_json_fails_contents(good_case):
    _, ctx = good_case
    path = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank1" / "dump.json"
    path.write_text(path.read_text()[:200])
    assert failing(ctx).keys() == {"contents"}
    (problem,) = failing(ctx)["contents"]
    assert problem.startswith("step_2/actor_update/step0/rank1/dump.json: not valid JSON (truncated?")


def _rewrite(path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def test_nan_statistics_fail_contents_unless_tolerated(tmp_path, good_case):
    _, ctx = good_case
    path = ctx.tree.root / "step_4" / "actor_compute_log_prob" / "step0" / "rank0" / "dump.json"
    _rewrite(path, lambda d: d["data"]["Functional.linear.1.forward"]["output"][0].update(Max=float("nan")))
    assert "NaN" in path.read_text()  # written as a NaN literal, as msprobe does (orjson rejects it)
    (problem,) = failing(ctx)["contents"]
    assert "Functional.linear.1.forward output[0]: non-finite statistics" in problem
    assert "'Max': nan" in problem

    tolerant = load_scenario(write_scenario(tmp_path, expect={"nonfinite_ok": [r"^Functional\.linear\.1\."]}))
    result = CHECKS["contents"](CheckContext(tolerant, ctx.dir))
    assert result.passed and "non-finite" in result.notes[0]
    assert result.figures["contents.nonfinite_tolerated"] == 1


def test_inconsistent_statistics_fail_contents(good_case):
    _, ctx = good_case
    path = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"
    _rewrite(path, lambda d: d["data"]["Functional.linear.0.forward"]["output"][0].update(Min=5.0))
    problems = failing(ctx)["contents"]
    assert any("Min 5.0 > Max 1.0" in p for p in problems)


def test_backward_in_no_grad_stage_and_missing_backward_fail_contents(good_case):
    _, ctx = good_case
    logprob = ctx.tree.root / "step_2" / "actor_compute_log_prob" / "step0" / "rank0" / "dump.json"
    _rewrite(logprob, lambda d: d["data"].update({"Functional.linear.9.backward": {"input": []}}))
    update = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"
    _rewrite(update, lambda d: d.update(data={k: v for k, v in d["data"].items() if "backward" not in k}))
    problems = "\n".join(failing(ctx)["contents"])
    assert "no-grad stage actor_compute_log_prob holds backward entries" in problems
    assert "update stage actor_update holds no backward entries" in problems


def test_wrong_level_and_header_fail_contents(good_case):
    _, ctx = good_case
    path = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"
    _rewrite(path, lambda d: d["data"].update({"Module.model.Qwen2Model.forward.0": {}}) or d.update(task="tensor"))
    problems = "\n".join(failing(ctx)["contents"])
    assert "level L1 holds module entries" in problems
    assert "task is 'tensor', expected 'statistics'" in problems


def test_expectations_on_counts_and_patterns(tmp_path, good_case):
    _, ctx = good_case
    strict = load_scenario(
        write_scenario(
            tmp_path,
            expect={"min_entries": 100, "required_patterns": {"actor_update": [r"^Functional\.conv2d\."]}},
        )
    )
    problems = "\n".join(CHECKS["contents"](CheckContext(strict, ctx.dir)).problems)
    assert "8 entries, expected at least 100" in problems
    assert "no entry matches required pattern '^Functional\\\\.conv2d\\\\.'" in problems


def test_tensor_task_needs_tensor_files(tmp_path, good_case):
    _, ctx = good_case
    pd = {"task": "tensor"}
    scenario = load_scenario(write_scenario(tmp_path, precision_debugger=pd))
    for path in ctx.tree.root.rglob("dump.json"):
        _rewrite(path, lambda d: d.update(task="tensor"))
    path = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"
    _rewrite(path, lambda d: d["data"]["Functional.linear.0.forward"]["output"][0].update(data_name="x.pt"))
    (problem,) = CHECKS["contents"](CheckContext(scenario, ctx.dir)).problems
    assert problem.endswith("tensor file dump_tensor_data/x.pt is missing")
    (path.parent / "dump_tensor_data").mkdir()
    (path.parent / "dump_tensor_data" / "x.pt").write_bytes(b"0")
    assert CHECKS["contents"](CheckContext(scenario, ctx.dir)).passed


def test_overhead_over_budget_reports_every_ratio(good_case):
    _, ctx = good_case
    write_metrics(ctx.dir.run("on").metrics, {1: 1.0, 2: 30.0, 3: 2.0, 4: 25.0, 5: 1.9})
    result = CHECKS["overhead"](CheckContext(ctx.scenario, ctx.dir))
    assert result.problems == [
        "overhead.wall.profiled: 27.39x [25.00x-30.00x], 2 samples, noise ±10% against 20x (wall time)",
        "overhead.wall.unprofiled: 1.95x [1.90x-2.00x], 2 samples, noise ±3% against 1.5x (wall time)",
    ]
    assert result.figures["overhead.step1"] == 1.0  # the warmup step is reported, not judged


def _rank_metrics(path, per_step: dict[int, list[float]], waited: float | None = 0.0, cpu_share: float = 1.0) -> None:
    """The embedded workload's metrics: verl's timers plus each rank's own seconds per timer: wall, CPU (a share of
    the wall time the rank paid; the rest it was blocked) and runnable waiting, ``waited`` a share of it (None: no
    schedstat, not logged)."""
    lines = []
    for n, ranks in per_step.items():
        data = {"timing_s/step": ranks[0], "timing_s/update_actor": ranks[0] / 2}
        for r, t in enumerate(ranks):
            for timer, s in (("step", t), ("update_actor", t / 2)):
                data |= {f"wall_s/{timer}/rank{r}": s * (1 + (waited or 0)), f"cpu_s/{timer}/rank{r}": s * cpu_share}
                data |= {f"wait_s/{timer}/rank{r}": s * waited} if waited is not None else {}
        lines.append(json.dumps({"step": n, "data": data}))
    path.write_text("\n".join(lines) + "\n")


def test_overhead_samples_are_wall_time_less_runnable_waiting_per_rank_and_step(good_case):
    """Profiled steps against the same process's unprofiled steps: the on run's process is 25 % slower throughout
    (as one process on a shared runner can be), which the unprofiled ratio shows and the profiled samples do not.
    The on run waited for a core as long again as it ran (another process on its core): not counted. Half of its
    time it was blocked (CPU time half the wall time it paid): counted, and the CPU figure, recorded beside it,
    misses that half."""
    _, ctx = good_case
    _rank_metrics(ctx.dir.run("off").metrics, {n: [1.0, 1.0] for n in range(1, 6)})
    slow = {1: [1, 1], 2: [8, 8.2], 3: [1, 1], 4: [9, 8.8], 5: [1, 1]}
    on = {n: [1.25 * t for t in ranks] for n, ranks in slow.items()}
    _rank_metrics(ctx.dir.run("on").metrics, on, waited=1.0, cpu_share=0.5)
    result = CHECKS["overhead"](CheckContext(ctx.scenario, ctx.dir))
    assert result.passed
    assert result.figures["overhead.wall.unprofiled"] == 1.25
    assert result.figures["overhead.cpu.unprofiled"] == 0.625  # blind to the half it was blocked
    assert {k: v for k, v in result.figures.items() if k.startswith("overhead.sample.wall.profiled")} == {
        "overhead.sample.wall.profiled.step2.rank0": 8.0,
        "overhead.sample.wall.profiled.step2.rank1": 8.2,
        "overhead.sample.wall.profiled.step4.rank0": 9.0,
        "overhead.sample.wall.profiled.step4.rank1": 8.8,
    }
    assert (
        "overhead.wall.profiled: 8.49x [8.00x-9.00x], 4 samples, noise ±6% against 20x "
        "(wall time less runnable waiting, per rank; profiled against the run's own unprofiled steps)"
    ) in result.notes
    assert (
        "profiled steps (on run, per rank): wall 21.250 s = CPU 5.312 s + runnable waiting 10.625 s + blocked 5.312 s"
    ) in result.notes


def test_without_schedstat_the_gated_time_is_the_raw_wall_time_and_says_so(good_case):
    _, ctx = good_case
    _rank_metrics(ctx.dir.run("off").metrics, {n: [1.0, 1.0] for n in range(1, 6)}, waited=None)
    _rank_metrics(ctx.dir.run("on").metrics, {n: [1.5, 1.5] for n in range(1, 6)}, waited=None)
    result = CHECKS["overhead"](CheckContext(ctx.scenario, ctx.dir))
    assert result.figures["overhead.wall.unprofiled"] == 1.5
    assert any("no schedstat on this host" in n for n in result.notes)
    assert any("runnable waiting not measured (no schedstat)" in n for n in result.notes)


def test_the_in_run_reference_is_the_unprofiled_steps_among_the_profiled_ones():
    """The machine drifts within a run: steps long after the last profiled one are a worse denominator."""
    assert around([3, 5, 7, 9, 10, 11, 12, 13], [2, 4, 6, 8]) == [3, 5, 7, 9]
    assert around([9, 10], [2, 4]) == [9, 10]  # none among them: all of them
    assert around([3, 5], []) == [3, 5]


def test_a_contention_burst_in_one_unprofiled_step_does_not_move_the_runs_samples():
    """The in-run reference is each rank's median: one unprofiled step that waited 2 s on the other rank (the shared
    runner's burst) leaves every profiled step's sample where it was; the mean moved them all by a third."""
    on = {(n, r): 3.0 if n % 2 == 0 else 1.0 for n in range(2, 11) for r in (0, 1)}
    quiet = samples(on, in_run(on, [2, 4, 6, 8], [3, 5, 7, 9]), [2, 4, 6, 8])
    on[5, 0] = 3.0
    burst = samples(on, in_run(on, [2, 4, 6, 8], [3, 5, 7, 9]), [2, 4, 6, 8])
    assert quiet == burst == {f"step{n}.rank{r}": 3.0 for n in (2, 4, 6, 8) for r in (0, 1)}


def test_an_interval_across_the_max_is_inconclusive_not_a_pass(good_case):
    _, ctx = good_case
    write_metrics(ctx.dir.run("on").metrics, {1: 1.0, 2: 16.0, 3: 1.0, 4: 24.0, 5: 1.0})  # median 19.6x, max 20x
    result = CHECKS["overhead"](CheckContext(ctx.scenario, ctx.dir))
    assert not result.passed and not result.problems
    assert result.inconclusive == [
        "overhead.wall.profiled: 19.60x [16.00x-24.00x], 2 samples, noise ±22% against 20x: INCONCLUSIVE: noise ±22%, "
        "needs 98 more repeats (wall time)"
    ]


def test_missing_metrics_is_a_readable_problem(good_case):
    _, ctx = good_case
    ctx.dir.run("off").metrics.unlink()
    (problem,) = failing(ctx)["overhead"]
    assert problem.startswith("no metrics file") and "metrics.jsonl" in problem


def test_disk_budget(good_case):
    _, ctx = good_case
    big = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "pad.bin"
    big.write_bytes(b"\0" * 1_100_000)
    problems = failing(ctx)["disk"]
    assert any(p.startswith("step_2: 1.1") and "> budgets.disk.max_per_step 0.60 MB" in p for p in problems)
    assert any(p.startswith("all dumps:") and "max_total 1.00 MB" in p for p in problems)


def test_provisional_budgets_are_reported_with_their_figures_and_gate_nothing(tmp_path, good_case):
    """``budgets.provisional`` (budgets never measured on the scenario's device, as the multi-GPU CUDA scenarios'):
    the disk and overhead checks report each figure against them and gate none: not a pass, not a failure, the
    figures in the line (an over-budget dump failed, one within passed green, as if the budgets were measured)."""
    _, ctx = good_case
    big = ctx.tree.root / "step_2" / "actor_update" / "step0" / "rank0" / "pad.bin"
    big.write_bytes(b"\0" * 1_100_000)
    budgets = {"provisional": "derived from another device's figures", "disk": {"max_per_rank": "10MB"}}
    scenario = load_scenario(write_scenario(tmp_path / "p", budgets=budgets))
    fresh = CheckContext(scenario, ctx.dir)
    disk, overhead = CHECKS["disk"](fresh), CHECKS["overhead"](fresh)
    for result in (disk, overhead):
        assert result.problems == [] and outcomes.check_outcome(result) == "not gated", result.problems
        assert result.not_gated.startswith("provisional budgets, not gated (derived from another device's figures): ")
    assert "all dumps 1.1" in disk.not_gated and "against max_total 1.00 MB: over" in disk.not_gated
    assert "rank0 " in disk.not_gated and "against max_per_rank 10.00 MB: within" in disk.not_gated
    assert "overhead.wall.profiled 8.49x [" in overhead.not_gated and "against max 20x: within" in overhead.not_gated
    measured = CheckContext(ctx.scenario, ctx.dir)  # the same dumps against measured budgets
    assert outcomes.check_outcome(CHECKS["disk"](measured)) == "fail"


def test_known_gap_reports_exactly_the_missing_stages(tmp_path, good_case):
    _, ctx = good_case
    scenario = load_scenario(
        write_scenario(
            tmp_path,
            workload={"kind": "cpu_ppo", "critic": True},
            precision_debugger={"stages": ["actor_compute_log_prob", "actor_update", "compute_values"]},
            expect={"known_gaps": [{"stages": ["compute_values"], "reason": "critic never dumped"}]},
        )
    )
    gap = scenario.expect.known_gaps[0]
    fresh = CheckContext(scenario, ctx.dir)
    assert {k: v for k, v in {n: c(fresh).problems for n, c in CHECKS.items()}.items() if v} == {}
    result = check_gap(fresh, gap)
    assert result.problems == [
        "expected stage compute_values produced no dumps (step_2/rank0, step_2/rank1, step_4/rank0, step_4/rank1)"
    ]
    for step in (2, 4):
        for rank in (0, 1):
            write_dump(ctx.tree.root, step, "compute_values", rank)
    assert check_gap(CheckContext(scenario, ctx.dir), gap).passed  # -> XPASS(strict) in pytest: the gap is fixed


@pytest.mark.parametrize("how", ["deleted", "another schema", "a link"])
@pytest.mark.parametrize("mode", ["off", "on"])
def test_a_run_without_its_run_record_is_never_a_pass(good_case, mode, how):
    """Both run.json deleted, or of an unknown schema, and every check passed, exit 0 (run --reuse, pytest
    --harness-reuse): how a run ended is unknown, so the crash check stops with an error naming the record."""
    _, ctx = good_case
    record = ctx.dir.run(mode).record
    text = record.read_text()
    record.unlink()
    if how == "another schema":
        record.write_text(json.dumps(json.loads(text) | {"schema_version": 9}))
    elif how == "a link":
        (record.parent / "elsewhere.json").write_text(text)
        record.symlink_to(record.parent / "elsewhere.json")
    fresh = CheckContext(ctx.scenario, ctx.dir)
    with pytest.raises(InfraError, match=rf"{record}: no run record \(missing, or of another schema\)"):
        CHECKS["crash"](fresh)


def test_a_name_the_code_under_test_chose_is_one_escaped_line_in_every_checks_lines(good_case):
    """A dump tree's names are msprobe's and verl's: a stage dir named ``x\\n::error title=...::`` (or ``##[``
    anywhere) printed in the layout's problem was a workflow command of its own; every check's lines go through
    run_check, which shows each as one line."""
    from harness.checks import CHECKS, run_check

    _, ctx = good_case
    forged = ctx.dir.run("on").dumps / "step_2" / "x\n::error title=layout::all good" / "step0" / "rank0"
    forged.mkdir(parents=True)
    (forged / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')
    results = [run_check(name, check, ctx) for name, check in CHECKS.items()]
    lines = [ln for r in results for ln in (*r.problems, *r.notes, *r.inconclusive, r.summary)]
    printed = "\n".join(lines).splitlines()
    assert len(printed) == len(lines) and not [ln for ln in printed if ln.lstrip().startswith("::") or "##[" in ln]
    assert (
        "unexpected dump dir step_2/x\\n::error title=layout::all good/step0/rank0: stage x\\n::error"
        in (results[1].problems[0])
    )
