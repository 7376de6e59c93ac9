"""Bad input: nothing written outside the results dir, nothing half-written, one line for every bad input.

Each defect found by the hostile-user pass has a test here that fails on the code before the fix: files and links
on disk, real child processes (a FIFO that would hang, a lock held by another process, a full tmpfs in a mount
namespace), and the scenario loader fuzzed with hypothesis.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from builders import BASE, merge, reuse_argv, write_scenario
from gate_builders import write_results
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.artifacts.record import ExecResult, RunRecord
from harness.artifacts.rundir import RunDir, ScenarioDir
from harness.checks import CHECKS
from harness.checks.base import CheckContext, CheckResult
from harness.cli import main
from harness.errors import InfraError, ScenarioError, TargetError, WorkloadError
from harness.pipeline.session import results_doc
from harness.safeio import OutputError, write_atomic
from harness.scenario.loader import load_scenario
from harness.scenario.model import ExecutorSettings
from harness.scenario.settings.docker import DockerRuntime
from harness.targets.spec import parse_target
from harness.training.executors.docker import DockerExecutor
from harness.training.launch import Launch
from harness.training.runs import ScenarioRuns

PY = sys.executable


def validate(tmp_path: Path, over: dict[str, Any] | None = None, text: str | None = None) -> list[str]:
    path = tmp_path / "scenarios" / "bad_case.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text if text is not None else yaml.safe_dump(merge(BASE, over or {}), sort_keys=False))
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    assert all("\n" not in p and p.startswith(str(path)) for p in exc.value.problems), exc.value.problems
    return [p.removeprefix(str(path)) for p in exc.value.problems]


# --- scenario files: one line each, exit 2, no traceback, no hang --------------------------------------------


@pytest.mark.integration
def test_bad_files_each_give_one_line_in_a_real_process_and_a_fifo_never_hangs(tmp_path):
    d = tmp_path / "a:b"  # a ':' in the path once broke the sorting of the lines by line number
    d.mkdir()
    os.mkfifo(d / "fifo.yaml")
    (d / "binary.yaml").write_bytes(bytes(range(256)))
    (d / "deep.yaml").write_text("[" * 50_000)
    (d / "big.yaml").write_text("description: " + "x" * (1 << 20))
    (d / "two.yaml").write_text("engine: x\nworld_size: 0\n")
    proc = subprocess.run(
        [PY, "-m", "harness", "validate", *(str(d / f) for f in sorted(os.listdir(d))), "/dev/zero"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.replace(str(d), "D").splitlines()
    assert "D/big.yaml: 1048589 bytes, over the 1048576 byte limit" in lines
    assert "D/binary.yaml: not UTF-8 text (byte 128: b'\\x80')" in lines
    assert "D/deep.yaml:1: YAML nested too deeply: flatten the document" in lines
    assert "D/fifo.yaml: not a regular file (a FIFO)" in lines
    assert "/dev/zero: not a regular file (a device)" in lines
    two = [ln for ln in lines if ln.startswith("D/two.yaml")]  # sorted by line number
    assert two[0] == "D/two.yaml:1: engine: Input should be 'fsdp' or 'megatron' (got 'x')"
    assert two[-1] == "D/two.yaml:2: world_size: Input should be greater than 0 (got 0)"


def test_merge_keys_still_override(tmp_path):
    text = yaml.safe_dump({k: v for k, v in BASE.items() if k != "budgets"}, sort_keys=False) + (
        "budgets:\n  overhead:\n    <<: &o {max_profiled_ratio: 1, max_unprofiled_ratio: 2}\n"
        "    max_profiled_ratio: 5\n"
    )
    path = tmp_path / "scenarios" / "merged.yaml"
    path.parent.mkdir()
    path.write_text(text)
    assert load_scenario(path).budgets.overhead.max_profiled_ratio == 5  # not refused as a duplicate


def _yaml_values() -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
    keys = st.sampled_from(["steps", "world_size", "precision_debugger", "budgets", "executor", "kind", "docker"])
    return st.recursive(
        scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(keys | st.text(max_size=8), kids, max_size=4)
    )


FUZZ = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@example(b"? '\n\n'")  # found by this test: a key holding a newline once printed a line break
@given(
    st.one_of(
        st.binary(max_size=400),  # bytes as they come (decode errors, control characters)
        st.text(max_size=400).map(str.encode),  # any unicode
        _yaml_values().map(lambda v: yaml.safe_dump(v).encode()),  # well-formed YAML, odd shapes
        _yaml_values().map(lambda v: yaml.safe_dump({**BASE, "budgets": v}).encode()),  # a scenario, one odd block
        st.lists(st.sampled_from(["[", "{", "- ", ": ", "&a ", "*a ", "!!", "\n", "'", '"', "#", "<<: "])).map(
            lambda p: "".join(p).encode()
        ),
    )
)
def test_fuzz_loader_gives_one_line_per_problem(tmp_path, data):
    """Arbitrary input: either a scenario, or ScenarioError whose problems are single lines naming the file."""
    path = tmp_path / "scenarios" / "fuzz.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    try:
        load_scenario(path)
    except ScenarioError as exc:
        assert exc.problems and all(p.startswith(str(path)) and "\n" not in p for p in exc.problems), exc.problems


# --- container policy ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("docker", "risk"),
    [
        ({"mounts": [{"source": "/", "target": "/host", "read_only": False}]}, "mounts: the host's / (/)"),
        ({"mounts": [{"source": "/var/run/docker.sock", "target": "/s"}]}, "mounts: the docker socket"),
        ({"mounts": [{"source": "/run", "target": "/r"}]}, "mounts: the docker socket (/run)"),
        ({"env": {"LD_PRELOAD": "/x.so"}}, "env/pass_env LD_PRELOAD: loader or interpreter variables"),
        ({"pass_env": ["PYTHONPATH"]}, "env/pass_env PYTHONPATH"),
        ({"npu_devices": [0]}, "npu_devices/gpus/ascend_runtime on a cpu scenario"),
        ({"network": "host"}, "network: host without accelerators (none is enough)"),
    ],
)
def test_dangerous_container_settings_are_refused_unless_unsafe_with_a_reason(tmp_path, docker, risk):
    (line,) = validate(tmp_path, {"executor": {"kind": "docker", "docker": docker}})
    assert line.startswith(":1: (top level): executor.docker: refused, ") and risk in line, line
    (line,) = validate(tmp_path, {"executor": {"kind": "docker", "docker": {**docker, "unsafe": True}}})
    assert "executor.docker.unsafe: true needs executor.docker.unsafe_reason" in line
    path = write_scenario(tmp_path, name="ok", executor={"docker": {**docker, "unsafe": True, "unsafe_reason": "r"}})
    assert load_scenario(path).executor.options("docker").risks("cpu")  # accepted, risks still known


def test_privileges_cannot_be_asked_for_and_root_only_where_the_harness_is_root(tmp_path):
    (line,) = validate(tmp_path, {"executor": {"docker": {"privileged": True}}})
    assert "executor.docker.privileged: unknown field" in line
    assert DockerRuntime(user="0:0").risks(host_uid=1000) == [
        "user 0:0: root in the container while the harness runs as uid 1000"
    ]
    assert DockerRuntime(user="0:0").risks(host_uid=0) == []
    assert DockerRuntime().risks("cpu") == [] and DockerRuntime(npu_devices=[0], network="host").risks("npu") == []


def test_unsafe_runs_say_so_and_code_built_settings_are_refused_before_the_daemon(tmp_path):
    run = RunDir(tmp_path / "on")
    launch = Launch(module="m", args=[], env={}, workdir=tmp_path, inputs=[])
    risky = DockerRuntime(network="host")
    with pytest.raises(WorkloadError, match=r"executor.docker: refused, network: host without accelerators"):
        DockerExecutor(client=object()).execute(launch, run, ExecutorSettings(kind="docker", docker=risky), {})  # type: ignore[arg-type]
    opted = ExecutorSettings(kind="docker", docker=risky.model_copy(update={"unsafe": True, "unsafe_reason": "why"}))
    line = "UNSAFE container (why): network: host without accelerators (none is enough)"
    assert line in DockerExecutor().describe(launch, run, opted, {})
    assert DockerExecutor().environment(opted, None)["container_unsafe"] == line


# --- results: never outside, never half-written ------------------------------------------------------------------


def _runs(root: Path) -> ScenarioRuns:
    sdir = ScenarioDir(root / "tiny_case")
    sdir.root.mkdir(parents=True, exist_ok=True)
    rec = RunRecord(mode="off", executor="local", argv=["python"], result=ExecResult(exit_code=0, wall_s=1.0))
    return ScenarioRuns(sdir, "s1", {"off": rec}, 0.0, target={"block": None, "environment": {"verl": "x"}})


def test_a_results_json_link_is_replaced_never_followed(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    runs = _runs(tmp_path / "res")
    runs.dir.results.symlink_to(outside)
    scenario = load_scenario(write_scenario(tmp_path, name="tiny_case"))
    results_doc(scenario, runs, [CheckResult("disk", summary="ok")]).write(runs.dir.results)
    assert outside.read_text() == "keep me"
    assert not runs.dir.results.is_symlink() and json.loads(runs.dir.results.read_text())["checks"]["disk"]["passed"]
    assert sorted(os.listdir(runs.dir.root)) == ["results.json"]  # no temp file left


ENOSPC_CHILD = """
import os, sys
from pathlib import Path
from harness.errors import HarnessError, one_line
from harness.safeio import write_atomic
run = Path(sys.argv[1])
write_atomic(run / "run.json", '{"ok": 1}')
(run / "train.log").write_text("step 1\\n")
with open(run / "filler", "wb") as f:  # fill the filesystem
    try:
        while True:
            f.write(b"x" * 65536)
    except OSError:
        pass
try:
    write_atomic(run / "run.json", "y" * 100_000)
except HarnessError as exc:
    print(one_line(exc))
print("after: run.json", (run / "run.json").read_text(), "| train.log", (run / "train.log").read_text().strip())
"""


def test_a_full_disk_is_one_infrastructure_line_and_leaves_the_previous_file_whole(tmp_path):
    """A real ENOSPC: a 256 KB tmpfs in a private mount namespace (``unshare``: no root needed on the host)."""
    run = tmp_path / "run"
    run.mkdir()
    script = f'mount -t tmpfs -o size=256k tmpfs {run} && exec {PY} -c "$0" {run} && true'
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, ENOSPC_CHILD],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip().replace(str(run), "R").splitlines() == [
        "INFRASTRUCTURE ERROR (not a check verdict): no space left writing R/run.json (100000 bytes): "
        "0.0 MB free on R; free some space, rerun",
        'after: run.json {"ok": 1} | train.log step 1',  # the previous run.json whole, the log kept
    ]


def test_an_atomic_write_leaves_no_temp_file_and_refuses_nothing_silently(tmp_path):
    write_atomic(tmp_path / "a.json", "1")
    with pytest.raises(OutputError, match=r"/missing/a.json: cannot write: No such file or directory"):
        write_atomic(tmp_path / "missing" / "a.json", "1")
    assert os.listdir(tmp_path) == ["a.json"]


READ_ONLY_CHILD = """
import os, sys
from pathlib import Path
from harness.artifacts.rundir import ScenarioDir
from harness.errors import HarnessError, one_line
from harness.safeio import output_path
from harness.targets.spec import cache_dir
from harness.training.runs import scenario_lock
ro = Path(sys.argv[1])
os.environ["HARNESS_CACHE_DIR"] = str(ro)
for case in (
    lambda: output_path(ro, "--results", directory=True),
    lambda: output_path(ro / "new", "--out", directory=True),
    lambda: output_path(ro / "gate.json", "--json"),
    lambda: scenario_lock(ScenarioDir(ro / "tiny_case")).acquire(),
    cache_dir,
):
    try:
        case()
        print("written")
    except HarnessError as exc:
        print(one_line(exc))
    except Exception as exc:
        print("a bug:", type(exc).__name__)
"""


def test_a_read_only_place_the_harness_is_told_to_write_is_one_line_naming_it(tmp_path):
    """A read-only results dir, output, lock or cache (a read-only bind mount in a private mount namespace): one
    line naming what was given, said before anything is run there, never a harness bug (a read-only scenario dir
    in a results dir: the bad-input table's rows, through the command line)."""
    ro = tmp_path / "ro"
    (ro / "tiny_case" / "on").mkdir(parents=True)
    (ro / "tiny_case" / "on" / "run.json").write_text("{}")
    script = f'mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && exec {PY} -c "$0" {ro}'
    proc = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, READ_ONLY_CHILD],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    rofs = "cannot write: a read-only filesystem (Read-only file system); write elsewhere or make it writable"
    assert proc.stdout.replace(str(ro), "R").splitlines() == [
        f"ERROR: --results R: {rofs}",
        f"ERROR: --out R/new: {rofs}",
        f"ERROR: --json R/gate.json: {rofs}",
        f"ERROR: R/.tiny_case.lock (the results dir's lock): {rofs}",
        f"ERROR: HARNESS_CACHE_DIR R (the harness's cache): {rofs}",
    ]
    assert (ro / "tiny_case" / "on" / "run.json").read_text() == "{}"


# --- the results-dir lock covers the whole scenario --------------------------------------------------------------

PROBE = """
import sys
from filelock import FileLock, Timeout
try:
    FileLock(sys.argv[1]).acquire(timeout=0.2)
    print("free")
except Timeout:
    print("held")
"""


def test_the_lock_is_held_through_the_checks_and_results_json(tmp_path, monkeypatch):
    """Another harness process (a --reuse re-check, a fresh run) cannot take the scenario between its runs and its
    results: probed from a real child process while a check runs."""
    import harness.pipeline.session as sm

    scenario = load_scenario(write_scenario(tmp_path, name="tiny_case"))
    runs = _runs(tmp_path / "res")
    seen = []

    def check(ctx: CheckContext) -> CheckResult:
        probe = subprocess.run([PY, "-c", PROBE, str(runs.dir.lock)], capture_output=True, text=True, timeout=60)
        seen.append(probe.stdout.strip())
        return CheckResult("probe")

    monkeypatch.setattr(sm, "ensure_runs", lambda *a, **k: runs)
    monkeypatch.setattr(sm, "CHECKS", {"probe": check})
    sm.Session(tmp_path / "res", reuse=True, id="s1").evaluate(scenario, env=None)  # type: ignore[arg-type]
    assert seen == ["held"]
    probe = subprocess.run([PY, "-c", PROBE, str(runs.dir.lock)], capture_output=True, text=True, timeout=60)
    assert probe.stdout.strip() == "free"  # released at the end


@pytest.mark.integration
def test_a_run_waiting_for_another_runs_lock_says_so_and_gives_up_at_its_bound(tmp_path, monkeypatch, capsys):
    """It waited forever, saying nothing, for a process that held the results dir."""
    import time

    from harness.training.runs import scenario_lock

    sdir = ScenarioDir(tmp_path / "res" / "tiny_case")
    scenario_lock(sdir)  # makes the dir
    holder = subprocess.Popen([PY, "-c", "import sys, time; from filelock import FileLock; "
                               "l = FileLock(sys.argv[1]); l.acquire(); print('held', flush=True); time.sleep(60)",
                               str(sdir.lock)], stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("HARNESS_LOCK_WAIT_S", "1")
        started = time.monotonic()
        with pytest.raises(InfraError, match=r"held by another harness run for 1 s \(HARNESS_LOCK_WAIT_S\)"):
            scenario_lock(sdir).acquire()
        assert 0.9 < time.monotonic() - started < 10
        assert capsys.readouterr().err == (f"waiting for {sdir.lock}: another harness run holds this scenario's "
                                           "results dir (at most 1 s, HARNESS_LOCK_WAIT_S)\n")  # fmt: skip
        monkeypatch.setenv("HARNESS_LOCK_WAIT_S", "soon")
        with pytest.raises(InfraError, match="HARNESS_LOCK_WAIT_S='soon': not a number of seconds"):
            scenario_lock(sdir).acquire()
    finally:
        holder.kill()
        holder.wait()
    with scenario_lock(sdir):  # free again: taken at once, nothing said
        assert capsys.readouterr().err == ""


@pytest.mark.parametrize("linked", ["tiny_case", "tiny_case/on", "tiny_case/on/dumps"])
def test_a_link_in_a_results_dir_is_refused_by_every_reader(tmp_path, capsys, linked):
    """gate, baseline merge and history append read the tree a linked scenario, run or dumps dir pointed to."""
    elsewhere = write_results(tmp_path / "elsewhere", "tiny_case").parent
    res = write_results(tmp_path / "res", "tiny_case").parent
    assert main(["baseline", "merge", str(elsewhere), "-o", str(tmp_path / "b.json")]) == 0
    shutil.rmtree(res / linked)
    (res / linked).symlink_to(elsewhere / linked)
    said = f"BASELINE ERROR: {res / linked}: a symbolic link in a results dir: results are read in place only"
    for argv in (["baseline", "merge", str(res), "-o", str(tmp_path / "b2.json")],
                 ["gate", "--baseline", str(tmp_path / "b.json"), "--results", str(res)]):  # fmt: skip
        capsys.readouterr()
        assert main(argv) == 2
        assert capsys.readouterr().err.strip().splitlines() == [said], argv
    assert main(["history", "append", str(tmp_path / "h.json"), str(res)]) == 2
    assert said.removeprefix("BASELINE ERROR: ") in capsys.readouterr().err


def _reusable(good_case: tuple[Any, CheckContext]) -> list[str]:
    scenario, ctx = good_case
    return reuse_argv(scenario, ctx.dir)


def test_a_linked_scenario_dir_is_refused(tmp_path):
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "tiny_case").symlink_to(tmp_path)
    from harness.training.runs import scenario_lock

    with pytest.raises(InfraError, match=r"res/tiny_case is a link or not a directory"):
        scenario_lock(ScenarioDir(tmp_path / "res" / "tiny_case"))


@pytest.mark.parametrize("value", ["fast", None, True, [1.0]])
def test_a_timer_that_is_not_a_number_is_one_line(good_case, value):
    _, ctx = good_case
    path = ctx.dir.run("on").metrics
    path.write_text(path.read_text() + json.dumps({"step": 3, "data": {"timing_s/step": value}}) + "\n")
    result = CHECKS["overhead"](ctx)  # the check fails with the line (a metrics problem is the check's input)
    assert result.problems == [f"{path}: step 3: timing_s/step is {value!r}, not a number of seconds"]


# --- the second battery -----------------------------------------------------------------------------------------

SHA = "1" + "a" * 39  # starts with a digit: the old version pattern tried every split of the 39 letters


def _git_repo(path: Path) -> Path:
    path.mkdir()
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for argv in (["init", "-q"], [*ident, "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *argv], cwd=path, check=True, capture_output=True)
    return path


def _err(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> str:
    """The one line a refused command printed: on stderr (argparse's after its usage lines), or the run's console
    line on stdout; paths as T."""
    out = capsys.readouterr()
    lines = [ln for ln in out.err.splitlines() if ": error: " in ln or not out.err.startswith("usage:")]
    if not lines:
        lines = [ln for ln in out.out.splitlines() if "ERROR" in ln and "\u2502" not in ln]  # not the table's
    (line,) = lines
    return line.replace(str(tmp_path), "T")


def test_spec_errors_name_the_variable_that_gave_them_and_refuse_line_breaks(monkeypatch, tmp_path):
    monkeypatch.setenv("HARNESS_VERL", "main~1")  # not a backtracking case: in this process that would hang
    with pytest.raises(TargetError, match=r"^HARNESS_VERL 'main~1': expected a version"):
        parse_target()
    with pytest.raises(TargetError, match=r"^--base 'main~2': expected a version"):
        parse_target("main~2", verl_option="--base")
    monkeypatch.delenv("HARNESS_VERL")
    monkeypatch.setenv("HARNESS_SERIES", "main\nREGRESSED fake")
    with pytest.raises(TargetError, match=r"^HARNESS_SERIES 'main\\nREGRESSED fake': holds a line break"):
        parse_target()
    monkeypatch.delenv("HARNESS_SERIES")
    with pytest.raises(TargetError, match=r"^--verl 'a{300}': expected a version"):
        parse_target("a" * 300)  # a name over 255 bytes: is_dir() raised ENAMETOOLONG
    with pytest.raises(TargetError, match=r"^--msprobe a{300}\.whl: no such wheel file$"):
        parse_target(None, "a" * 300 + ".whl")
    with pytest.raises(TargetError) as exc:
        parse_target(f"file://{tmp_path}/absent@main")  # a clone has no cwd: the line said "in None"
    assert str(exc.value).startswith(f"git clone --quiet --mirror -- file://{tmp_path}/absent ") and " in " not in str(
        exc.value
    )


def _capped(limit: int) -> None:  # in the child, before it runs: the issue's 3 GB address-space cap
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


@pytest.mark.integration
@pytest.mark.parametrize("option", ["--repeats", "--max-repeats"])
def test_a_billion_repeats_is_refused_before_the_run_order_is_built(tmp_path, option):
    """A child process under a 3 GB cap: the whole run order was built in memory before anything ran (a
    MemoryError traceback there; unbounded here)."""
    argv = [PY, "-m", "harness", "compare", str(write_scenario(tmp_path)), "--base", "0.9.1", "--head", "0.9.1"]
    proc = subprocess.run(
        [*argv, option, "1000000000", "--results", str(tmp_path / "res")],
        capture_output=True, text=True, timeout=120, check=False, preexec_fn=lambda: _capped(3 << 30),
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.splitlines()[-1] == (
        f"python -m harness compare: error: argument {option}: expected a whole number from 1 to 100 runs per side, "
        "got '1000000000'"
    )
    assert not (tmp_path / "res").exists()


def test_a_harness_bug_in_compare_is_an_error_not_a_verdict_on_verl(tmp_path, capsys, monkeypatch):
    """The crash compare.json once met on a bloated head (a figure measured on one side: ``median`` of nothing)
    left the interpreter's exit 1, which a CI reads as a regression of verl; it is the harness's: exit 2, one line
    naming the frame, the traceback kept in the results dir."""

    def judged_nothing(*_args, **_kwargs):
        return statistics.median([])

    monkeypatch.setattr("harness.pipeline.session.Session.compare", judged_nothing)
    results = tmp_path / "res"
    argv = ["compare", str(write_scenario(tmp_path)), "--base", "0.9.1", "--head", "0.9.1", "--results", str(results)]
    assert main(argv) == 2
    line = _err(capsys, tmp_path)
    assert line.startswith("HARNESS ERROR (not a verdict on verl): StatisticsError: no median for empty data at "), line
    assert line.endswith("(median); traceback in T/res/harness-error.txt"), line
    assert "judged_nothing" in (results / "harness-error.txt").read_text()


TWO_OF_ONE_NAME = (
    "T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir "
    "each (rename one)"
)


def _baseline(tmp_path: Path) -> tuple[Path, Path]:
    res = write_results(tmp_path / "res", "tiny_case", dumps=False).parent
    assert main(["baseline", "merge", str(res), "-o", str(tmp_path / "b.json")]) == 0
    return res, tmp_path / "b.json"


def _snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_a_schema_output_gets_its_parent_made(tmp_path):
    assert main(["schema", "-o", str(tmp_path / "missing" / "s.json")]) == 0  # FileNotFoundError before
    assert json.loads((tmp_path / "missing" / "s.json").read_text())["title"] == "Scenario"


def test_timing_mode_from_option_then_environment_and_a_bad_value_is_one_infrastructure_line(monkeypatch):
    from harness.errors import InfraError
    from harness.pipeline.options import gates_timing

    monkeypatch.delenv("HARNESS_TIMING", raising=False)
    assert gates_timing(None) is True and gates_timing("record") is False
    monkeypatch.setenv("HARNESS_TIMING", "record")  # what .ci/run sets, so the runs a test starts inherit it
    assert gates_timing(None) is False and gates_timing("gate") is True
    monkeypatch.setenv("HARNESS_TIMING", "off")
    with pytest.raises(InfraError, match=r"^HARNESS_TIMING='off': one of gate, record$"):
        gates_timing(None)


@pytest.mark.integration  # run --reuse probes the target environment (a harness.targets.probe process)
@pytest.mark.parametrize("host", ["garbage", "http://[::1", "tcp://host:notaport", "tcp://:99999", "fd://"])
def test_a_docker_host_that_is_no_address_is_bad_input_and_leaves_local_runs_alone(good_case, capsys, monkeypatch,
                                                                                   host):  # fmt: skip
    """``DOCKER_HOST`` garbage: the container sweep at every session's start raised (ValueError: a HARNESS ERROR,
    exit 2, for a run that needs no container). Now the sweep says it did not look, the local run goes on, and the
    docker executor's commands say the variable is bad input, one line, exit 2."""
    from harness.cli.console import sweep

    monkeypatch.setenv("DOCKER_HOST", host)
    said = f"DOCKER_HOST {host!r}: not a Docker daemon address ("
    capsys.readouterr()
    sweep()
    assert capsys.readouterr().out.startswith(f"harness: stale containers not looked for: {said}")
    reuse = _reusable(good_case)
    assert main(reuse) == 0
    assert main(["image", "build-cpu"]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"ERROR: {said}") and line.endswith(
        "name a daemon's socket (unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it"
    ), line
    assert main([*reuse[:-1], "--executor", "docker"]) == 2  # before any container: the variable, not the daemon
    assert f"ERROR: {said}" in " ".join(capsys.readouterr().out.split())  # rich wraps long lines
