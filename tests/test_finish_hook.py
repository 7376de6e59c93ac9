"""verl's finish hook (``precision_debugger.finish_hook_ranks``) without a cluster or a training: what the harness's
hook command records, how its listing is compared with what its node held, the layout lines that follow (ran once on
each selected rank, after the last profiled step, listing what the node held), and the overrides that set it. The
two-node run is tests/test_ray_nodes.py (heavy)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest
from builders import write_scenario

from harness.artifacts import finish_hook
from harness.artifacts.nodes import NodeDoc, NodesRecord
from harness.checks.base import CheckContext
from harness.checks.finish_hook import compare
from harness.checks.layout import check_layout
from harness.errors import HarnessError
from harness.scenario.loader import ScenarioError, load_scenario
from harness.scenario.model import Scenario
from harness.training.workloads.verl_ppo.overrides import finish_hook_overrides

HEAD = "head node 10.0.0.1 (head, aaaaaaaa)"
WORKER = "node 10.0.0.2 (worker, bbbbbbbb)"


def test_the_hook_records_every_file_of_the_save_path_with_its_size_and_sha256_and_each_run(tmp_path):
    save = tmp_path / "dumps"
    (save / "step_2" / "a").mkdir(parents=True)
    (save / "step_2" / "a" / "dump.json").write_text("{}")
    (save / "top.txt").write_bytes(b"xyz")
    os.symlink("/etc/passwd", save / "step_2" / "link")
    env = {"VERL_PROFILE_SAVE_PATH": str(save), "VERL_PROFILE_RANK": "1", "VERL_PROFILE_ROLE": "actor"}
    out = tmp_path / "finish_hook"
    path = finish_hook.write(str(out), env)
    assert path == out / "rank1.jsonl"
    finish_hook.write(str(out), env)  # a second run is a second line, never a replaced one
    runs, problems = finish_hook.read_runs(out)
    assert problems == [] and len(runs) == 2
    run = runs[0]
    assert run.rank == 1 and run.role == "actor" and run.save_path_exists
    assert run.sizes == {
        "step_2/a/dump.json": (2, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
        "top.txt": (3, "3608bca1e44ea6c4d268eb6db02260269892c0b42b86bbf1e77a6fa16c3c9282"),
    }
    assert run.refused == ["step_2/link: a symbolic link"]


def test_a_hook_line_that_does_not_read_is_named_by_file_and_line(tmp_path):
    out = tmp_path / "finish_hook"
    out.mkdir()
    (out / "rank0.jsonl").write_text('{"rank": 0}\n')
    runs, problems = finish_hook.read_runs(out)
    assert runs == [] and len(problems) == 1
    assert problems[0].startswith(f"{out / 'rank0.jsonl'}:1: not a line of the harness's finish hook (")


def test_compare_names_what_only_the_listing_holds_what_only_the_node_held_and_other_bytes():
    held = {"a": (1, "0" * 64), "b": (2, "1" * 64), "c": (3, "2" * 64)}
    assert compare(dict(held), held) == ""
    listed = {"a": (1, "0" * 64), "b": (2, "f" * 64), "d": (4, "3" * 64)}
    assert compare(listed, held) == "1 listed but not held (d); 1 held but not listed (c); 1 with other bytes (b)"
    many = {str(i): (i, "0" * 64) for i in range(5)}
    assert compare(many, {}) == "5 listed but not held (0, 1, 2 and 2 more)"


def closed(*paths: Path) -> None:
    """``paths`` closed to the hook (mode 0; as root also owned by a uid ``hook_process``'s namespace does not map,
    where root overrides no mode)."""
    for path in paths:
        if os.geteuid() == 0:
            os.chown(path, 65534, 65534)
        path.chmod(0o444 if path.name == "blind" else 0)


def hook_process(out: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """verl's finish_hook_cmd as a node runs it (``python -m harness.artifacts.finish_hook OUT``), the file modes
    holding: as root, in a user namespace of its own."""
    userns = ["unshare", "--user", "--map-root-user"] if os.geteuid() == 0 else []
    argv = [*userns, sys.executable, "-m", "harness.artifacts.finish_hook", str(out)]
    return subprocess.run(argv, env=os.environ | env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.integration  # the hook's own process, where the file modes hold
def test_the_hook_names_each_file_and_directory_it_cannot_read_and_still_lists_the_rest(tmp_path):
    save = tmp_path / "dumps"
    for d in ("a", "closed", "blind"):
        (save / d).mkdir(parents=True)
        (save / d / "x.json").write_text("{}")
    (save / "secret.json").write_text("s")
    closed(save / "secret.json", save / "closed", save / "blind")  # blind: its names read, its files not reached
    out = tmp_path / "finish_hook"
    proc = hook_process(out, {"VERL_PROFILE_SAVE_PATH": str(save), "VERL_PROFILE_RANK": "0"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"finish hook: wrote {out / 'rank0.jsonl'}\n", "")
    runs, problems = finish_hook.read_runs(out)
    assert problems == [] and list(runs[0].sizes) == ["a/x.json"]
    assert runs[0].refused == [
        "blind/x.json: unreadable (Permission denied)",
        "closed: unreadable directory (Permission denied)",
        "secret.json: unreadable (Permission denied)",
    ]


@pytest.mark.integration
def test_a_node_file_the_hook_could_not_read_fails_layout_naming_it_once_as_not_shippable(hook_case):
    ctx, saves = hook_case
    out = ctx.dir.run("on").finish_hook
    (out / "rank1.jsonl").unlink()
    last = saves[1] / "step_4" / "actor_update" / "step0" / "rank1" / "dump.json"
    closed(last)
    proc = hook_process(out, {"VERL_PROFILE_SAVE_PATH": str(saves[1]), "VERL_PROFILE_RANK": "1"})
    assert proc.returncode == 0, proc.stderr
    assert check_layout(ctx).problems == [
        f"finish hook: rank 1 on {WORKER} found step_4/actor_update/step0/rank1/dump.json: unreadable (Permission "
        "denied): not shippable"
    ]


def test_a_file_or_directory_removed_while_the_hook_lists_is_named_and_the_rest_listed(tmp_path, monkeypatch):
    save = tmp_path / "dumps"
    (save / "sub").mkdir(parents=True)
    for name in ("a.json", "b.json", "sub/c.json"):
        (save / name).write_text(name)
    walk = os.walk

    def racing(top: str, **kw: object):  # another process removes them once the walk has read the directory
        for d, dirs, names in walk(top, **kw):  # type: ignore[call-overload]
            if d == top:
                (save / "b.json").unlink()
                shutil.rmtree(save / "sub")
            yield d, dirs, names

    monkeypatch.setattr(os, "walk", racing)
    files, refused = finish_hook.listing(str(save))
    assert list(files) == ["a.json"]
    assert refused == ["b.json: removed while it was listed", "sub: removed while it was listed"]


RANKS = [
    (None, "VERL_PROFILE_RANK is not set"),
    ("one", "VERL_PROFILE_RANK 'one' is not a rank (a whole number)"),
    ("-1", "VERL_PROFILE_RANK '-1' is not a rank (a whole number)"),
    ("\u0661", "VERL_PROFILE_RANK '\u0661' is not a rank (a whole number)"),  # Arabic-Indic one: isdigit, no rank
]


def rank_env(save: Path, rank: str | None) -> dict[str, str]:
    return {"VERL_PROFILE_SAVE_PATH": str(save)} | ({} if rank is None else {"VERL_PROFILE_RANK": rank})


@pytest.mark.parametrize("rank", [r for r, _ in RANKS])
def test_a_rank_verl_did_not_give_is_listed_as_unknown_and_layout_names_the_run(hook_case, rank):
    ctx, saves = hook_case
    out = ctx.dir.run("on").finish_hook
    assert finish_hook.write(str(out), rank_env(saves[1], rank)) == out / "rank-unknown.jsonl"
    assert [r.rank for r in finish_hook.read_runs(out)[0]] == [None, 0, 1]
    assert check_layout(ctx).problems == [
        f"finish hook: a run on {socket.gethostname()} had no rank (VERL_PROFILE_RANK unset or not a whole number): "
        "verl exports the rank it runs the hook on"
    ]


@pytest.mark.integration
@pytest.mark.parametrize(("rank", "said"), RANKS)
def test_the_hooks_command_line_says_a_missing_rank_in_one_line_exit_2(tmp_path, rank, said):
    proc = hook_process(tmp_path / "hook", rank_env(tmp_path, rank))
    assert (proc.returncode, proc.stdout) == (2, f"finish hook: wrote {tmp_path}/hook/rank-unknown.jsonl\n")
    assert (
        proc.stderr
        == f"finish hook: {said}: listed as rank-unknown.jsonl (verl exports the rank it runs the hook on)\n"
    )


def dangling_listing(out: Path) -> None:
    out.mkdir()
    (out / "rank0.jsonl").symlink_to(out.parent / "x")


@pytest.mark.parametrize(
    ("make", "line"),
    [
        (lambda out: out.write_text("x"), "OUT {out}: not a directory"),
        (
            lambda out: out.symlink_to(out.parent / "elsewhere"),
            "OUT {out}: a symbolic link: outputs are written in place, never through a link",
        ),
        (lambda out: (out / "rank0.jsonl").mkdir(parents=True), "{out}/rank0.jsonl: cannot write: Is a directory"),
        (
            dangling_listing,
            "{out}/rank0.jsonl: a symbolic link: files are written in place, never through a link (remove it)",
        ),
    ],
    ids=["a file", "a link", "its listing a directory", "its listing a dangling link"],
)
def test_an_out_the_hook_cannot_write_is_one_line(tmp_path, make, line):
    out = tmp_path / "finish_hook"
    make(out)
    env = {"VERL_PROFILE_SAVE_PATH": str(tmp_path), "VERL_PROFILE_RANK": "0"}
    with pytest.raises(HarnessError) as err:  # OutputError, or the output_path's own refusal
        finish_hook.write(str(out), env)
    assert str(err.value) == line.format(out=out)
    assert not (tmp_path / "x").exists() and not (tmp_path / "elsewhere").exists()


@pytest.mark.integration
def test_the_hooks_command_line_says_an_out_it_cannot_write_in_one_line_exit_2(tmp_path):
    (tmp_path / "out").write_text("x")
    proc = hook_process(tmp_path / "out", rank_env(tmp_path, "0"))
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"finish hook: OUT {tmp_path}/out: not a directory\n")


def hooked(scenario: Scenario, ranks: list[int]) -> Scenario:
    """The scenario with verl's finish hook on ``ranks`` (a cpu_ppo scenario refuses the setting when loaded)."""
    pd = scenario.precision_debugger.model_copy(update={"finish_hook_ranks": ranks})
    return scenario.model_copy(update={"precision_debugger": pd})


def two_nodes() -> NodesRecord:
    nodes = [
        NodeDoc(node_id="a" * 56, ip="10.0.0.1", hostname="head", head=True, ranks=[0], dump_ranks=[0]),
        NodeDoc(node_id="b" * 56, ip="10.0.0.2", hostname="worker", ranks=[1], dump_ranks=[1]),
    ]
    return NodesRecord(job="harness-x", nodes=nodes, placement="test", complete=True)


def node_save_path(ctx: CheckContext, rank: int, tmp: Path) -> Path:
    """A copy of ``rank``'s dumps, as that rank's node held them in its own save_path."""
    dumps, save = ctx.dir.run("on").dumps, tmp / f"node-of-rank{rank}" / "dumps"
    for d in dumps.glob(f"step_*/*/step0/rank{rank}"):
        shutil.copytree(d, save / d.relative_to(dumps))
    return save


def run_hook(ctx: CheckContext, rank: int, save: Path) -> None:
    finish_hook.write(
        str(ctx.dir.run("on").finish_hook), {"VERL_PROFILE_SAVE_PATH": str(save), "VERL_PROFILE_RANK": str(rank)}
    )


@pytest.fixture
def hook_case(good_case, tmp_path) -> tuple[CheckContext, dict[int, Path]]:
    """The good case on two nodes, one rank each, its hook run once on each rank over a copy of that node's dumps."""
    scenario, ctx = good_case
    ctx.scenario = hooked(scenario, [0, 1])
    two_nodes().write(ctx.dir.run("on").nodes)
    saves = {rank: node_save_path(ctx, rank, tmp_path) for rank in (0, 1)}
    for rank, save in saves.items():
        run_hook(ctx, rank, save)
    return ctx, saves


def test_a_hook_run_once_a_node_listing_what_the_node_held_passes_with_a_note_per_rank(hook_case):
    ctx, _ = hook_case
    res = check_layout(ctx)
    assert res.passed, res.problems
    hooks = [n for n in res.notes if n.startswith("finish hook:")]
    assert len(hooks) == 2 and hooks[0].startswith(f"finish hook: rank 0 on {HEAD} ran 1 time(s), listed 12 file(s)")
    assert hooks[1].startswith(f"finish hook: rank 1 on {WORKER} ran 1 time(s), listed 12 file(s)")


def test_a_hook_that_listed_other_than_its_node_held_fails_naming_rank_node_and_files(hook_case):
    ctx, _ = hook_case
    gathered = ctx.dir.run("on").dumps / "step_4" / "actor_update" / "step0" / "rank1" / "dump.json"
    gathered.write_text(gathered.read_text() + " ")  # the node's file changed after the hook read it
    (ctx.dir.run("on").dumps / "step_2" / "actor_update" / "step0" / "rank1" / "stack.json").unlink()
    assert check_layout(ctx).problems == [
        "step_2/actor_update/step0/rank1: missing stack.json",
        f"finish hook: rank 1 on {WORKER} listed 12 file(s), its node held 11: 1 listed but not held "
        "(step_2/actor_update/step0/rank1/stack.json); 1 with other bytes (step_4/actor_update/step0/rank1/dump.json)",
    ]


def test_a_hook_run_before_the_last_profiled_step_fails_saying_so(hook_case, tmp_path):
    ctx, saves = hook_case
    for line in ctx.dir.run("on").finish_hook.iterdir():
        line.unlink()
    early = tmp_path / "early"
    shutil.copytree(saves[1] / "step_2", early / "step_2")  # the node's save_path as it was after step 2
    run_hook(ctx, 0, saves[0])
    run_hook(ctx, 1, early)
    problems = check_layout(ctx).problems
    assert problems[0] == (
        f"finish hook: rank 1 on {WORKER} ran before the last profiled step's dumps (step 4) were written: its "
        "listing lacks step_4/actor_compute_log_prob/step0/rank1/dump.json, step_4/actor_update/step0/rank1/dump.json"
    )
    assert problems[1].startswith(f"finish hook: rank 1 on {WORKER} listed 6 file(s), its node held 12: 6 held but")


def test_a_hook_run_twice_on_a_rank_never_on_another_or_on_an_unselected_rank_fails_naming_each(hook_case):
    ctx, saves = hook_case
    run_hook(ctx, 1, saves[1])
    assert check_layout(ctx).problems == [f"finish hook: rank 1 on {WORKER} ran it 2 times, once expected"]
    ctx.scenario = hooked(ctx.scenario, [1])
    assert check_layout(ctx).problems == [
        f"finish hook: rank 0 on {HEAD} ran it, not selected (finish_hook_ranks [1])",
        f"finish hook: rank 1 on {WORKER} ran it 2 times, once expected",
    ]
    (ctx.dir.run("on").finish_hook / "rank1.jsonl").unlink()
    assert check_layout(ctx).problems[-1] == (
        f"finish hook: rank 1 on {WORKER} never ran it (no listing in {ctx.dir.run('on').finish_hook})"
    )


def test_a_rank_subset_leaves_the_hook_of_the_other_node_an_empty_listing_and_that_passes(hook_case):
    """ranks [1] (msprobe's filter) with the hook on both nodes: the head's hook lists nothing, as its node holds."""
    ctx, _ = hook_case
    pd = ctx.scenario.precision_debugger.model_copy(update={"ranks": [1]})
    ctx.scenario = ctx.scenario.model_copy(update={"precision_debugger": pd})
    shutil.rmtree(ctx.dir.run("on").finish_hook)
    for d in ctx.dir.run("on").dumps.glob("step_*/*/step0/rank0"):
        shutil.rmtree(d)
    nodes = two_nodes()
    nodes.nodes[0].dump_ranks = []  # the head held no rank dir
    nodes.write(ctx.dir.run("on").nodes)
    empty = ctx.dir.run("on").root.parent / "empty"
    empty.mkdir()
    run_hook(ctx, 0, empty)
    run_hook(ctx, 1, node_save_path(ctx, 1, ctx.dir.run("on").root.parent))
    res = check_layout(ctx)
    assert res.passed, res.problems
    assert any(n.startswith(f"finish hook: rank 0 on {HEAD} ran 1 time(s), listed 0 file(s)") for n in res.notes)


def test_the_overrides_run_the_harness_hook_on_the_selected_ranks_in_the_workers_interpreter():
    hook = finish_hook_overrides([0, 1], PurePosixPath("/tmp/harness-ray/x/finish_hook"), "/venv/bin/python")
    assert hook == {
        "global_profiler.finish_hook_cmd": "/venv/bin/python -m harness.artifacts.finish_hook "
        "/tmp/harness-ray/x/finish_hook",
        "global_profiler.finish_hook_ranks": [0, 1],
    }


@pytest.mark.parametrize(
    ("over", "line"),
    [
        ({"precision_debugger": {"finish_hook_ranks": [0]}}, "is verl's finish hook: workload verl_ppo only"),
        ({"precision_debugger": {"finish_hook_ranks": []}}, "finish_hook_ranks [] selects no rank"),
        ({"precision_debugger": {"finish_hook_ranks": [0, 0]}}, "values must be unique"),
        ({"precision_debugger": {"finish_hook_ranks": [2]}}, "ranks [2] do not exist with world_size 2"),
    ],
)
def test_a_finish_hook_setting_that_cannot_hold_is_one_line(tmp_path, over, line):
    with pytest.raises(ScenarioError) as err:
        load_scenario(write_scenario(tmp_path, **over))
    assert line in str(err.value)


def test_a_node_sends_its_hook_listing_beside_its_dumps_and_its_bytes_are_not_the_dumps(tmp_path):
    from harness.training.executors import ray_gather

    node = tmp_path / "node"
    (node / "dumps" / "step_2").mkdir(parents=True)
    (node / "dumps" / "step_2" / "x.json").write_bytes(b"12345")
    (node / "finish_hook").mkdir()
    (node / "finish_hook" / "rank1.jsonl").write_text('{"rank": 1}\n')
    run_dir = tmp_path / "run"
    receiver = ray_gather.Receiver(run_dir, {}, "node B")
    for msg in ray_gather.ship(str(node)):
        if msg[0] != "node":
            receiver.take(msg)
    assert (run_dir / "finish_hook" / "rank1.jsonl").read_text() == '{"rank": 1}\n'
    assert (receiver.files, receiver.bytes, receiver.refused) == (2, 5, [])


@pytest.mark.integration  # the offline check composes verl's config and probes the target's verl
def test_on_a_cluster_every_role_runs_the_hook_into_its_nodes_run_dir_and_the_off_run_has_none(tmp_path):
    import sys

    from harness.artifacts.rundir import ScenarioDir
    from harness.training.workloads.verl_ppo import VerlPpo
    from harness.training.workloads.verl_ppo.config import compose

    scenario = load_scenario(Path(__file__).resolve().parents[1] / "scenarios" / "two_nodes_finish_hook_fsdp_l1.yaml")
    sdir = ScenarioDir(tmp_path / scenario.name)
    for mode in ("on", "off"):
        launch = VerlPpo().prepare(scenario, sdir.run(mode), enabled=mode == "on", dry=True)
        assert launch.node is not None
        cfg = compose(launch.args[0].removeprefix("--config-name="), launch.args[1:])
        for profiler in (cfg.actor_rollout_ref.actor.profiler, cfg.actor_rollout_ref.ref.profiler):
            if mode == "off":
                assert profiler.finish_hook_cmd is None
                continue
            assert profiler.finish_hook_cmd == (
                f"{sys.executable} -m harness.artifacts.finish_hook {launch.node.finish_hook}"
            )
            assert list(profiler.finish_hook_ranks) == [0, 1]
