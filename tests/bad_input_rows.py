"""Every bad input of the three hostile batteries, one row each: what is given, the exit code and the line it must
give. tests/test_bad_input_table.py runs every row as a regression test (in-process where it can, a child process
where a hang, a signal, a mount namespace or pytest itself is the case); benchmarks/bad_input_table.py prints them
as a table for people. One list, so a row added here is tested and shown.

A row's ``make(tmp, stack)`` prepares its inputs under ``tmp`` (``stack`` holds what must last while it runs: a lock
held by "another process") and returns the case: the harness's argv (leading ``NAME=value`` words set the
environment; ``pytest ...`` runs pytest), ``Raw(argv)`` for another program, or ``Fn`` (a call returning its exit
code and output). Its ``line`` must be one of the lines it prints, ``T`` standing for ``tmp`` and ``ROOT`` for the
repository, ``…`` for any text; nothing it prints may be a traceback, and no file there before it ran may change.

The classes (``CLASSES``) are the batteries' own: #16 (1.x), #30 (2.x), #57 (3.x), and the bad input of #71 (4.x);
each has three rows at least.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from builders import BASE, merge, reuse_argv, write_dump, write_good_case
from gate_builders import write_results

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable

CLASSES = {
    "1.1": "#16 writes outside the results dir",
    "1.2": "#16 dangerous container settings validate and run",
    "1.3": "#16 races: another harness run on the same results dir",
    "1.4": "#16 half-written files: a full disk",
    "1.5": "#16 tracebacks instead of one line",
    "1.6": "#16 accepted nonsense",
    "2.1": "#30 hangs",
    "2.2": "#30 counts unbounded at the edge",
    "2.3": "#30 tracebacks",
    "2.4": "#30 accepted nonsense: baselines, figures, calibration, policy",
    "2.5": "#30 scenarios",
    "2.6": "#30 options and their variables",
    "2.7": "#30 data loss: outputs that are inputs",
    "3.1": "#57 a directory where a file should be",
    "3.2": "#57 no run record",
    "3.3": "#57 nothing compared",
    "3.4": "#57 a top-level key twice",
    "3.5": "#57 a link in an output dir",
    "3.6": "#57 a link out of a dump tree",
    "3.7": "#57 a link in a results dir",
    "3.8": "#57 the catch-all handler on commands that read a list of results dirs",
    "3.9": "#57 input nested past the recursion limit",
    "3.10": "#57 bad input reported as a harness bug",
    "3.11": "#57 scenario names",
    "3.12": "#57 YAML aliases",
    "3.13": "#57 two scenarios of one name",
    "3.14": "#57 a lock wait",
    "3.15": "#57 a training that outlives its SIGKILLed harness",
    "3.16": "#57 a scenario its workload refuses under --executor",
    "4.1": "#71 a Ray cluster: its address, the executor it needs, a cluster out of reach",
    "5.1": "#82 forged annotations: a field from outside printed as a workflow command",
    "5.2": "#82 links followed on write",
    "5.3": "#82 secrets shown or stored",
    "5.4": "#82 outside servers steering or stalling the run",
    "5.5": "#82 options smuggled into tools",
    "5.6": "#82 inputs that are not what they claim",
    "5.7": "#82 tracebacks and harness errors on bad input",
    "5.8": "#82 leftovers and env keys a cluster refuses",
    "6.1": "#83 verl's multi-node runners: the submitter's answers, the watch's ends, verl's own RayJobs, the shared cache",
}


@dataclass(frozen=True)
class Raw:
    """Another program's argv (a mount namespace, a harness killed on purpose): always a child process."""

    argv: list[str]


Fn = Callable[[], tuple[int, str]]
Case = list[str] | Raw | Fn


@dataclass(frozen=True)
class Row:
    klass: str
    name: str
    make: Callable[[Path, contextlib.ExitStack], Case]
    code: int
    line: str
    child: bool = False  # run in a child process (a hang would stop the tests; pytest; a signal)


# --- builders --------------------------------------------------------------------------------------------------


def scenario(tmp: Path, text: str | bytes, name: str = "bad_case.yaml", sub: str = "scenarios") -> list[str]:
    path = tmp / sub / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["validate", str(path)]


def edited(**over: object) -> Callable[[Path, contextlib.ExitStack], Case]:
    return lambda t, _: scenario(t, yaml.safe_dump(merge(BASE, over), sort_keys=False))


def docker(**opts: object) -> Callable[[Path, contextlib.ExitStack], Case]:
    return edited(executor={"kind": "docker", "docker": opts})


def tiny(tmp: Path, name: str = "tiny_case") -> str:
    return scenario(tmp, yaml.safe_dump(merge(BASE, {}), sort_keys=False), f"{name}.yaml")[1]


def results(tmp: Path, name: str = "res", dumps: bool = False) -> Path:
    write_results(tmp / name, "tiny_case", dumps=dumps)
    return tmp / name


def merged(tmp: Path) -> tuple[Path, Path]:
    """A results dir and its baseline, as ``baseline merge`` writes it."""
    from harness.gate.baseline import build

    res, baseline = results(tmp), tmp / "baseline.json"
    build([res]).write(baseline)
    return res, baseline


def file_at(tmp: Path, name: str = "file") -> Path:
    (tmp / name).write_text("x")
    return tmp / name


def git_repo(tmp: Path, verl: bool = False) -> Path:
    repo = tmp / "verl"
    repo.mkdir()
    if verl:
        (repo / "verl").mkdir()
        (repo / "verl" / "__init__.py").write_text("")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    commit = [*ident, "commit", "-q", "--allow-empty", "-m", "x"]
    for argv in (["init", "-q"], ["add", "-A"], commit, commit):
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    return repo


def junit_file(tmp: Path) -> Path:
    path = tmp / "a.xml"
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="x"><testcase name="a"/></testsuite></testsuites>'
    )
    return path


def drop(key: str) -> Callable[[dict], dict]:
    return lambda d: {k: v for k, v in d.items() if k != key}


def setin(path: str, value: object) -> Callable[[dict], dict]:
    def f(d: dict) -> dict:
        node = d
        *head, last = path.split(".")
        for k in head:
            node = node[k]
        node[last] = value
        return d

    return f


def figure(name: str, value: object, check: str = "overhead") -> Callable[[dict], dict]:
    def f(d: dict) -> dict:
        d["checks"][check]["figures"][name] = value
        return d

    return f


def corrupt(content: Callable[[dict], object] | bytes, command: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """A results.json made bad, then read by gate, baseline merge or report."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        res, baseline = merged(tmp)
        path = res / "tiny_case" / "results.json"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(json.dumps(content(json.loads(path.read_text()))))
        return {
            "gate": ["gate", "--baseline", str(baseline), "--results", str(res)],
            "merge": ["baseline", "merge", str(res), "-o", str(tmp / "b2.json")],
            "report": ["report", str(res), "--out", str(tmp / "report")],
        }[command]

    return make


def bad_baseline(mutate: Callable[[dict], object]) -> Callable[[Path, contextlib.ExitStack], Case]:
    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        res, baseline = merged(tmp)
        doc = json.loads(baseline.read_text())
        mutate(doc["scenarios"]["tiny_case"])
        baseline.write_text(json.dumps(doc))
        return ["gate", "--baseline", str(baseline), "--results", str(res)]

    return make


def every(key: str, value: object) -> Callable[[dict], object]:
    return lambda sb: sb[key].update(dict.fromkeys(sb[key], value))


def compare(*opts: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    return lambda t, _: ["compare", tiny(t), "--base", "0.9.1", "--head", "0.9.1", *opts]


def reused(mutate: Callable[[Path], object]) -> Callable[[Path, contextlib.ExitStack], Case]:
    """``run --reuse`` of a good case (no training: its trainings.json says they were run) after ``mutate`` of its
    scenario dir."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        scenario, sdir = write_good_case(tmp)
        argv = reuse_argv(scenario, sdir)
        mutate(sdir.root)
        return argv

    return make


def held(argv: Callable[[Path], list[str]], wait: str = "0.5") -> Callable[[Path, contextlib.ExitStack], Case]:
    """``argv`` while another process (here: a lock of its own, on its own descriptor) holds tiny_case's results
    dir, HARNESS_LOCK_WAIT_S=``wait``."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> Case:
        from filelock import FileLock

        (tmp / "res").mkdir(exist_ok=True)
        stack.enter_context(FileLock(str(tmp / "res" / ".tiny_case.lock"), is_singleton=False))
        return [f"HARNESS_LOCK_WAIT_S={wait}", *argv(tmp)]

    return make


def dump_json(tree: Path) -> Path:
    return tree / "step_2" / "actor_update" / "step0" / "rank0" / "dump.json"


def numerics(mutate: Callable[[Path, Path], object], files: bool = False, **opts: str) -> Callable[..., Case]:
    """``numerics BASE HEAD`` of two msprobe-shaped trees (``files``: their step 2 actor_update dump.json) after
    ``mutate(base, head)``; ``opts``: more options (``--results`` defaults to T/out)."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        base, head = (tmp / side for side in ("base", "head"))
        for tree in (base, head):
            for stage in ("actor_update", "ref_compute_log_prob"):
                write_dump(tree, 2, stage, 0)
        mutate(base, head)
        sides = [str(dump_json(base)), str(dump_json(head))] if files else [str(base), str(head)]
        extra = [a for k, v in opts.items() for a in (f"--{k.replace('_', '-')}", v.replace("T", str(tmp), 1))]
        results = [] if "results" in opts else ["--results", str(tmp / "out")]
        return ["numerics", *sides, *results, *extra]

    return make


def moved(base: Path, head: Path) -> None:
    """One of head's entries with its statistics moved: a stage that diverges."""
    path = dump_json(head)
    doc = json.loads(path.read_text())
    doc["data"]["Functional.linear.1.forward"]["output"][0] |= {"Max": 9.0, "Norm": 20.0}
    path.write_text(json.dumps(doc))


def rename_all(tree: Path) -> None:
    for path in tree.rglob("dump.json"):
        doc = json.loads(path.read_text())
        doc["data"] = {f"Renamed.{k}": v for k, v in doc["data"].items()}
        path.write_text(json.dumps(doc))


def empty_data(tree: Path) -> None:
    for path in tree.rglob("dump.json"):
        path.write_text('{"task": "statistics", "level": "L1", "data": {}}')


def key_twice(key: str, value: str) -> Callable[[Path, Path], object]:
    """A second top-level ``key`` after the whole document's first (json.load keeps the last, a stream reads the
    first)."""

    def mutate(base: Path, head: Path) -> None:
        path = dump_json(head)
        text = path.read_text().rstrip()
        path.write_text(text[:-1] + f', "{key}": {value}}}')

    return mutate


def linked(where: str) -> Callable[[Path, Path], object]:
    """Head's ``where`` (under step_2/actor_update/step0) made a link to a file or dir outside the trees."""

    def mutate(base: Path, head: Path) -> None:
        target = head / "step_2" / "actor_update" / "step0" / where
        outside = head.parent / f"outside-{head.name}"
        if where.endswith("stack.json"):
            outside.write_text('{"0": [["Functional.linear.0.forward"], ["HOST SECRET"]]}')
        elif where.endswith(".json"):
            shutil.copy(target, outside)
        else:
            shutil.copytree(target, outside)
        if target.is_dir():
            shutil.rmtree(target)
        target.unlink(missing_ok=True)
        target.symlink_to(outside)

    return mutate


def stack_linked(tmp: Path, stack: contextlib.ExitStack) -> Case:
    """Head's stack.json a link to a host file: not read (its text reached the CSVs, uploaded as artifacts)."""
    numerics(linked("rank0/stack.json"))(tmp, stack)

    def call() -> tuple[int, str]:
        from harness.gate.numerics.compare import compare_numerics

        report = compare_numerics([tmp / "base"], tmp / "head", tmp / "out", [])
        csvs = "".join(p.read_text() for p in (tmp / "out").rglob("*.csv"))
        stages = "; ".join(s.line() for s in report.head_vs_base.stages)
        return (2 if report.nothing_compared() else 0), f"{stages}; the host file's text in the CSVs: {'HOST' in csvs}"

    return call


def out_link(where: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """numerics into T/out, where ``where`` (under it) links to a directory elsewhere, a file in it to keep."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> Case:
        argv = numerics(moved)(tmp, stack)  # a stage diverges: msprobe -da runs, its log under OUT/msprobe
        elsewhere = tmp / "elsewhere"
        elsewhere.mkdir()
        (elsewhere / "keep.txt").write_text("keep me")
        link = tmp / "out" / where
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(elsewhere)
        return argv

    return make


def bug_in(command: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """A harness bug (an exception nobody raised on purpose) in a command that reads a list of results dirs."""

    def make(tmp: Path, stack: contextlib.ExitStack) -> Case:
        import harness.cli.baseline
        import harness.cli.gate
        import harness.cli.report

        res, baseline = merged(tmp)
        module, name, argv = {
            "baseline merge": (harness.cli.baseline, "cmd_merge", ["baseline", "merge", str(res), "-o", f"{tmp}/b.j"]),
            "calibrate": (harness.cli.baseline, "cmd_calibrate", ["calibrate", str(res), str(res), "-o", f"{tmp}/c.j"]),
            "gate": (harness.cli.gate, "cmd_gate", ["gate", "--baseline", str(baseline), "--results", str(res)]),
            "report": (harness.cli.report, "cmd_report", ["report", str(res), "--out", str(tmp / "rep")]),
        }[command]
        original = getattr(module, name)

        def bug(*_: object, **__: object) -> None:
            raise RuntimeError("a harness bug")

        setattr(module, name, bug)
        stack.callback(setattr, module, name, original)
        return argv

    return make


def nested(tmp: Path, where: str) -> Case:
    """A file of the given kind nested 100,000 levels deep, read by the command that reads it."""
    deep = "[" * 100_000 + "]" * 100_000
    if where == "dump":
        return numerics(lambda b, h: dump_json(h).write_text('{"data": ' + deep + "}"))(tmp, contextlib.ExitStack())
    if where == "stack":
        return numerics(lambda b, h: (dump_json(h).parent / "stack.json").write_text(deep))(tmp, contextlib.ExitStack())
    res, baseline = merged(tmp)
    baseline.write_text(deep)
    return ["gate", "--baseline", str(baseline), "--results", str(res)]


def anchors(levels: int, width: int) -> Callable[[Path, contextlib.ExitStack], Case]:
    """Nested YAML aliases: ``width ** levels`` nodes from a kilobyte or two."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        rows = [f"a0: &a0 [{', '.join(['x'] * width)}]"]
        rows += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
        return scenario(tmp, yaml.safe_dump(BASE, sort_keys=False) + "\n".join(rows) + "\n")

    return make


def two_names(command: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        a, b = tiny(tmp / "a"), tiny(tmp / "b")
        return {
            "validate": ["validate", a, b],
            "dry-run": ["dry-run", a, b],
            "run": ["run", a, b, "--results", str(tmp / "res")],
            "pytest": ["pytest", "--collect-only", "-q", a, b],
        }[command]

    return make


def refused(name: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """pytest of a device-cpu verl_ppo scenario under --executor docker: a skip with its reason, nothing run."""
    return lambda t, _: ["pytest", "-q", "-rs", "--executor", "docker", f"--harness-results={t / 'r'}",
                         str(ROOT / "scenarios" / f"{name}.yaml")]  # fmt: skip


def in_a_full_disk(command: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """``command`` (shell, $D the full tmpfs) in a private mount namespace whose T/full is a 256 KB tmpfs filled
    first: a real ENOSPC without root on the host."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        full = tmp / "full"
        full.mkdir()
        results(tmp)
        fill = f"head -c 10000000 /dev/zero > {full}/filler 2>/dev/null; "
        script = f"mount -t tmpfs -o size=256k tmpfs {full} && {fill}D={full}; T={tmp}; PY={PY}; {command}"
        return Raw(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script])

    return make


ENOSPC_RECORD = (
    '$PY -c "from pathlib import Path; from harness.errors import HarnessError, one_line; from harness.artifacts.record '
    "import ExecResult, RunRecord\ntry: RunRecord(mode='on', executor='local', argv=['python'], result=ExecResult("
    "exit_code=0, wall_s=1.0)).write(Path('$D/run.json'))\nexcept HarnessError as e: print(one_line(e))\"; exit 2"
)

# A training that leaves what Ray's daemons leave: one process in a process group of its own (setpgid), one
# re-parented (its parent exits at once), both in the training's session; each appends to a file while it lives.
ESCAPING = """
import os, sys, time
from pathlib import Path

beats, kinds = Path(sys.argv[1]), sys.argv[2].split(",")


def beat(name):
    while True:
        with open(beats / name, "a") as f:
            f.write("x")
        time.sleep(0.05)


if "grouped" in kinds and os.fork() == 0:
    os.setpgid(0, 0)  # a process group of its own, like Ray's gcs_server and raylet
    beat(f"grouped.{os.getpid()}")
if "orphan" in kinds and os.fork() == 0:
    if os.fork() == 0:
        beat(f"orphan.{os.getpid()}")  # re-parented once its parent has gone
    os._exit(0)
beat(f"main.{os.getpid()}")
"""

# The harness (the local executor, in a process of its own) starts the training, waits for its processes to beat,
# is SIGKILLed, then this says how many of them are left after the watchdog's grace (10 s a signal).
SIGKILLED = """
import os, signal, subprocess, sys, time
from pathlib import Path

work, kinds = Path(sys.argv[1]), sys.argv[2]
(work / "escaping.py").write_text(sys.argv[3])
(work / "beats").mkdir()
harness = subprocess.Popen([sys.executable, "-c", '''
import sys
from pathlib import Path
from harness.artifacts.rundir import RunDir
from harness.scenario.model import ExecutorSettings
from harness.training.executors.local import LocalExecutor
from harness.training.launch import Launch
work = Path(sys.argv[1])
run = RunDir(work / "run")
run.root.mkdir()
LocalExecutor().execute(Launch("escaping", [str(work / "beats"), sys.argv[2]], {}, work), run, ExecutorSettings(), {})
''', str(work), kinds])


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[0] != b"Z"
    except OSError:
        return False


deadline = time.monotonic() + 60
while len(list((work / "beats").iterdir())) < len(kinds.split(",")) and time.monotonic() < deadline:
    time.sleep(0.1)
pids = [int(p.name.split(".")[1]) for p in (work / "beats").iterdir()]
harness.send_signal(signal.SIGKILL)
harness.wait()
deadline = time.monotonic() + 25
while any(map(alive, pids)) and time.monotonic() < deadline:
    time.sleep(0.1)
left = [p for p in pids if alive(p)]
for p in left:
    os.kill(p, signal.SIGKILL)
said = [ln for ln in (work / "run" / "train.log").read_text().splitlines() if "the harness is gone" in ln]
print(f"{len(left)} of {len(pids)} training processes left after the harness was SIGKILLed; {said[0] if said else ''}")
sys.exit(1 if left else 0)
"""


def sigkilled(kinds: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    return lambda t, _: Raw([PY, "-c", SIGKILLED, str(t), kinds, textwrap.dedent(ESCAPING)])


def link_results(tmp: Path, _: contextlib.ExitStack) -> Case:
    res = results(tmp)
    (tmp / "outside.json").write_text('{"keep": true}')
    (res / "tiny_case" / "results.json").unlink()
    (res / "tiny_case" / "results.json").symlink_to(tmp / "outside.json")
    return ["report", str(res), "--out", str(tmp / "report")]


def results_link(tmp: Path, _: contextlib.ExitStack) -> Case:
    def call() -> tuple[int, str]:
        from harness.artifacts.record import ExecResult, RunRecord
        from harness.artifacts.rundir import ScenarioDir
        from harness.checks.base import CheckResult
        from harness.pipeline.session import results_doc
        from harness.scenario.loader import load_scenario
        from harness.training.runs import ScenarioRuns

        sdir = ScenarioDir(tmp / "res" / "tiny_case")
        sdir.root.mkdir(parents=True)
        outside = tmp / "outside.txt"
        outside.write_text("keep me")
        sdir.results.symlink_to(outside)
        rec = RunRecord(mode="off", executor="local", argv=["python"], result=ExecResult(exit_code=0, wall_s=1.0))
        runs = ScenarioRuns(sdir, "s", {"off": rec}, 0.0, target={"block": None, "environment": {}})
        results_doc(load_scenario(tiny(tmp)), runs, [CheckResult("disk")]).write(sdir.results)
        return 0, f"outside file still {outside.read_text()!r}; results.json a link: {sdir.results.is_symlink()}"

    return call


def metrics_of(value: object) -> Callable[[Path, contextlib.ExitStack], Case]:
    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        def call() -> tuple[int, str]:
            from harness import outcomes
            from harness.artifacts.rundir import ScenarioDir
            from harness.checks import CHECKS
            from harness.checks.base import CheckContext
            from harness.scenario.loader import load_scenario

            sc = load_scenario(tiny(tmp))
            sdir = ScenarioDir(tmp / "res" / "tiny_case")
            for mode in ("off", "on"):
                path = sdir.run(mode).metrics
                path.parent.mkdir(parents=True)
                rows = [{"step": n, "data": {"timing_s/step": 1.0 if n != 3 else value}} for n in range(1, 6)]
                path.write_text("".join(json.dumps(r) + "\n" for r in rows))
            result = CHECKS["overhead"](CheckContext(sc, sdir))
            return outcomes.check_exit(outcomes.check_outcome(result)), "\n".join(result.problems)

        return call

    return make


def root_user(tmp: Path, _: contextlib.ExitStack) -> Case:
    from harness.scenario.settings.docker import DockerRuntime

    return lambda: (0, "; ".join(DockerRuntime(user="0:0").risks("cpu", host_uid=1000)))


def fifo(tmp: Path, _: contextlib.ExitStack) -> Case:
    (tmp / "scenarios").mkdir()
    os.mkfifo(tmp / "scenarios" / "fifo.yaml")
    return ["validate", str(tmp / "scenarios" / "fifo.yaml")]


def record_gone(how: str, mode: str = "off") -> Callable[[Path], object]:
    def mutate(sdir: Path) -> None:
        record = sdir / mode / "run.json"
        text = record.read_text()
        record.unlink()
        if how == "another schema":
            record.write_text(json.dumps(json.loads(text) | {"schema_version": 9}))
        elif how == "a link":
            (sdir.parent.parent / "elsewhere.json").write_text(text)
            record.symlink_to(sdir.parent.parent / "elsewhere.json")

    return mutate


def a_dir_named(name: str, level: str = "rank0") -> Callable[[Path], object]:
    """A directory named ``name`` where msprobe writes that file (in a rank dir of step 2's actor_update)."""

    def mutate(sdir: Path) -> None:
        path = sdir / "on" / "dumps" / "step_2" / "actor_update" / "step0" / level / name
        path.unlink(missing_ok=True)
        path.mkdir()

    return mutate


def run_dir_linked(where: str) -> Callable[[Path], object]:
    def mutate(sdir: Path) -> None:
        elsewhere = sdir.parent.parent / "elsewhere"
        shutil.copytree(sdir / where, elsewhere)
        shutil.rmtree(sdir / where)
        (sdir / where).symlink_to(elsewhere)

    return mutate


def step_linked_to_root(sdir: Path) -> None:
    (sdir / "on" / "dumps" / "step_9").symlink_to("/")


def results_tree_linked(where: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    """gate, baseline merge and history append of a results dir whose ``where`` links to another one."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        elsewhere = write_results(tmp / "elsewhere", "tiny_case").parent
        res = write_results(tmp / "res", "tiny_case").parent
        shutil.rmtree(res / where)
        (res / where).symlink_to(elsewhere / where)
        return ["history", "append", str(tmp / "h.json"), str(res)]

    return make


def docker_host(value: str) -> Callable[[Path, contextlib.ExitStack], Case]:
    return lambda t, _: [f"DOCKER_HOST={value}", "image", "build-cpu"]


def bisect_results_under_a_file(tmp: Path, _: contextlib.ExitStack) -> Case:
    repo = git_repo(tmp, verl=True)
    argv = ["bisect", tiny(tmp), "--verl-repo", str(repo), "--good", "HEAD~1", "--bad", "HEAD"]
    return [*argv, "--results", str(file_at(tmp) / "x")]


SHA = "1" + "a" * 39  # a sha that starts with a digit: the old version pattern's worst case (0.8 s at 24 characters)
REAL_CPU = str(ROOT / "scenarios" / "real_fsdp_l1.yaml")  # verl's trainer, device cpu: the local executor only
STAGE_OFF = {"required_patterns": {"ref_compute_log_prob": ["^x"]}}
FILLED = "$PY -m harness {} && exit 0 || exit $?"


def history_linked(dangling_link: bool) -> Callable[[Path, contextlib.ExitStack], Case]:
    """history append to a HISTORY that is a link out of the dir: its target must be neither created nor written."""

    def make(tmp: Path, _: contextlib.ExitStack) -> Case:
        target = tmp / "outside" / "made.json"
        target.parent.mkdir()
        if not dangling_link:
            target.write_text("{}")
        (tmp / "h.json").symlink_to(target)
        return ["history", "append", str(tmp / "h.json"), str(results(tmp))]

    return make


def history_there(tmp: Path) -> list[str]:
    """history check of an empty history that exists."""
    (tmp / "h.json").write_text('{"schema_version": 4}')
    return ["history", "check", str(tmp / "h.json")]


def dangling(tmp: Path) -> Path:
    (tmp / "h.json.link").symlink_to(tmp / "nowhere" / "check.json")
    return tmp / "h.json.link"


def _rows() -> list[Row]:
    rows: list[Row] = []

    def add(klass: str, name: str, make: Callable[[Path, contextlib.ExitStack], Case], code: int, line: str,
            child: bool = False) -> None:  # fmt: skip
        rows.append(Row(klass, name, make, code, line, child))

    def argv(*words: str) -> Callable[[Path, contextlib.ExitStack], Case]:
        """argv words, ``{T}`` the row's dir, ``{S}`` a valid scenario there, ``{R}`` a results dir, ``{F}`` a file."""

        def make(tmp: Path, _: contextlib.ExitStack) -> Case:
            names = {"T": str(tmp), "ROOT": str(ROOT)}
            text = " ".join(words)
            if "{S}" in text:
                names["S"] = tiny(tmp)
            if "{R}" in text:
                names["R"] = str(results(tmp))
            if "{F}" in text:
                names["F"] = str(file_at(tmp))
            if "{X}" in text:
                names["X"] = str(junit_file(tmp))
            if "{V}" in text:
                names["V"] = str(git_repo(tmp))
            if "{B}" in text:
                names["R"], names["B"] = (str(p) for p in merged(tmp))
            if "{R2}" in text:
                names["R2"] = str(results(tmp, "r2"))
            return [w.format(**names) for w in words]

        return make

    # --- #16 -------------------------------------------------------------------------------------------------
    add(
        "1.1",
        "report: results.json `scenario: ../x`",
        corrupt(setin("scenario", "../x"), "report"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: scenario: String should match pattern '^[a-z0-9][a-z0-9_]{0,99}$': not a harness results.json",
    )
    add(
        "1.1",
        "report: results.json `scenario: /tmp/abs`",
        corrupt(setin("scenario", "/tmp/abs"), "report"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: scenario: String should match pattern '^[a-z0-9][a-z0-9_]{0,99}$': not a harness results.json",
    )
    add(
        "1.1",
        "report: results.json `scenario: a/b`",
        corrupt(setin("scenario", "a/b"), "report"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: scenario: String should match pattern '^[a-z0-9][a-z0-9_]{0,99}$': not a harness results.json",
    )
    add(
        "1.1",
        "report: results.json a link to an outside file",
        link_results,
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: is a symbolic link (not followed)",
    )
    add(
        "1.1",
        "results.json (ResultsDoc.write) a link to an outside file",
        results_link,
        0,
        "outside file still 'keep me'; results.json a link: False",
    )
    add(
        "1.1",
        "run --reuse: a step dir of the dumps linked to /",
        reused(step_linked_to_root),
        1,
        "- layout: unexpected path step_9 under the dump root (not step_N/stage/step0/rankR)",
    )
    refusal = "T/scenarios/bad_case.yaml:1: (top level): executor.docker: refused, "
    unknown = (": unknown field (allowed: ascend_runtime, cpus, env, gpus, image, image_kind, memory, mounts, network, "
               "npu_devices, pass_env, shm_size, unsafe, unsafe_reason, user)")  # fmt: skip
    for name, opts, line in [
        ("host / mounted rw", {"mounts": [{"source": "/", "target": "/host", "read_only": False}]},
         refusal + "mounts: the host's / (/) (or set unsafe: true and unsafe_reason: WHY)"),
        ("the docker socket", {"mounts": [{"source": "/var/run/docker.sock", "target": "/s"}]},
         refusal + "mounts: the docker socket (/var/run/docker.sock): control of the host (or set unsafe: true and "
         "unsafe_reason: WHY)"),
        ("/var/run (holds the socket)", {"mounts": [{"source": "/var/run", "target": "/r"}]},
         refusal + "mounts: the docker socket (/var/run): control of the host (or set unsafe: true and unsafe_reason: "
         "WHY)"),
        ("LD_PRELOAD in env", {"env": {"LD_PRELOAD": "/x.so"}},
         refusal + "env/pass_env LD_PRELOAD: loader or interpreter variables (or set unsafe: true and unsafe_reason: "
         "WHY)"),
        ("PYTHONPATH passed", {"pass_env": ["PYTHONPATH"]},
         refusal + "env/pass_env PYTHONPATH: loader or interpreter variables (or set unsafe: true and unsafe_reason: "
         "WHY)"),
        ("npu_devices on a cpu scenario", {"npu_devices": [0]},
         refusal + "npu_devices/gpus/ascend_runtime on a cpu scenario (or set unsafe: true and unsafe_reason: WHY)"),
        ("host network, no accelerators", {"network": "host"},
         refusal + "network: host without accelerators (none is enough) (or set unsafe: true and unsafe_reason: WHY)"),
        ("privileged: true", {"privileged": True}, "T/scenarios/bad_case.yaml:25: executor.docker.privileged" + unknown),
        ("cap_add", {"cap_add": ["SYS_ADMIN"]}, "T/scenarios/bad_case.yaml:25: executor.docker.cap_add" + unknown),
        ("unsafe: true, no reason", {"network": "host", "unsafe": True},
         "T/scenarios/bad_case.yaml:1: (top level): executor.docker.unsafe: true needs executor.docker.unsafe_reason "
         "(why the risks are needed)"),
    ]:  # fmt: skip
        add("1.2", f"validate: docker {name}", docker(**opts), 2, line)
    add("1.2", "validate: docker unsafe: true with a reason (accepted)",
        docker(network="host", unsafe=True, unsafe_reason="debug"), 0, "ok  bad_case")  # fmt: skip
    add(
        "1.2",
        "validate: docker user 0:0 (the harness runs as root here: accepted)",
        docker(user="0:0"),
        0,
        "ok  bad_case",
    )
    add(
        "1.2",
        "docker risks: user 0:0, the harness as uid 1000",
        root_user,
        0,
        "user 0:0: root in the container while the harness runs as uid 1000",
    )
    add("1.3", "run while another run holds the results dir", held(lambda t: ["run", tiny(t), "--results",
        str(t / "res")]), 2, "INFRASTRUCTURE ERROR (not a check verdict): T/res/.tiny_case.lock: held by another harness run for 0.5 s (HARNESS_LOCK_WAIT_S): let it finish, or use another --results dir")  # fmt: skip
    add("1.3", "run --reuse while another run holds the results dir", held(lambda t: ["run", tiny(t), "--results",
        str(t / "res"), "--reuse"]), 2, "INFRASTRUCTURE ERROR (not a check verdict): T/res/.tiny_case.lock: held by another harness run for 0.5 s (HARNESS_LOCK_WAIT_S): let it finish, or use another --results dir")  # fmt: skip
    add("1.3", "pytest while another run holds the results dir", held(lambda t: ["pytest", "-q", tiny(t),
        f"--harness-results={t / 'res'}"]), 1, "INFRASTRUCTURE ERROR (not a check verdict): T/res/.tiny_case.lock: held by another harness run for 0.5 s (HARNESS_LOCK_WAIT_S): let it finish, or use another --results dir", child=True)  # fmt: skip
    add(
        "1.4",
        "a full disk writing run.json",
        in_a_full_disk(ENOSPC_RECORD),
        2,
        "INFRASTRUCTURE ERROR (not a check verdict): no space left writing T/full/run.json (… bytes): 0.0 MB free on T/full; free some space, rerun",
        child=True,
    )
    add("1.4", "a full disk: schema -o on it", in_a_full_disk(FILLED.format("schema -o $D/s.json")), 2, "INFRASTRUCTURE ERROR (not a check verdict): no space left writing T/full/s.json (… bytes): 0.0 MB free on T/full; free some space, rerun",
        child=True)  # fmt: skip
    add("1.4", "a full disk: baseline merge -o on it", in_a_full_disk(FILLED.format("baseline merge $T/res -o "
        "$D/b.json")), 2, "INFRASTRUCTURE ERROR (not a check verdict): no space left writing T/full/b.json (… bytes): 0.0 MB free on T/full; free some space, rerun", child=True)  # fmt: skip
    add(
        "1.5",
        "validate: non-UTF-8 file",
        lambda t, _: scenario(t, b"description: \xff\xfe\n"),
        2,
        "T/scenarios/bad_case.yaml: not UTF-8 text (byte 13: b'\\xff')",
    )
    add(
        "1.5",
        "validate: binary file",
        lambda t, _: scenario(t, bytes(range(256)) * 4),
        2,
        "T/scenarios/bad_case.yaml: not UTF-8 text (byte 128: b'\\x80')",
    )
    add(
        "1.5",
        "validate: 50,000 nested [",
        lambda t, _: scenario(t, "[" * 50_000),
        2,
        "T/scenarios/bad_case.yaml:1: YAML nested too deeply: flatten the document",
    )
    add(
        "1.5",
        "validate: file over 1 MB",
        lambda t, _: scenario(t, "description: " + "x" * (1 << 20) + "\n"),
        2,
        "T/scenarios/bad_case.yaml: 1048590 bytes, over the 1048576 byte limit",
    )
    add(
        "1.5",
        "validate: dir name with ':'",
        lambda t, _: scenario(t, "engine: x\n", sub="a:b/scenarios"),
        2,
        "T/a:b/scenarios/bad_case.yaml:1: engine: Input should be 'fsdp' or 'megatron' (got 'x')",
    )
    add(
        "1.5",
        "validate: steps: 100000000",
        edited(steps=100_000_000),
        2,
        "T/scenarios/bad_case.yaml:3: steps: Input should be less than or equal to 10000 (got 100000000)",
    )
    add("1.5", "validate: FIFO named .yaml", fifo, 2, "T/scenarios/fifo.yaml: not a regular file (a FIFO)")
    add(
        "1.5",
        "validate: /dev/zero",
        lambda t, _: ["validate", "/dev/zero"],
        2,
        "/dev/zero: not a regular file (a device)",
    )
    add("1.5", "validate: a directory named .yaml", lambda t, _: (t / "d.yaml").mkdir() or ["validate", str(t /
        "d.yaml")], 2, "no scenario files found in T/d.yaml")  # fmt: skip
    add(
        "1.5",
        "validate: timestamp 2024-13-45",
        lambda t, _: scenario(t, "description: 2024-13-45\n"),
        2,
        "T/scenarios/bad_case.yaml: YAML value error: month must be in 1..12",
    )
    add("1.5", "validate: !!python/object tag", lambda t, _: scenario(t, "description: !!python/object:os.system {}\n"), 2, "T/scenarios/bad_case.yaml:1: YAML syntax error: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object:os.system'")  # fmt: skip
    add("1.5", "junit-merge: truncated XML", lambda t, _: (t / "a.xml").write_text('<?xml version="1.0"?><testsuites>'
        '<testsuite name="x"><testcase name="a" cl') and ["junit-merge", str(t / "out.xml"), str(t / "a.xml")], 2, "BASELINE ERROR: T/a.xml: not a JUnit XML file (unclosed token: line 1, column 53)")  # fmt: skip
    add(
        "1.5",
        "run --results FILE",
        argv("run", "{S}", "--results", "{F}"),
        2,
        "ERROR: --results T/file: not a directory",
    )
    add(
        "1.5",
        "gate --baseline FILE --results FILE",
        argv("gate", "--baseline", "{F}", "--results", "{F}"),
        2,
        "BASELINE ERROR: T/file: not valid JSON (Expecting value: line 1 column 1 (char 0)): a truncated or corrupt baseline.json",
    )
    add("1.5", 'metrics `"timing_s/step": "fast"`', metrics_of("fast"), 1,
        "T/res/tiny_case/off/metrics.jsonl: step 3: timing_s/step is 'fast', not a number of seconds")  # fmt: skip
    add("1.5", 'metrics `"timing_s/step": null`', metrics_of(None), 1,
        "T/res/tiny_case/off/metrics.jsonl: step 3: timing_s/step is None, not a number of seconds")  # fmt: skip
    bad = "BASELINE ERROR: T/res/tiny_case/results.json: "
    harness = ": not a harness results.json"
    for cmd in ("gate", "merge", "report"):
        for name, content, line in [
            ("results.json empty", b"", "not valid JSON (Expecting value: line 1 column 1 (char 0)): a truncated or "
             "corrupt results.json"),
            ("results.json truncated", b'{"scenario": "tiny_case", "checks": {', "not valid JSON (Expecting property "
             "name enclosed in double quotes: line 1 column 38 (char 37)): a truncated or corrupt results.json"),
            ("results.json binary", bytes(range(256)), "not UTF-8 text (byte 128: b'\\x80')"),
            ("results.json `[]`", lambda d: [], "(top level): Input should be a valid dictionary or instance of "
             "ResultsDoc" + harness),
            ("results.json `null`", lambda d: None, "(top level): Input should be a valid dictionary or instance of "
             "ResultsDoc" + harness),
            ("no scenario", drop("scenario"), "scenario: Field required" + harness),
            ("checks a list", setin("checks", []), "checks: Input should be a valid dictionary" + harness),
            ("check passed 'yes'", setin("checks.overhead.passed", "yes"), "checks.overhead.passed: Input should be a "
             "valid boolean" + harness),
            ("figures a list", setin("checks.overhead.figures", [1]), "checks.overhead.figures: Input should be a "
             "valid dictionary" + harness),
            ("figure a dict", figure("overhead.wall.profiled", {"a": 1}), "checks.overhead.figures.overhead.wall."
             "profiled.float: Input should be a valid number (and 2 more)" + harness),
            ("runs a list", setin("runs", [1]), "runs: Input should be a valid dictionary" + harness),
            ("exit_code 'x'", setin("runs.off", {"exit_code": "x"}), "runs.off.exit_code: Input should be a valid "
             "integer" + harness),
            ("settings a string", setin("settings", "s"), "settings: Input should be a valid dictionary" + harness),
            ("environment a list", setin("environment", []), "environment: Input should be a valid dictionary" +
             harness),
        ]:  # fmt: skip
            add("1.5", f"{cmd}: {name}", corrupt(content, cmd), 2, bad + line)
    add("1.6", "validate: duplicate key (executor twice)", lambda t, _: scenario(t, yaml.safe_dump(BASE, sort_keys=False)
        + "executor: {kind: local}\nexecutor: {kind: docker}\n"), 2, "T/scenarios/bad_case.yaml:23: YAML syntax error: duplicate key 'executor' (first at line 22)")  # fmt: skip
    add(
        "1.6",
        "validate: timeout_s: .inf",
        edited(executor={"timeout_s": float("inf")}),
        2,
        "T/scenarios/bad_case.yaml:23: executor.timeout_s: Input should be a finite number (got inf)",
    )
    add(
        "1.6",
        "validate: max_per_step: true",
        edited(budgets={"disk": {"max_per_step": True}}),
        2,
        "T/scenarios/bad_case.yaml:21: budgets.disk.max_per_step: could not parse value and unit from byte string (got True)",
    )
    add(
        "1.6",
        "validate: world_size: true",
        edited(world_size=True),
        2,
        "T/scenarios/bad_case.yaml:2: world_size: Input should be a valid integer (got True)",
    )
    add("1.6", "validate: max_profiled_ratio: .nan", edited(budgets={"overhead": {"max_profiled_ratio": math.nan}}), 2, "T/scenarios/bad_case.yaml:17: budgets.overhead.max_profiled_ratio: Input should be a finite number (got nan)")  # fmt: skip

    # --- #30 -------------------------------------------------------------------------------------------------
    add(
        "2.1",
        "target --verl <40-hex sha>~1",
        argv("target", "--verl", SHA + "~1"),
        2,
        "TARGET ERROR: --verl '1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa~1': expected a version (0.9.1), a checkout dir, <repository path or URL>@<ref>, or a .whl file",
        child=True,
    )
    add("2.1", "target --msprobe 26.2.0-a x38!", argv("target", "--msprobe", "26.2.0-" + "a" * 38 + "!"), 2, "TARGET ERROR: --msprobe '26.2.0-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!': expected a version (26.2.0) or a .whl file (msprobe ships compiled parts: its source cannot be built here)",
        child=True)  # fmt: skip
    add(
        "2.1",
        "HARNESS_VERL=<40-hex sha>~1 target",
        argv(f"HARNESS_VERL={SHA}~1", "target"),
        2,
        "TARGET ERROR: HARNESS_VERL '1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa~1': expected a version (0.9.1), a checkout dir, <repository path or URL>@<ref>, or a .whl file",
        child=True,
    )
    add("2.1", "HARNESS_MSPROBE=26.2.0-a x38! target", argv("HARNESS_MSPROBE=26.2.0-" + "a" * 38 + "!", "target"), 2, "TARGET ERROR: HARNESS_MSPROBE '26.2.0-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!': expected a version (26.2.0) or a .whl file (msprobe ships compiled parts: its source cannot be built here)", child=True)  # fmt: skip
    add("2.1", "compare --base <40-hex sha>~1", argv("compare", "{S}", "--base", SHA + "~1", "--head", "0.9.1"), 2, "TARGET ERROR: --base '1aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa~1': expected a version (0.9.1), a checkout dir, <repository path or URL>@<ref>, or a .whl file", child=True)  # fmt: skip
    add(
        "2.2",
        "compare --repeats 1000000000",
        compare("--repeats", "1000000000"),
        2,
        "python -m harness compare: error: argument --repeats: expected a whole number from 1 to 100 runs per side, got '1000000000'",
    )
    add(
        "2.2",
        "compare --max-repeats 1000000000",
        compare("--max-repeats", "1000000000"),
        2,
        "python -m harness compare: error: argument --max-repeats: expected a whole number from 1 to 100 runs per side, got '1000000000'",
    )
    add(
        "2.2",
        "compare --repeats 0",
        compare("--repeats", "0"),
        2,
        "python -m harness compare: error: argument --repeats: expected a whole number from 1 to 100 runs per side, got '0'",
    )
    add(
        "2.2",
        "compare --repeats ³ (a unicode digit)",
        compare("--repeats", "\u00b3"),
        2,
        "python -m harness compare: error: argument --repeats: expected a whole number from 1 to 100 runs per side, got '³'",
    )
    add("2.2", "bisect --max-repeats 1", lambda t, _: ["bisect", tiny(t), "--verl-repo", str(t), "--good", "a",
        "--bad", "b", "--check", "overhead", "--max-repeats", "1"], 2, "BISECT ERROR: --max-repeats 1: too small for one interleaved pair of the comparison each probe is (at least 2 runs a side: one run a side has no interval, so every probe would be undecided)")  # fmt: skip
    add("2.2", "pytest --harness-compare-repeats 1000000000", argv("pytest", "--co", "--harness-compare-repeats",
        "1000000000"), 4, "python -m pytest: error: argument --harness-compare-repeats: expected a whole number from 1 to 100 runs per side, got '1000000000'", child=True)  # fmt: skip
    add("2.2", "pytest --harness-compare-repeats 0", argv("pytest", "--co", "--harness-compare-repeats", "0"), 4, "python -m pytest: error: argument --harness-compare-repeats: expected a whole number from 1 to 100 runs per side, got '0'",
        child=True)  # fmt: skip
    add("2.3", "HARNESS_CACHE_DIR=<file> target --verl 0.9.0", argv("HARNESS_CACHE_DIR={F}", "target", "--verl",
        "0.9.0"), 2, "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_CACHE_DIR T/file: not a directory (the harness's cache: name a directory)")  # fmt: skip
    add("2.3", "HARNESS_CACHE_DIR=<file> run", argv("HARNESS_CACHE_DIR={F}", "run", "{S}", "--results", "{T}/r"), 2, "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_CACHE_DIR T/file: not a directory (the harness's cache: name a directory)")  # fmt: skip
    add(
        "2.3",
        "report --out <existing file>",
        argv("report", "{R}", "--out", "{F}"),
        2,
        "ERROR: --out T/file: not a directory",
    )
    add("2.3", "schema -o <dir>", argv("schema", "-o", "{T}"), 2, "ERROR: -o T: is a directory (name a file)")
    add("2.3", "schema -o <missing parent>/x.json (made)", argv("schema", "-o", "{T}/missing/x.json"), 0, "")
    add(
        "2.3",
        "schema -o <file>/x.json",
        argv("schema", "-o", "{F}/x.json"),
        2,
        "ERROR: -o T/file/x.json: T/file is not a directory",
    )
    add(
        "2.3",
        "junit-merge <dir> a.xml",
        argv("junit-merge", "{T}", "{X}"),
        2,
        "ERROR: OUT T: is a directory (name a file)",
    )
    add("2.3", "image ascend-context --out <file>", argv("image", "ascend-context", "--verl", "{V}", "--out", "{F}"), 2, "ERROR: --out T/file: not a directory")  # fmt: skip
    add("2.3", "report on a results dir whose path holds byte 0xff", lambda t, _: ["report", os.fsdecode(bytes(
        results(t)) + b"\xff")], 2, "python -m harness: argument b'T/res\\xff' is not UTF-8 (a path with such a byte: rename it)")  # fmt: skip
    add("2.3", "report: results.json figure NaN", corrupt(figure("overhead.wall.profiled", math.nan), "report"), 2, "BASELINE ERROR: T/res/tiny_case/results.json: checks.overhead.figures: figure overhead.wall.profiled: nan is not a number above 0: not a harness results.json")  # fmt: skip
    add("2.3", "report: results.json figure Infinity", corrupt(figure("overhead.wall.profiled", math.inf), "report"), 2, "BASELINE ERROR: T/res/tiny_case/results.json: checks.overhead.figures: figure overhead.wall.profiled: inf is not a number above 0: not a harness results.json")  # fmt: skip
    add(
        "2.3",
        "target --verl <300-character name> (ENAMETOOLONG)",
        argv("target", "--verl", "a" * 300),
        2,
        "TARGET ERROR: --verl 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa': expected a version (0.9.1), a checkout dir, <repository path or URL>@<ref>, or a .whl file",
    )
    add(
        "2.3",
        "target --verl <300-character name>.whl",
        argv("target", "--verl", "a" * 300 + ".whl"),
        2,
        "TARGET ERROR: --verl aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.whl: no such wheel file",
    )
    add(
        "2.3",
        "HARNESS_MAX_DUMP=lots compare",
        lambda t, s: ["HARNESS_MAX_DUMP=lots", *compare()(t, s)],
        2,
        "ERROR: HARNESS_MAX_DUMP: not a size: 'lots' (e.g. 500MB, 2GiB, 1048576)",
    )
    add("2.3", "baseline merge --k disk=abc", argv("baseline", "merge", "{R}", "-o", "{T}/b.json", "--k", "disk=abc"), 2, "BASELINE ERROR: --k 'disk=abc': Input should be a valid number, unable to parse string as a number")  # fmt: skip
    add(
        "2.4",
        "gate: baseline tolerances -0.5",
        bad_baseline(every("tolerances", -0.5)),
        2,
        "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.tolerances.disk.rank0_bytes: Input should be greater than or equal to 0 (and 8 more): not a harness baseline.json",
    )
    add(
        "2.4",
        "gate: baseline tolerances NaN",
        bad_baseline(every("tolerances", math.nan)),
        2,
        "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.tolerances.disk.rank0_bytes: Input should be a finite number (and 8 more): not a harness baseline.json",
    )
    add("2.4", "gate: baseline figure 'nanx'", bad_baseline(lambda sb: sb["figures"].update({"overhead.wall."
        "unprofiled": "nanx"})), 2, "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.figures: figure overhead.wall.unprofiled: 'nanx' is not a number above 0: not a harness baseline.json")  # fmt: skip
    add("2.4", "gate: baseline figure NaN", bad_baseline(lambda sb: sb["figures"].update({"overhead.wall.profiled":
        math.nan})), 2, "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.figures: figure overhead.wall.profiled: nan is not a number above 0: not a harness baseline.json")  # fmt: skip
    add(
        "2.4",
        "gate: baseline runs 0",
        bad_baseline(lambda sb: sb.update(runs=0)),
        2,
        "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.runs: Input should be greater than 0: not a harness baseline.json",
    )
    add("2.4", "gate: baseline ratio sample 0", bad_baseline(lambda sb: sb["ratio_samples"]["overhead.wall.profiled"]
        [0].update({"step2.rank0": 0})), 2, "BASELINE ERROR: T/baseline.json: scenarios.tiny_case.ratio_samples.overhead.wall.profiled.0.step2.rank0: Input should be greater than 0: not a harness baseline.json")  # fmt: skip
    add(
        "2.4",
        "gate: results.json figure NaN",
        corrupt(figure("overhead.wall.profiled", math.nan), "gate"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: checks.overhead.figures: figure overhead.wall.profiled: nan is not a number above 0: not a harness results.json",
    )
    add(
        "2.4",
        "gate: results.json figure 'fast'",
        corrupt(figure("overhead.wall.unprofiled", "fast"), "gate"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: checks.overhead.figures: figure overhead.wall.unprofiled: 'fast' is not a number above 0: not a harness results.json",
    )
    add(
        "2.4",
        "merge: results.json figure NaN",
        corrupt(figure("overhead.wall.profiled", math.nan), "merge"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: checks.overhead.figures: figure overhead.wall.profiled: nan is not a number above 0: not a harness results.json",
    )
    add(
        "2.4",
        "merge: results.json disk figure -1",
        corrupt(figure("disk.total_bytes", -1, "disk"), "merge"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: checks.disk.figures: figure disk.total_bytes: -1 is not a number of 0 or more: not a harness results.json",
    )
    add(
        "2.4",
        "calibrate R R",
        argv("calibrate", "{R}", "{R}", "-o", "{T}/c.json"),
        2,
        "BASELINE ERROR: tiny_case: T/res/tiny_case and T/res/tiny_case hold the same trainings (a copy): one run",
    )
    add("2.4", "calibrate R <a copy of R>", lambda t, _: shutil.copytree(results(t), t / "copy") and ["calibrate",
        str(t / "res"), str(t / "copy"), "-o", str(t / "c.json")], 2, "BASELINE ERROR: tiny_case: T/res/tiny_case and T/copy/tiny_case hold the same trainings (a copy): one run")  # fmt: skip
    add("2.4", "baseline merge --k overhead=-1", argv("baseline", "merge", "{R}", "-o", "{T}/b.json", "--k",
        "overhead=-1"), 2, "BASELINE ERROR: --k 'overhead=-1': Input should be greater than or equal to 0")  # fmt: skip
    add("2.4", "baseline merge --floor disk=nan", argv("baseline", "merge", "{R}", "-o", "{T}/b.json", "--floor",
        "disk=nan"), 2, "BASELINE ERROR: --floor 'disk=nan': Input should be a finite number")  # fmt: skip
    add("2.4", "calibrate --floor disk=-0.5", argv("calibrate", "{R}", "{R2}", "-o", "{T}/b.json", "--floor",
        "disk=-0.5"), 2, "BASELINE ERROR: --floor 'disk=-0.5': Input should be greater than or equal to 0")  # fmt: skip
    add(
        "2.4",
        "baseline merge --k -1",
        argv("baseline", "merge", "{R}", "-o", "{T}/b.json", "--k", "-1"),
        2,
        "BASELINE ERROR: --k '-1': expected FAMILY=NUMBER with FAMILY one of overhead, disk, structure",
    )
    add(
        "2.5",
        "validate: required_patterns for a stage not profiled",
        edited(expect=STAGE_OFF),
        2,
        "T/scenarios/bad_case.yaml:1: (top level): expect.required_patterns names stages ['ref_compute_log_prob'] that are not expected",
    )
    add("2.5", "validate: min_entries 10 above max_entries 5", edited(expect={"min_entries": 10, "max_entries": 5}), 2, "T/scenarios/bad_case.yaml:23: expect: min_entries 10 is above max_entries 5: none could pass")  # fmt: skip
    add(
        "2.5",
        "validate: max_total: 0",
        edited(budgets={"disk": {"max_total": 0}}),
        2,
        "T/scenarios/bad_case.yaml:20: budgets.disk.max_total: Input should be greater than 0 (got 0)",
    )
    add(
        "2.5",
        "validate: max_profiled_ratio: 0.5",
        edited(budgets={"overhead": {"max_profiled_ratio": 0.5}}),
        2,
        "T/scenarios/bad_case.yaml:17: budgets.overhead.max_profiled_ratio: Input should be greater than or equal to 1 (got 0.5)",
    )
    add("2.5", "validate: max_stage_ratio {actor_update: 0}", edited(budgets={"overhead": {"max_stage_ratio": {
        "actor_update": 0}}}), 2, "T/scenarios/bad_case.yaml:20: budgets.overhead.max_stage_ratio.actor_update: Input should be greater than or equal to 1 (got 0)")  # fmt: skip
    add("2.5", "validate: budgets.provisional with a line break", edited(budgets={"provisional": "a\nREGRESSED"}), 2, "T/scenarios/bad_case.yaml:22: budgets.provisional: String should match pattern '^[^\\n\\r]*$' (got 'a\\nREGRESSED')")  # fmt: skip
    add("2.6", "run --executor docker on a device cpu verl_ppo scenario", argv("run", REAL_CPU, "--executor",
        "docker"), 2, "ROOT/scenarios/real_fsdp_l1.yaml: --executor docker: device cpu runs with the local or the ray executor (the docker executor is not wired yet)")  # fmt: skip
    add("2.6", "compare --executor docker on a device cpu verl_ppo scenario", argv("compare", REAL_CPU, "--base",
        "0.9.1", "--head", "0.9.1", "--executor", "docker"), 2, "INVALID SCENARIO: ROOT/scenarios/real_fsdp_l1.yaml: --executor docker: device cpu runs with the local or the ray executor (the docker executor is not wired yet)")  # fmt: skip
    add(
        "2.6",
        "target --series 'main\\nREGRESSED fake'",
        argv("target", "--series", "main\nREGRESSED fake"),
        2,
        "python -m harness: argument 'main\\nREGRESSED fake' holds a line break or another control character",
    )
    add("2.6", "HARNESS_SERIES='main\\nREGRESSED fake' target", argv("HARNESS_SERIES=main\nREGRESSED fake", "target"), 2, "TARGET ERROR: HARNESS_SERIES 'main\\nREGRESSED fake': holds a line break or a control character")  # fmt: skip
    add(
        "2.6",
        "target --verl '0.9.1\\nREGRESSED'",
        argv("target", "--verl", "0.9.1\nREGRESSED"),
        2,
        "python -m harness: argument '0.9.1\\nREGRESSED' holds a line break or another control character",
    )
    add(
        "2.6",
        "run --progress-every -5",
        argv("run", "{S}", "--progress-every", "-5"),
        2,
        "python -m harness run: error: argument --progress-every: expected seconds above 0, got '-5'",
    )
    add(
        "2.6",
        "run --progress-every nan",
        argv("run", "{S}", "--progress-every", "nan"),
        2,
        "python -m harness run: error: argument --progress-every: expected seconds above 0, got 'nan'",
    )
    add("2.6", "pytest --harness-progress-every inf", argv("pytest", "--co", "--harness-progress-every", "inf"), 4, "python -m pytest: error: argument --harness-progress-every: expected seconds above 0, got 'inf'",
        child=True)  # fmt: skip
    add(
        "2.6",
        "HARNESS_MAX_DUMP=lots run",
        argv("HARNESS_MAX_DUMP=lots", "run", "{S}", "--results", "{T}/r"),
        2,
        "harness run: HARNESS_MAX_DUMP: not a size: 'lots' (e.g. 500MB, 2GiB, 1048576)",
    )
    add(
        "2.6",
        "HARNESS_MIN_FREE=-1GB run",
        argv("HARNESS_MIN_FREE=-1GB", "run", "{S}", "--results", "{T}/r"),
        2,
        "harness run: HARNESS_MIN_FREE: not a size: '-1GB' (e.g. 500MB, 2GiB, 1048576)",
    )
    add(
        "2.6",
        "run --max-dump 0",
        argv("run", "{S}", "--max-dump", "0", "--results", "{T}/r"),
        2,
        "harness run: --max-dump: a cap of 0 bytes stops every run as it starts (unset it for no cap)",
    )
    add(
        "2.6",
        "HARNESS_TIMING=off run",
        argv("HARNESS_TIMING=off", "run", "{S}", "--results", "{T}/r"),
        2,
        "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_TIMING='off': one of gate, record",
    )
    add("2.6", "target --verl file:///nonexistent@main (git clone)", argv("target", "--verl",
        "file://{T}/nonexistent@main"), 2, "TARGET ERROR: git clone --quiet --mirror -- file://T/nonexistent …: fatal: 'T/nonexistent' does not appear to be a git repository")  # fmt: skip
    add("2.7", "baseline merge R -o R/tiny_case/results.json", argv("baseline", "merge", "{R}", "-o",
        "{R}/tiny_case/results.json"), 2, "ERROR: -o T/res/tiny_case/results.json: is inside the input T/res (write elsewhere)")  # fmt: skip
    add("2.7", "gate --json R/tiny_case/results.json", argv("gate", "--baseline", "{B}", "--results", "{R}", "--json",
        "{R}/tiny_case/results.json"), 2, "ERROR: --json T/res/tiny_case/results.json: is inside the input T/res (write elsewhere)")  # fmt: skip
    add("2.7", "calibrate R R2 -o R/tiny_case/results.json", argv("calibrate", "{R}", "{R2}", "-o",
        "{R}/tiny_case/results.json"), 2, "ERROR: -o T/res/tiny_case/results.json: is inside the input T/res (write elsewhere)")  # fmt: skip
    add("2.7", "baseline merge R -o B --tolerances-from B", argv("baseline", "merge", "{R}", "-o", "{B}",
        "--tolerances-from", "{B}"), 2, "ERROR: -o T/baseline.json: is the input T/baseline.json (write elsewhere)")  # fmt: skip
    add("2.7", "gate --baseline B --json B", argv("gate", "--baseline", "{B}", "--results", "{R}", "--json", "{B}"), 2, "ERROR: --json T/baseline.json: is the input T/baseline.json (write elsewhere)")  # fmt: skip
    add(
        "2.7",
        "junit-merge a.xml a.xml",
        argv("junit-merge", "{X}", "{X}"),
        2,
        "ERROR: OUT T/a.xml: is the input T/a.xml (write elsewhere)",
    )
    add(
        "2.7",
        "report R --out R",
        argv("report", "{R}", "--out", "{R}"),
        2,
        "ERROR: --out T/res: is the input T/res (write elsewhere)",
    )
    add(
        "2.7",
        "report R --out R/tiny_case",
        argv("report", "{R}", "--out", "{R}/tiny_case"),
        2,
        "ERROR: --out T/res/tiny_case: is inside the input T/res (write elsewhere)",
    )
    add("2.7", "report T/R1 T/R2 --out T (its PNG dirs are R1, R2)", argv("report", "{R}", "{R2}", "--out", "{T}"), 2, "ERROR: --out T: holds the input T/res (name a directory of its own)")  # fmt: skip
    add("2.7", "image ascend-context --out <inside the verl checkout>", argv("image", "ascend-context", "--verl",
        "{V}", "--out", "{V}/ctx"), 2, "ERROR: --out T/verl/ctx: is inside the input T/verl (write elsewhere)")  # fmt: skip
    add("2.7", "image ascend-context --out <inside the harness>", argv("image", "ascend-context", "--verl", "{V}",
        "--out", "{ROOT}/harness/ctx"), 2, "ERROR: --out ROOT/harness/ctx: is inside the input ROOT/harness (write elsewhere)")  # fmt: skip
    add(
        "2.7",
        "numerics --results <inside BASE>",
        numerics(lambda b, h: None, results="T/base/out"),
        2,
        "INFRASTRUCTURE ERROR (not a check verdict): --results T/base/out: overlaps the input T/base; name a dir apart (outputs never overwrite inputs)",
    )
    add("2.7", "history publish H --out <the dir holding H>", lambda t, _: (t / "h.json").write_text("{}") and [
        "history", "publish", str(t / "h.json"), "--out", str(t)], 2, "ERROR: --out T: holds the input T/h.json (name a directory of its own)")  # fmt: skip

    # --- #57 -------------------------------------------------------------------------------------------------
    add(
        "3.1",
        "run --reuse: a directory named dump.json",
        reused(a_dir_named("dump.json")),
        1,
        "- layout: step_2/actor_update/step0/rank0/dump.json: not a regular file (directory)",
    )
    add(
        "3.1",
        "run --reuse: a directory named stack.json",
        reused(a_dir_named("stack.json")),
        1,
        "- layout: step_2/actor_update/step0/rank0/stack.json: not a regular file (directory)",
    )
    add(
        "3.1",
        "run --reuse: a directory named construct.json",
        reused(a_dir_named("construct.json")),
        1,
        "- layout: step_2/actor_update/step0/rank0/construct.json: not a regular file (directory)",
    )
    add("3.1", "numerics: head's dump.json a directory", numerics(lambda b, h: (dump_json(h).unlink(),
        dump_json(h).mkdir())), 1, "MISSING numerics: numerics step_2/actor_update dumped on base, missing on head: not compared")  # fmt: skip
    add(
        "3.2",
        "run --reuse: the off run's run.json deleted",
        reused(record_gone("deleted")),
        2,
        "INFRASTRUCTURE ERROR (not a check verdict): T/results/tiny_case/off/run.json: no run record (missing, or of another schema): how the run ended is unknown, so nothing is judged; run the scenario again (without --reuse)",
    )
    add("3.2", "run --reuse: the on run's run.json of another schema", reused(record_gone("another schema", "on")), 2, "INFRASTRUCTURE ERROR (not a check verdict): T/results/tiny_case/on/run.json: no run record (missing, or of another schema): how the run ended is unknown, so nothing is judged; run the scenario again (without --reuse)")  # fmt: skip
    add(
        "3.2",
        "run --reuse: the off run's run.json a link",
        reused(record_gone("a link")),
        2,
        "INFRASTRUCTURE ERROR (not a check verdict): T/results/tiny_case/off/run.json: no run record (missing, or of another schema): how the run ended is unknown, so nothing is judged; run the scenario again (without --reuse)",
    )
    add(
        "3.3",
        "numerics: dumps with no entry",
        numerics(lambda b, h: (empty_data(b), empty_data(h))),
        2,
        "NOTHING COMPARED (no step/stage dumped on both sides with an entry to compare)",
    )
    add(
        "3.3",
        "numerics: every head entry renamed",
        numerics(lambda b, h: rename_all(h)),
        2,
        "numerics step_2/actor_update: 16 rows, 0 pass, 0 warning, 0 error (+16 rows with no counterpart on base: not compared)",
    )
    add("3.3", "numerics: two dump.json files, every head entry renamed", numerics(lambda b, h: rename_all(h),
        files=True), 2, "numerics step_2/actor_update: 16 rows, 0 pass, 0 warning, 0 error (+16 rows with no counterpart on base: not compared)")  # fmt: skip
    add(
        "3.3",
        "numerics: every base entry renamed",
        numerics(lambda b, h: rename_all(b)),
        2,
        "numerics step_2/actor_update: 16 rows, 0 pass, 0 warning, 0 error (+16 rows with no counterpart on base: not compared)",
    )
    add(
        "3.4",
        'numerics: a second top-level "data"',
        numerics(key_twice("data", "{}")),
        2,
        "numerics step_2/actor_update: compare failed: rank0: the top-level key 'data' twice at char 2934",
    )
    add(
        "3.4",
        'numerics: a second top-level "task"',
        numerics(key_twice("task", '"tensor"')),
        2,
        "numerics step_2/actor_update: compare failed: rank0: the top-level key 'task' twice at char 2934",
    )
    add(
        "3.4",
        'numerics: a second top-level "level"',
        numerics(key_twice("level", '"L0"')),
        2,
        "numerics step_2/actor_update: compare failed: rank0: the top-level key 'level' twice at char 2934",
    )
    add(
        "3.5",
        "numerics --results OUT: OUT/head_vs_base a link elsewhere",
        out_link("head_vs_base"),
        2,
        "ERROR: T/out/head_vs_base: a symbolic link in an output dir: outputs are written in place only (remove it)",
    )
    add(
        "3.5",
        "numerics --results OUT: OUT/msprobe a link elsewhere",
        out_link("msprobe"),
        2,
        "ERROR: T/out/msprobe: a symbolic link in an output dir: outputs are written in place only (remove it)",
    )
    add("3.5", "numerics --results OUT: a stage dir a link elsewhere", out_link("head_vs_base/step_2/actor_update"), 2, "ERROR: T/out/head_vs_base/step_2/actor_update: a symbolic link in an output dir: outputs are written in place only (remove it)")  # fmt: skip
    add(
        "3.6",
        "numerics: head's stack.json a link to a host file",
        stack_linked,
        0,
        "step_2/actor_update: 16 rows, 16 pass, 0 warning, 0 error; step_2/ref_compute_log_prob: 8 rows, 8 pass, 0 warning, 0 error; the host file's text in the CSVs: False",
    )
    add(
        "3.6",
        "numerics: head's rank dir a link out of the tree",
        numerics(linked("rank0")),
        1,
        "MISSING numerics: numerics step_2/actor_update dumped on base, missing on head: not compared",
    )
    add("3.6", "numerics: base's rank dir a link out of the tree", numerics(lambda b, h: linked("rank0")(h, b)), 0, "numerics step_2/actor_update dumped on head only: not compared")  # fmt: skip
    add(
        "3.6",
        "numerics: head's dump.json a link out of the tree",
        numerics(linked("rank0/dump.json")),
        1,
        "MISSING numerics: numerics step_2/actor_update dumped on base, missing on head: not compared",
    )
    add(
        "3.7",
        "history append: a linked scenario dir",
        results_tree_linked("tiny_case"),
        2,
        "HISTORY ERROR: T/res/tiny_case: a symbolic link in a results dir: results are read in place only",
    )
    add(
        "3.7",
        "history append: a linked on dir",
        results_tree_linked("tiny_case/on"),
        2,
        "HISTORY ERROR: T/res/tiny_case/on: a symbolic link in a results dir: results are read in place only",
    )
    add(
        "3.7",
        "history append: a linked on/dumps dir",
        results_tree_linked("tiny_case/on/dumps"),
        2,
        "HISTORY ERROR: T/res/tiny_case/on/dumps: a symbolic link in a results dir: results are read in place only",
    )
    add(
        "3.7",
        "run --reuse: the on run dir a link",
        reused(run_dir_linked("on")),
        2,
        "ERROR: T/results/tiny_case/on: a symbolic link in a results dir: results are read in place only",
    )
    add(
        "3.7",
        "run --reuse: the off run dir a link",
        reused(run_dir_linked("off")),
        2,
        "ERROR: T/results/tiny_case/off: a symbolic link in a results dir: results are read in place only",
    )
    add(
        "3.8",
        "a harness bug in baseline merge",
        bug_in("baseline merge"),
        2,
        "HARNESS ERROR (not a verdict on verl): RuntimeError: a harness bug at ROOT/tests/…",
    )
    add(
        "3.8",
        "a harness bug in calibrate",
        bug_in("calibrate"),
        2,
        "HARNESS ERROR (not a verdict on verl): RuntimeError: a harness bug at ROOT/tests/…",
    )
    add(
        "3.8",
        "a harness bug in gate",
        bug_in("gate"),
        2,
        "HARNESS ERROR (not a verdict on verl): RuntimeError: a harness bug at ROOT/tests/…",
    )
    add(
        "3.8",
        "a harness bug in report",
        bug_in("report"),
        2,
        "HARNESS ERROR (not a verdict on verl): RuntimeError: a harness bug at ROOT/tests/…",
    )
    add(
        "3.9",
        "numerics: a dump nested 100,000 deep",
        lambda t, _: nested(t, "dump"),
        2,
        "numerics step_2/actor_update: compare failed: rank0: nested too deeply to be a dump at char 9",
    )
    add(
        "3.9",
        "numerics: a stack.json nested 100,000 deep",
        lambda t, _: nested(t, "stack"),
        2,
        "numerics step_2/actor_update: compare failed: rank0: stack.json: nested too deeply to be a call stack",
    )
    add(
        "3.9",
        "gate: a baseline nested 100,000 deep",
        lambda t, _: nested(t, "baseline"),
        2,
        "BASELINE ERROR: T/baseline.json: not valid JSON (maximum recursion depth exceeded while decoding a JSON array from a unicode stri): a truncated or corrupt baseline.json",
    )
    add(
        "3.9",
        "gate: results.json nested 100,000 deep",
        corrupt(b"[" * 100_000, "gate"),
        2,
        "BASELINE ERROR: T/res/tiny_case/results.json: not valid JSON (maximum recursion depth exceeded while decoding a JSON array from a unicode stri): a truncated or corrupt results.json",
    )
    add(
        "3.10",
        "numerics --nonfinite-ok '('",
        numerics(lambda b, h: None, nonfinite_ok="("),
        2,
        "python -m harness numerics: error: argument --nonfinite-ok: '(' is not a regular expression (missing ), unterminated subpattern at position 0)",
    )
    add(
        "3.10",
        "numerics --python /nonexistent",
        numerics(lambda b, h: None, python="/nonexistent"),
        2,
        "python -m harness numerics: error: argument --python: '/nonexistent' is not an executable file (a path, or a name on PATH)",
    )
    add(
        "3.10",
        "numerics --python <a directory>",
        numerics(lambda b, h: None, python="T"),
        2,
        "python -m harness numerics: error: argument --python: 'T' is not an executable file (a path, or a name on PATH)",
    )
    add(
        "3.10",
        "run --results <file>/x",
        argv("run", "{S}", "--results", "{F}/x"),
        2,
        "ERROR: --results T/file/x: T/file is not a directory",
    )
    add("3.10", "compare --results <file>/x", argv("compare", "{S}", "--base", "0.9.1", "--head", "0.9.1",
        "--results", "{F}/x"), 2, "ERROR: --results T/file/x: T/file is not a directory")  # fmt: skip
    add("3.10", "numerics --results <file>/x", lambda t, s: file_at(t) and numerics(lambda b, h: None,
        results="T/file/x")(t, s), 2, "ERROR: --results T/file/x: T/file is not a directory")  # fmt: skip
    add(
        "3.10",
        "bisect --results <file>/x",
        bisect_results_under_a_file,
        2,
        "ERROR: --results T/file/x: T/file is not a directory",
    )
    add("3.10", "wheelhouse <file>", argv("wheelhouse", "{F}"), 2, "ERROR: DIR T/file: not a directory")
    add(
        "3.10",
        "DOCKER_HOST=garbage image build-cpu",
        docker_host("garbage"),
        2,
        "ERROR: DOCKER_HOST 'garbage': not a Docker daemon address (Invalid bind address format: port is required: garbage): name a daemon's socket (unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it",
    )
    add(
        "3.10",
        "DOCKER_HOST=http://[::1 image build-cpu",
        docker_host("http://[::1"),
        2,
        "ERROR: DOCKER_HOST 'http://[::1': not a Docker daemon address (Invalid IPv6 URL): name a daemon's socket (unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it",
    )
    add(
        "3.10",
        "DOCKER_HOST=tcp://host:notaport image build-cpu",
        docker_host("tcp://host:notaport"),
        2,
        "ERROR: DOCKER_HOST 'tcp://host:notaport': not a Docker daemon address (Port could not be cast to integer value as 'notaport'): name a daemon's socket (unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it",
    )
    add("3.10", "DOCKER_HOST=http://[::1 run --reuse (local: no container needed)", lambda t, s: [
        "DOCKER_HOST=http://[::1", *reused(lambda d: None)(t, s)], 0, "harness: stale containers not looked for: DOCKER_HOST 'http://[::1': not a Docker daemon address (Invalid IPv6 URL): name a daemon's socket (unix:///PATH/docker.sock, tcp://HOST:PORT), or unset it")  # fmt: skip
    add("3.10", "validate: a list as a YAML key", lambda t, _: scenario(t, yaml.safe_dump(BASE, sort_keys=False) +
        "? [a, b]\n: 1\n"), 2, "T/scenarios/bad_case.yaml:22: YAML syntax error: a key that is a list or a mapping (`? [a, b]`): keys are plain names")  # fmt: skip
    add("3.11", "validate DIR: a scenario name with a trailing newline", lambda t, _: [*scenario(t, yaml.safe_dump(BASE), "bad_case\n.yaml")[:1], str(t / "scenarios")], 2, "'T/scenarios/bad_case\\n.yaml': a path with a line break or another control character (rename it)")  # fmt: skip
    add("3.11", "validate: a 101-character name", lambda t, _: scenario(t, yaml.safe_dump(BASE), "a" * 101 + ".yaml"), 2, "T/scenarios/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.yaml:1: file name: scenario names are lowercase letters, digits and '_', at most 100 characters (rename the file)")  # fmt: skip
    add("3.11", "validate: a name in capitals", lambda t, _: scenario(t, yaml.safe_dump(BASE), "Tiny_Case.yaml"), 2, "T/scenarios/Tiny_Case.yaml:1: file name: scenario names are lowercase letters, digits and '_', at most 100 characters (rename the file)")  # fmt: skip
    add(
        "3.12",
        "validate: aliases 9 deep, 9 wide",
        anchors(9, 9),
        2,
        "T/scenarios/bad_case.yaml:1: YAML expands to more than 100000 nodes through its aliases (nested anchors): write the values out",
    )
    add(
        "3.12",
        "validate: aliases 6 deep, 10 wide",
        anchors(6, 10),
        2,
        "T/scenarios/bad_case.yaml:1: YAML expands to more than 100000 nodes through its aliases (nested anchors): write the values out",
    )
    add(
        "3.12",
        "validate: aliases 20 deep, 2 wide",
        anchors(20, 2),
        2,
        "T/scenarios/bad_case.yaml:1: YAML expands to more than 100000 nodes through its aliases (nested anchors): write the values out",
    )
    add(
        "3.13",
        "validate: two files named tiny_case",
        two_names("validate"),
        2,
        "T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir each (rename one)",
    )
    add(
        "3.13",
        "dry-run: two files named tiny_case",
        two_names("dry-run"),
        2,
        child=True,
        line="T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir each (rename one)",
    )
    add(
        "3.13",
        "run: two files named tiny_case",
        two_names("run"),
        2,
        "T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir each (rename one)",
    )
    add(
        "3.13",
        "pytest: two files named tiny_case",
        two_names("pytest"),
        2,
        "T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir each (rename one)",
        child=True,
    )
    add("3.14", "HARNESS_LOCK_WAIT_S=soon, the lock held", held(lambda t: ["run", tiny(t), "--results", str(t / "res")],
        "soon"), 2, "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_LOCK_WAIT_S='soon': not a number of seconds")  # fmt: skip
    add("3.14", "HARNESS_LOCK_WAIT_S=inf, the lock held", held(lambda t: ["run", tiny(t), "--results", str(t / "res")],
        "inf"), 2, "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_LOCK_WAIT_S='inf': not a number of seconds")  # fmt: skip
    add("3.14", "HARNESS_LOCK_WAIT_S=-1, the lock held", held(lambda t: ["run", tiny(t), "--results", str(t / "res")],
        "-1"), 2, "INFRASTRUCTURE ERROR (not a check verdict): HARNESS_LOCK_WAIT_S='-1': not a number of seconds")  # fmt: skip
    add(
        "3.15",
        "SIGKILLed harness: the training",
        sigkilled("main"),
        0,
        "0 of 1 training processes left after the harness was SIGKILLed; harness.training.watchdog: the harness is gone: ending the training (session …)",
        child=True,
    )
    add(
        "3.15",
        "SIGKILLed harness: a process in a group of its own",
        sigkilled("main,grouped"),
        0,
        "0 of 2 training processes left after the harness was SIGKILLed; harness.training.watchdog: the harness is gone: ending the training (session …)",
        child=True,
    )
    add(
        "3.15",
        "SIGKILLed harness: a re-parented process",
        sigkilled("main,orphan"),
        0,
        "0 of 2 training processes left after the harness was SIGKILLed; harness.training.watchdog: the harness is gone: ending the training (session …)",
        child=True,
    )
    add(
        "3.16",
        "pytest --executor docker: real_fsdp_l0",
        refused("real_fsdp_l0"),
        0,
        "SKIPPED [5] …real_fsdp_l0.yaml: ROOT/scenarios/real_fsdp_l0.yaml: --executor docker: device cpu runs with the local or the ray executor (the docker executor is not wired yet)",
        child=True,
    )
    add(
        "3.16",
        "pytest --executor docker: real_fsdp_l1",
        refused("real_fsdp_l1"),
        0,
        "SKIPPED [5] …real_fsdp_l1.yaml: ROOT/scenarios/real_fsdp_l1.yaml: --executor docker: device cpu runs with the local or the ray executor (the docker executor is not wired yet)",
        child=True,
    )
    add(
        "3.16",
        "pytest --executor docker: real_critic_fsdp_l1",
        refused("real_critic_fsdp_l1"),
        0,
        "SKIPPED [6] …real_critic_fsdp_l1.yaml: ROOT/scenarios/real_critic_fsdp_l1.yaml: --executor docker: device cpu runs with the local or the ray executor (the docker executor is not wired yet)",
        child=True,
    )
    two = str(ROOT / "scenarios" / "two_nodes_fsdp_l1.yaml")
    add("4.1", "run --ray-address ray://h:10001 (Ray Client's, not the dashboard's)", lambda t, _: ["run", two, "--ray-address", "ray://h:10001", "--results", str(t / "r")], 2, "ERROR: --ray-address: 'ray://h:10001' is not the address of a Ray cluster's dashboard (the Job Submission API): http://HEAD:8265 or https://HOST[:PORT]")
    add("4.1", "run --executor docker --ray-address URL", lambda t, _: ["run", two, "--executor", "docker", "--ray-address", "http://h:8265", "--results", str(t / "r")], 2, "ERROR: --ray-address with --executor docker: a cluster's runs are the ray executor's")
    add("4.1", "HARNESS_RAY_ADDRESS=garbage run", lambda t, _: ["HARNESS_RAY_ADDRESS=garbage", "run", two, "--results", str(t / "r")], 2, "ERROR: HARNESS_RAY_ADDRESS: 'garbage' is not the address of a Ray cluster's dashboard (the Job Submission API): http://HEAD:8265 or https://HOST[:PORT]")
    add("4.1", "run --ray-address of a port nothing listens on", lambda t, _: ["run", two, "--heavy", "--ray-address", "http://127.0.0.1:9", "--results", str(t / "r")], 2, "INFRASTRUCTURE ERROR (not a check verdict): scenario two_nodes_fsdp_l1: off run: the Ray cluster at http://127.0.0.1:9: GET /api/version: ConnectionError: …Failed to establish a new connection… (its dashboard, where the Job Submission API answers: http://HEAD:8265)", child=True)
    add("2.2", "compare --repeats 101", compare("--repeats", "101"), 2, "python -m harness compare: error: argument --repeats: expected a whole number from 1 to 100 runs per side, got '101'")
    add("2.2", "compare --repeats -1", compare("--repeats", "-1"), 2, "python -m harness compare: error: argument --repeats: expected a whole number from 1 to 100 runs per side, got '-1'")
    add("3.11", "validate: a 100-character name (accepted)", lambda t, _: scenario(t, yaml.safe_dump(BASE), "a" * 100 + ".yaml"), 0, "ok  aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")
    add("3.13", "bisect: two files named tiny_case", lambda t, s: ["bisect", *two_names("validate")(t, s)[1:], "--verl-repo", str(t), "--good", "a", "--bad", "b"], 2, "INVALID SCENARIO: T/b/scenarios/tiny_case.yaml: scenario name 'tiny_case' is also T/a/scenarios/tiny_case.yaml's: one results dir each (rename one)")
    add("3.16", "pytest scenarios/ -k tiny_fsdp_l1 --executor docker --collect-only", lambda t, _: ["pytest", "--collect-only", "-q", "--executor", "docker", "-k", "tiny_fsdp_l1", f"--harness-results={t / 'r'}", str(ROOT / "scenarios")], 0, "5/… tests collected (… deselected) in …", child=True)
    # --- #82: the shared helpers ---------------------------------------------------------------------------------
    for where in ("a dangling link", "a link to a file outside"):
        add("5.2", f"history append: HISTORY is {where}", history_linked(where == "a dangling link"), 2,
            "ERROR: HISTORY T/h.json: a symbolic link: outputs are written in place, never through a link")  # fmt: skip
    add("5.2", "history check --json: a dangling link", lambda t, _: [*history_there(t), "--json", str(dangling(t))],
        2, "ERROR: --json T/h.json.link: a symbolic link: outputs are written in place, never through a link")  # fmt: skip
    add("5.3", "run --ray-address with a password", lambda t, _: ["run", two, "--ray-address",
        "http://bob:pa55word@h:8265", "--results", str(t / "r")], 2,
        "ERROR: --ray-address: 'http://***@h:8265' is not the address of a Ray cluster's dashboard (the Job Submission API): http://HEAD:8265 or https://HOST[:PORT]")  # fmt: skip
    add("5.3", "HARNESS_RAY_ADDRESS with a token as user", lambda t, _: [
        "HARNESS_RAY_ADDRESS=ray://0123456789abcdef@h:10001", "run", two, "--results", str(t / "r")], 2,
        "ERROR: HARNESS_RAY_ADDRESS: 'ray://***@h:10001' is not the address of a Ray cluster's dashboard (the Job Submission API): http://HEAD:8265 or https://HOST[:PORT]")  # fmt: skip
    add("5.3", "history append: a results dir named with a GitHub token", lambda t, _: [
        "history", "append", str(t / "h.json"), str(t / ("ghp_" + "x1" * 18))], 2,
        "HISTORY ERROR: no results directory T/***")  # fmt: skip

    # --- #82: the history -----------------------------------------------------------------------------------------
    import shlex

    from gate_builders import ENV
    from history_builders import BRANCH, EVIL, PROFILED, branch_with, change_at, history_file, run_of

    def hist(edit: Callable[[dict], object] = lambda d: None, n: int = 3, step_at: int | None = None,
             name: str = "h.json") -> Callable[[Path], Path]:  # fmt: skip
        return lambda t: history_file(t / name, n, edit, step_at)

    def crashed(why: str) -> Callable[[dict], object]:
        return lambda d: run_of(d, 1).update(status="crashed", why=[why], figures={}, samples={})

    def accepted(change: str, reason: str) -> Callable[[dict], object]:
        return lambda d: d["accepted"].append({"change": change, "reason": reason, "accepted": "2026-11-30"})

    def history(*words: str, made: Callable[[Path], Path] | None = None) -> Callable[[Path, contextlib.ExitStack], Case]:
        """``history WORDS`` of a history ``made`` in T (three quiet nights), ``{H}`` its path, ``{T}`` the row's dir."""
        return lambda t, _: ["history", *(w.format(H=(made or hist())(t), T=t) for w in words)]

    def sample(value: float, night: int = 2) -> Callable[[dict], object]:
        return lambda d: run_of(d, night)["samples"][PROFILED].update({"step4.rank0": value})

    def copied(d: dict) -> None:
        d["nights"].append(json.loads(json.dumps(d["nights"][-1])))

    def check_doc(scenario: str, good: str) -> Callable[[Path], Path]:
        """A history check's JSON planning one bisect: ``scenario``'s regression from ``good`` to a commit."""

        def make(t: Path) -> Path:
            finding = {"status": "regressed", "accepted": False, "scenario": scenario, "metric": PROFILED,
                       "change": "c", "line": "REGRESSED", "range": {"good": good, "bad": "b" * 40, "commits": 3}}
            doc = {"schema_version": 2, "exit_code": 1, "verdict": "FAIL", "nightly_exit": 1, "nightly_verdict": "FAIL",
                   "nights": 12, "lines": [], "findings": [finding]}  # fmt: skip
            (t / "c.json").write_text(json.dumps(doc))
            return t / "c.json"

        return make

    def night_on(links: Callable[[Path], dict[str, str]]) -> Callable[[Path, contextlib.ExitStack], Case]:
        """``.ci/history night`` of a results dir onto a branch holding ``links`` (on the branch: where to)."""

        def make(t: Path, _: contextlib.ExitStack) -> Case:
            (t / "outside" / "cpu").mkdir(parents=True)
            (t / "outside" / "cpu" / "keep.txt").write_text("keep me")
            (t / "outside" / "cpu.json").write_text("{}")
            bare = branch_with(t, links(t))
            res = results(t)
            job = [f"RESULTS={t / 'job'}", f"PYTHON={PY}", f"GITHUB_STEP_SUMMARY={t / 'job' / 'summary.md'}"]
            return Raw(["env", *job, "bash", str(ROOT / ".ci" / "history"), "night", str(bare), BRANCH,
                        f"cpu.json={res}"])  # fmt: skip

        return make

    def read_only_history(made: Callable[[Path], Path], *words: str, lock: bool = False) -> Callable[..., Case]:
        """``history WORDS`` (``{H}`` the history ``made`` in T/ro, ``{T}`` the row's dir) with T/ro read only: a
        mount namespace of its own where T/ro is bound read only (``lock``: the history's lock file left there)."""

        def make(t: Path, _: contextlib.ExitStack) -> Case:
            ro = t / "ro"
            h = made(ro)
            if lock:
                (ro / f".{h.name}.lock").write_text("")
            argv = [PY, "-m", "harness", "history", *(w.format(H=h, T=t) for w in words)]
            script = f"mount --bind {ro} {ro} && mount -o remount,ro,bind {ro} && exec {shlex.join(argv)}"
            return Raw(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script])

        return make

    evil = "x\\n::error title=all good::merge it"  # as it is printed: one line, the line break escaped
    add("5.1", "history check: a crashed night's reason with a line `::error …`", history("check", "{H}",
        made=hist(crashed(EVIL))), 0, f"tiny_case: night … (2026-11-01) crashed (kept, not a point): {evil}")  # fmt: skip
    add("5.1", "history check: an accepted change's reason `##[error]…`", history("check", "{H}", made=hist(accepted(
        "tiny_case:overhead.wall.profiled@0123456789", "##[error]all good, merge it"))), 0,
        "accepted tiny_case:overhead.wall.profiled@0123456789 (2026-11-30): '#\\#[error]all good, merge it'; no change point is there now")  # fmt: skip
    add("5.1", "history check: an accepted change's name with a line `::error …`", history("check", "{H}",
        made=hist(accepted(EVIL, "r"))), 0, f"accepted {evil} (2026-11-30): 'r'; no change point is there now")  # fmt: skip
    add("5.1", "history check: the processor's name with a line `::error …`", history("check", "{H}", made=hist(
        lambda d: [n["identity"].update(processor=EVIL) for n in d["nights"]] and run_of(d, 1).update(
            figures={"overhead.wall.unprofiled": 1.1}, tolerances={"overhead.wall.unprofiled": 0.25}))), 0, f"tiny_case overhead.wall.unprofiled (cpu/x86_64, {evil}): disappears after night … (2026-11-01): judged up to there")  # fmt: skip
    add("5.1", "history append: verl's version with a line `::error …`", lambda t, _: [
        "history", "append", str(t / "h.json"), str(write_results(t / "r", env=ENV | {"verl": EVIL}, dumps=False)
                                                        .parent), "--date", "2026-11-01"], 0,
        f"night … (2026-11-01, verl {evil} (a release)) appended")  # fmt: skip
    add("5.1", "history accept: a change named `##[error]…`", history("accept", "{H}", "##[error]all good",
        "--reason", "r", made=hist(n=12, step_at=9)), 2,
        f"HISTORY ERROR: #\\#[error]all good: no such change point in the history now (its change points: {change_at(9)})")  # fmt: skip
    add("5.1", "history bisects: a check whose scenario holds a line `::error …`", lambda t, _: [
        "history", "bisects", str(check_doc("tiny_x" + EVIL, "a" * 40)(t))], 2,
        "HISTORY ERROR: T/c.json: findings.0.scenario: scenario names are lowercase letters, digits and '_', at most 100 characters: not a harness history check JSON: pass the file history check --json wrote")  # fmt: skip
    for where, points in (("docs/.nojekyll", "outside/nojekyll"), ("docs", "outside"), ("docs/cpu", "outside/cpu"),
                          ("cpu.json", "outside/cpu.json")):  # fmt: skip
        add("5.2", f".ci/history night: the branch's {where} a link to an absolute path", night_on(
            lambda t, w=where, to=points: {w: str(t / to)}), 2,
            f"::error title=precision_debugger history::the history branch {BRANCH} holds a symbolic link ({where}): nothing is written through a link; remove it from the branch (this night is not recorded)", child=True)  # fmt: skip
    ratio = "5e-324 is no on/off ratio (a positive normal number): not a harness history"
    add("5.6", "history check: a subnormal sample (5e-324)", history("check", "{H}", made=hist(sample(5e-324))), 2,
        f"HISTORY ERROR: T/h.json: nights.1.scenarios.tiny_case.0.samples.overhead.wall.profiled.step4.rank0: {ratio}")  # fmt: skip
    add("5.6", "history append: onto a history with a subnormal sample", lambda t, s: [*history("append", "{H}",
        made=hist(sample(5e-324, 3)))(t, s), str(results(t)), "--date", "2026-12-01"], 2,
        f"HISTORY ERROR: T/h.json: nights.2.scenarios.tiny_case.0.samples.overhead.wall.profiled.step4.rank0: {ratio}")  # fmt: skip
    add("5.6", "history check: a sample of 1e-300 (a normal number, no measurement)", history("check", "{H}",
        made=hist(sample(1e-300))), 2, "HISTORY ERROR: T/h.json: nights.1.scenarios.tiny_case.0.samples.overhead.wall.profiled.step4.rank0: 1e-300 is no on/off ratio of two measured step times (from 0.001 to 10000): not a harness history")  # fmt: skip
    add("5.6", "history check: a subnormal overhead figure (no samples)", history("check", "{H}", made=hist(
        lambda d: run_of(d, 2)["figures"].update({"overhead.wall.unprofiled": -1e-310}))), 2,
        "HISTORY ERROR: T/h.json: nights.1.scenarios.tiny_case.0.figures.overhead.wall.unprofiled: -1e-310 is a subnormal number: no figure measures one: not a harness history")  # fmt: skip
    copy = "holds the runs of night … (2026-11-03) (results night3): a night copied twice, each results dir is one night's once (remove the copy): not a harness history"
    add("5.6", "history check: the newest night copied twice", history("check", "{H}", made=hist(copied)), 2,
        f"HISTORY ERROR: T/h.json: nights: night … (2026-11-03) {copy}")  # fmt: skip
    add("5.6", "history accept: a history with a night copied twice", history("accept", "{H}", change_at(9),
        "--reason", "r", made=hist(copied, n=12, step_at=9)), 2, "HISTORY ERROR: T/h.json: nights: night … (2026-11-12) holds the runs of night … (2026-11-12) (results night12): a night copied twice, each results dir is one night's once (remove the copy): not a harness history")  # fmt: skip
    add("5.6", "history check: a run twice in one night", history("check", "{H}", made=hist(
        lambda d: d["nights"][0]["scenarios"]["tiny_case"].append(run_of(d, 1)))), 2,
        "HISTORY ERROR: T/h.json: nights: night … (2026-11-01) holds one of its runs twice (results night1): a night copied twice, each results dir is one night's once (remove the copy): not a harness history")  # fmt: skip
    add("5.6", "validate: a scenario named index", lambda t, _: scenario(t, yaml.safe_dump(BASE), "index.yaml"), 2,
        "T/scenarios/index.yaml:1: file name: 'index' is the name of the page of the nights' own index.html (history publish) (rename the file)")  # fmt: skip
    add("5.6", "history publish: a history of a scenario named index", history("publish", "{H}", "--out", "{T}/site",
        made=hist(lambda d: d["nights"][0].update(scenarios={"index": d["nights"][0]["scenarios"]["tiny_case"]}))), 2,
        "HISTORY ERROR: T/h.json: nights.0.scenarios.index.[key]: 'index' is the name of the page of the nights' own index.html (history publish): not a harness history")  # fmt: skip
    add("5.6", "history publish --out: a directory holding a site's index.html", lambda t, s: [
        (t / "site").mkdir(), (t / "site" / "index.html").write_text("<p>a site of someone else</p>")] and history(
            "publish", "{H}", "--out", "{T}/site")(t, s), 2,
        "HISTORY ERROR: T/site: holds files the page of the nights did not write (no .nights-page): publish into a new or empty directory, or the page's own")  # fmt: skip
    add("5.6", "history check: a verl commit that is an option (`--output=…`)", history("check", "{H}", made=hist(
        lambda d: d["nights"][1]["identity"].update(verl_commit="--output=/tmp/x"))), 2,
        "HISTORY ERROR: T/h.json: nights.1.identity.verl_commit: String should match pattern '^[0-9a-f]{7,64}$': not a harness history")  # fmt: skip
    add("5.6", "history bisects: a range whose good commit is an option", lambda t, _: ["history", "bisects", str(
        check_doc("tiny_x", "--output=/tmp/x")(t))], 2,
        "HISTORY ERROR: T/c.json: findings.0.range.good: String should match pattern '^[0-9a-f]{7,64}$': not a harness history check JSON: pass the file history check --json wrote")  # fmt: skip
    add("5.7", "history check: a history on a read-only mount", read_only_history(hist(), "check", "{H}"), 0,
        "history check: PASS", child=True)  # fmt: skip
    add("5.7", "history check: a history on a read-only mount, its lock file beside it", read_only_history(hist(n=4),
        "check", "{H}", lock=True), 0, "history check: PASS", child=True)  # fmt: skip
    add("5.7", "history publish: a history on a read-only mount", read_only_history(hist(), "publish", "{H}", "--out",
        "{T}/site"), 0, "T/site/index.html: 1 scenarios, 1 charts over 3 nights", child=True)  # fmt: skip
    cannot = "cannot write: a read-only filesystem (Read-only file system); write elsewhere or make it writable"
    add("5.7", "history append: a history on a read-only mount", lambda t, s: read_only_history(hist(), "append", "{H}",
        str(results(t)))(t, s), 2, f"ERROR: HISTORY T/ro/h.json: {cannot}", child=True)  # fmt: skip
    add("5.7", "history accept: a history on a read-only mount", read_only_history(hist(n=12, step_at=9), "accept", "{H}",
        change_at(9), "--reason", "r"), 2, f"ERROR: HISTORY T/ro/h.json: {cannot}", child=True)  # fmt: skip
    add("5.7", "history check: `nights` a number", history("check", "{H}", made=lambda t: file_at(t, "h.json").write_text(
        '{"schema_version": 4, "nights": 5}') and t / "h.json"), 2, "HISTORY ERROR: T/h.json: nights: Input should be a valid list: not a harness history")  # fmt: skip
    add("5.7", "history check: a schema-3 history whose night is a list", history("check", "{H}", made=lambda t: file_at(
        t, "h.json").write_text('{"schema_version": 3, "nights": [[1]]}') and t / "h.json"), 2,
        "HISTORY ERROR: T/h.json: nights.0: Input should be a valid dictionary or instance of Night: not a harness history")  # fmt: skip

    # --- #82: the Ray executors -----------------------------------------------------------------------------------
    from fake_servers import STARTED, drip, ev
    from ray_bad_input import (
        cluster_env,
        lease_taken,
        ray,
        ray_redirected,
        rayjob,
        rayjob_leftovers,
        rayjob_redirected,
        state_error,
        token_echoed,
    )

    forged = "ok\n::error title=merged::all good, merge it"
    off_run = "INFRASTRUCTURE ERROR (not a check verdict): scenario two_nodes_fsdp_l1: off run:"
    add("5.1", "run (rayjob): the submitter's job_id forges a workflow command", rayjob(post=(200, json.dumps({"job_id": forged}))), 2,
        f"{off_run} the RayJob submitter at http://127.0.0.1:… answered HTTP 200 a job_id that is not a job's name: 'ok\\n::error title=merged::all good, merge it'")  # fmt: skip
    add("5.1", "run (rayjob): the submitter's refusal forges a workflow command", rayjob(post=(503, json.dumps({"detail": forged}))), 2,
        f"{off_run} the RayJob submitter at http://127.0.0.1:… refused the job: HTTP 503: ok\\n::error title=merged::all good, merge it")  # fmt: skip
    add("5.1", "run (rayjob): the job's final message forges a workflow command", rayjob(watches=[[STARTED, ev("final", status="TIMEOUT", message=forged)]]), 2,
        f"{off_run} RayJob rayjob-1 ended TIMEOUT at the submitter (its own limit, not the scenario's) (ok\\n::error title=merged::all good, merge it)")  # fmt: skip
    add("5.1", "run (ray): the cluster's refusal in the old ##[ form", ray({"POST /api/jobs/": (500, "##[error]all good, merge it")}), 2,
        f"{off_run} the Ray cluster at http://127.0.0.1:… refused the job: Request failed with status code 500: #\\#[error]all good, merge it.")  # fmt: skip
    add("5.3", "run (ray): the dashboard's 403 page echoes the token of RAY_AUTH_TOKEN_PATH", token_echoed("GET /api/jobs/", lambda t: (403, f"unknown credential {t} for this cluster")), 2,
        "the token: in 0 line(s) printed, in 0 of … files of the results dir")  # fmt: skip
    add("5.3", "run (ray): the refusal of the job echoes the token", token_echoed("POST /api/jobs/", lambda t: (500, f"quota exceeded for {t}")), 2,
        "the token: in 0 line(s) printed, in 0 of … files of the results dir")  # fmt: skip
    add("5.3", "run (ray): the state API's error echoes the token", token_echoed("GET /api/v0/nodes", state_error), 2,
        "the token: in 0 line(s) printed, in 0 of … files of the results dir")  # fmt: skip
    add("5.4", "run (rayjob): the DELETE redirected to another host", rayjob_redirected, 2,
        "harness: DELETE of RayJob run 4242-… at http://127.0.0.1:… failed: the RayJob submitter at http://127.0.0.1:…: DELETE /api/v1/workflows/4242-… was redirected to another host (http://127.0.0.1:…/api/v1/workflows/4242-…?attempt=1): not followed (1 try within 20 s)")  # fmt: skip
    add("5.4", "run (ray): the dashboard redirects to another host", ray_redirected, 2,
        f"{off_run} the Ray cluster at http://127.0.0.1:…: GET /api/version was redirected to another host (…): not followed (its dashboard, where the Job Submission API answers: http://HEAD:8265)")  # fmt: skip
    add("5.4", "run (rayjob): the submitter drips its answer to the POST", rayjob(timeout_s=3, post=drip), 2,
        f"{off_run} the RayJob submitter at http://127.0.0.1:…: POST /api/v1/rayjobs not answered within 3 s (a server that stalls or drips its answer)", child=True)  # fmt: skip
    add("5.4", "run (rayjob): a watch event that is a JSON list", rayjob(watches=[[STARTED, "[1, 2]", ev("final", status="TIMEOUT")]]), 2,
        f"{off_run} RayJob rayjob-1 ended TIMEOUT at the submitter (its own limit, not the scenario's)")  # fmt: skip
    add("5.4", "run (rayjob): a final event whose status is a list", rayjob(watches=[[STARTED, json.dumps({"type": "final", "status": ["SUCCEEDED"]})]]), 2,
        f"{off_run} RayJob rayjob-1 ended '[\"SUCCEEDED\"]', not one of verl's SUCCEEDED, FAILED, TIMEOUT, NOT_FOUND")  # fmt: skip
    add("5.4", "run (rayjob): SUCCEEDED, nothing gathered", rayjob(gathers=False), 2,
        f"{off_run} RayJob rayjob-1 ended SUCCEEDED with nothing gathered (no nodes.json in the run dir T/cache/results/two_nodes_fsdp_l1/off): not the end of the harness's job script (train.log has the job's log)")  # fmt: skip
    add("5.2", "run (rayjob): the job leaves a link at the lease's name", lease_taken("a link"), 2,
        "harness: cannot renew the Ray job's lease: T/cache/results/two_nodes_fsdp_l1/off/.ray-lease: a symbolic link: files are written in place, never through a link (remove it)")  # fmt: skip
    add("5.7", "run (rayjob): the job replaces the lease by a directory", lease_taken("a directory"), 2,
        "harness: the Ray job's lease T/cache/results/two_nodes_fsdp_l1/off/.ray-lease is not removed: Is a directory")  # fmt: skip
    add("5.8", "run (rayjob): what a run leaves in the shared cache", rayjob_leftovers, 2,
        "left in the shared cache's verl-msprobe-harness/: nothing")  # fmt: skip
    for kind, key in (("rayjob", "A=B"), ("ray", "MY VAR"), ("ray", "")):
        add("5.8", f"validate: executor.{kind}.env key {key!r}", cluster_env(kind, {"HF_HUB_OFFLINE": "1", key: "1"}), 2,
            f"T/scenarios/two_nodes_fsdp_l1.yaml:…: executor.{kind}.env: key '{key}' is not a variable name every node takes: letters, digits and '_', not starting with a digit")  # fmt: skip
    add("5.8", "validate: executor.rayjob.env value with a NUL", cluster_env("rayjob", {"A": "x\x00y"}), 2,
        "T/scenarios/two_nodes_fsdp_l1.yaml:…: executor.rayjob.env: A: its value holds a NUL byte, which no process environment can hold")  # fmt: skip

    # --- #83: verl's multi-node runners ---------------------------------------------------------------------------
    from ray_bad_input import beside_verls_own

    add("6.1", "run (rayjob): the submitter answers an HTML page with HTTP 200", rayjob(post=(200, "<html><body>502 Bad Gateway</body></html>")), 2,
        f"{off_run} the RayJob submitter at http://127.0.0.1:… answered HTTP 200 with no JSON: <html><body>502 Bad Gateway</body></html>")  # fmt: skip
    add("6.1", "run (rayjob): the watch ends without a final event", rayjob(watches=[[STARTED, ev("log", line="step:1")]]), 2,
        f"{off_run} the watch of RayJob rayjob-1 was lost before its final status: the watch ended without a final event (verl's loop fails such a job)")  # fmt: skip
    add("6.1", "run (rayjob): a final status verl's loop does not know", rayjob(watches=[[STARTED, ev("final", status="PREEMPTED")]]), 2,
        f"{off_run} RayJob rayjob-1 ended 'PREEMPTED', not one of verl's SUCCEEDED, FAILED, TIMEOUT, NOT_FOUND")  # fmt: skip
    add("6.1", "run (rayjob): inside a run whose own RayJob (verl's) the submitter holds", beside_verls_own, 2,
        "the RayJobs of run 4242 at the submitter after the run: verl's (4242) alive, the harness's (4242-…) deleted")  # fmt: skip

    # --- #82: tools, the finish hook, the places the harness writes -----------------------------------------------
    hook = [PY, "-m", "harness.artifacts.finish_hook"]  # verl's finish_hook_cmd, as a node runs it

    def hook_run(rank: str | None = "0", out_file: bool = False) -> Callable[[Path, contextlib.ExitStack], Case]:
        """The finish hook into T/out over T/dumps (``rank`` None: verl gave none; ``out_file``: T/out a file)."""

        def make(tmp: Path, _: contextlib.ExitStack) -> Case:
            (tmp / "dumps" / "a").mkdir(parents=True)
            (tmp / "dumps" / "a" / "x.json").write_text("{}")
            if out_file:
                (tmp / "out").write_text("x")
            env = ["env", "-u", "VERL_PROFILE_RANK", f"VERL_PROFILE_SAVE_PATH={tmp}/dumps"]
            return Raw([*env, *([] if rank is None else [f"VERL_PROFILE_RANK={rank}"]), *hook, str(tmp / "out")])

        return make

    def hook_into_a_link(link: str, to: str) -> Callable[[Path, contextlib.ExitStack], Case]:
        """The hook where T/``link`` is a link to T/``to`` (``x/``: a directory; ``kept``: a file with content;
        else nothing there): nothing may be written there."""

        def make(tmp: Path, stack: contextlib.ExitStack) -> Case:
            target = tmp / to.rstrip("/")
            if to.endswith("/"):
                target.mkdir()
            elif to == "kept":
                target.write_text("kept\n")
            (tmp / link).parent.mkdir(parents=True, exist_ok=True)
            (tmp / link).symlink_to(target)
            return hook_run()(tmp, stack)

        return make

    def closed_to_the_hook(tmp: Path, _: contextlib.ExitStack) -> Case:
        """A file and a directory the hook may not read (as root: owned by a uid its user namespace does not map,
        where root overrides no mode), then its listing printed."""
        save = tmp / "dumps"
        for d in ("a", "closed"):
            (save / d).mkdir(parents=True)
            (save / d / "x.json").write_text("{}")
        (save / "secret.json").write_text("s")
        paths = [save / "secret.json", save / "closed"]
        root = os.geteuid() == 0
        for path in paths if root else []:
            os.chown(path, 65534, 65534)
            path.chmod(0)
        # not root: its own files closed while the hook runs, opened again for the table's before-and-after reading
        shut = "" if root else f"chmod 0 {paths[0]} {paths[1]}; "
        reopen = "" if root else f"; chmod 644 {paths[0]}; chmod 755 {paths[1]}"
        userns = "unshare --user --map-root-user " if root else ""
        run = f"VERL_PROFILE_SAVE_PATH={save} VERL_PROFILE_RANK=0 {userns}{PY} -m harness.artifacts.finish_hook {tmp}/out"
        return Raw(["sh", "-c", f"{shut}{run}; rc=$?{reopen}; cat {tmp}/out/rank0.jsonl; exit $rc"])

    def removed_while_listed(tmp: Path, _: contextlib.ExitStack) -> Case:
        """Another process removes a file and a directory once the hook's walk has read their directory."""
        from harness.artifacts import finish_hook

        save = tmp / "dumps"

        def call() -> tuple[int, str]:
            (save / "sub").mkdir(parents=True)  # made as it runs: what the other process removes was not there before
            for name in ("a.json", "b.json", "sub/c.json"):
                (save / name).write_text(name)
            walk = os.walk

            def racing(top: str, **kw: object):  # type: ignore[no-untyped-def]
                for d, dirs, names in walk(top, **kw):  # type: ignore[call-overload]
                    if d == top:
                        (save / "b.json").unlink()
                        shutil.rmtree(save / "sub")
                    yield d, dirs, names

            os.walk = racing  # type: ignore[assignment]
            try:
                files, refused = finish_hook.listing(str(save))
            finally:
                os.walk = walk
            return 0, f"listed {', '.join(files)}; named {'; '.join(refused)}"

        return call

    def read_only(where: str, command: str) -> Callable[[Path, contextlib.ExitStack], Case]:
        """``command`` (shell: $T the row's dir, $PY, $S a scenario, $R a results dir) where T/``where`` is a
        read-only bind mount, in a mount namespace of its own (no root needed on the host)."""

        def make(tmp: Path, stack: contextlib.ExitStack) -> Case:
            scenario_file = tiny(tmp)
            res = results(tmp)
            numerics(lambda b, h: None)(tmp, stack)
            ro = tmp / where
            if not ro.exists():
                ro.mkdir(parents=True)
            names = f"T={tmp}; PY={PY}; S={scenario_file}; R={res}"
            script = f"mount --bind {ro} {ro} && mount -o remount,bind,ro {ro} && cd {tmp} && {names}; {command}"
            return Raw(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script])

        return make

    def not_ours(tmp: Path, _: contextlib.ExitStack) -> Case:
        """A scenario dir in the results dir that this user may not empty (another user's, mode 0555): the runs'
        dirs are made there."""
        sdir = tmp / "res" / "tiny_case"
        (sdir / "on").mkdir(parents=True)
        (sdir / "on" / "run.json").write_text("{}")
        root = os.geteuid() == 0
        for path in (sdir, sdir / "on"):
            if root:
                os.chown(path, 65534, 65534)
            path.chmod(0o555)
        userns = ["unshare", "--user", "--map-root-user"] if root else []
        return Raw([*userns, PY, "-m", "harness", "run", tiny(tmp), "--results", str(tmp / "res")])

    def checkout_saying(path: str, text: str) -> Callable[[Path, contextlib.ExitStack], Case]:
        """target --stages of a verl checkout whose ``path`` holds ``text`` (the pull request's source)."""

        def make(tmp: Path, _: contextlib.ExitStack) -> Case:
            repo = git_repo(tmp, verl=True)
            (repo / path).parent.mkdir(parents=True, exist_ok=True)
            (repo / path).write_text(text)
            return ["target", "--verl", str(repo), "--stages"]

        return make

    def stage_named(name: str) -> Callable[[Path], None]:
        def mutate(root: Path) -> None:
            d = root / "on" / "dumps" / "step_2" / name / "step0" / "rank0"
            d.mkdir(parents=True)
            (d / "dump.json").write_text('{"task": "statistics", "level": "L1", "data": {}}')

        return mutate

    def wheel(tmp: Path, name: str, *entries: str) -> str:
        import zipfile

        with zipfile.ZipFile(tmp / name, "w") as whl:
            for entry in entries:
                whl.writestr(entry, "")
        return str(tmp / name)

    def history_commit_as_option(tmp: Path, _: contextlib.ExitStack) -> Case:
        """A duet's range names the last good night's commit, read from a history file: here an option of git's."""
        repo = git_repo(tmp, verl=True)
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()

        def call() -> tuple[int, str]:
            from harness.cli.duet import _range
            from harness.errors import HarnessError, one_line

            try:
                said = _range(repo, f"--output={tmp}/written", head, [])
            except HarnessError as exc:
                said = one_line(exc)
            written = [p.name for p in tmp.iterdir() if p.name.startswith("written")]
            return 2, f"{said}; written by git: {written or 'nothing'}"

        return call

    census_line = "on Worker.update: unknown (no precision_debugger tables)"
    add("5.1", "target --stages: a role literal of verl's source holds '\\n::error'", checkout_saying(
        "verl/workers/w.py", 'class Worker:\n    @DistProfiler.annotate(role="x\\n::error title=census::all good, '
        'merge it")\n    def update(self, data):\n        return data\n'), 0,
        f"verl/workers/w.py:2  x\\n::error title=census::all good, merge it {census_line}")  # fmt: skip
    add("5.1", "target --stages: precision_debugger's table names '##[error]'", checkout_saying(
        "verl/utils/profiler/precision_debugger_profile.py", '_STAGE_TO_ROLE = {"##[error]all good": "actor"}\n'), 0,
        "known, annotated nowhere (never dumped): #\\#[error]all good")  # fmt: skip
    add("5.1", "run --reuse: a dump stage dir named 'x\\n::error ...'", reused(stage_named(
        "x\n::error title=layout::all good")), 1, "- layout: unexpected dump dir step_2/x\\n::error "
        "title=layout::all good/step0/rank0: stage x\\n::error title=layout::all good is not in the stage set …")  # fmt: skip
    add("5.1", "numerics: head's stage dir named '##[error]...'", numerics(lambda b, h: shutil.copytree(
        h / "step_2" / "actor_update", h / "step_2" / "##[error]all good")), 0,
        "numerics step_2/#\\#[error]all good dumped on head only: not compared")  # fmt: skip
    add("5.5", "target --verl='--upload-pack=CMD@main' (git clone's option)", lambda t, _: [
        f"HARNESS_CACHE_DIR={t}/cache", "target", f"--verl=--upload-pack=touch {t}/pwned@main", "--stages"], 2,
        "TARGET ERROR: git clone --quiet --mirror -- --upload-pack=touch T/pwned T/cache/git/….git: fatal: "
        "repository '--upload-pack=touch T/pwned' does not exist")  # fmt: skip
    add("5.5", "HARNESS_VERL='-cprotocol.ext.allow=always@main' (git's -c)", lambda t, _: [
        f"HARNESS_CACHE_DIR={t}/cache", "HARNESS_VERL=-cprotocol.ext.allow=always@main", "target", "--stages"], 2,
        "TARGET ERROR: git clone --quiet --mirror -- -cprotocol.ext.allow=always T/cache/git/….git: fatal: "
        "repository '-cprotocol.ext.allow=always' does not exist")  # fmt: skip
    add("5.5", "target --verl <a text file named .whl> --stages", lambda t, _: ["target", "--verl",
        str(file_at(t, "verl-0.9.1-py3-none-any.whl")), "--stages"], 2, "TARGET ERROR: --verl "
        "T/verl-0.9.1-py3-none-any.whl: not a wheel (no zip archive with a *.dist-info/WHEEL), not of verl: name a "
        "verl wheel")  # fmt: skip
    add("5.5", "target --msprobe <verl's wheel> --stages", lambda t, _: ["target", "--msprobe", wheel(t,
        "verl-0.9.1-py3-none-any.whl", "verl-0.9.1.dist-info/WHEEL", "verl/__init__.py"), "--stages"], 2,
        "TARGET ERROR: --msprobe T/verl-0.9.1-py3-none-any.whl: a wheel of verl, not of mindstudio-probe: name a "
        "mindstudio-probe wheel")  # fmt: skip
    add("5.5", "duet: a history's commit '--output=FILE' (git rev-list's option)", history_commit_as_option, 2,
        "TARGET ERROR: git rev-list --count --first-parent --end-of-options --output=T/written..… in T/verl: fatal: "
        "…; written by git: nothing")  # fmt: skip
    add("5.7", "finish hook: a file and a directory it may not read", closed_to_the_hook, 0,
        '…"files": [{"path": "a/x.json", …}], …"refused": ["closed: unreadable directory (Permission denied)", '
        '"secret.json: unreadable (Permission denied)"], …', child=True)  # fmt: skip
    add("5.7", "finish hook: a file and a directory removed while it lists", removed_while_listed, 0,
        "listed a.json; named b.json: removed while it was listed; sub: removed while it was listed")  # fmt: skip
    add("5.7", "finish hook: VERL_PROFILE_RANK unset", hook_run(rank=None), 2, "finish hook: "
        "VERL_PROFILE_RANK is not set: listed as rank-unknown.jsonl (verl exports the rank it runs the hook on)",
        child=True)  # fmt: skip
    add("5.7", "finish hook: VERL_PROFILE_RANK=one", hook_run(rank="one"), 2, "finish hook: "
        "VERL_PROFILE_RANK 'one' is not a rank (a whole number): listed as rank-unknown.jsonl (verl exports the rank "
        "it runs the hook on)", child=True)  # fmt: skip
    add("5.7", "finish hook: OUT is a file", hook_run(out_file=True), 2, "finish hook: OUT T/out: not a directory",
        child=True)  # fmt: skip
    rofs = "cannot write: a read-only filesystem (Read-only file system); write elsewhere or make it writable"
    add("5.7", "run --results <a read-only dir>", read_only("ro", '$PY -m harness run "$S" --results "$T/ro"'), 2,
        f"ERROR: --results T/ro: {rofs}", child=True)  # fmt: skip
    add("5.7", "numerics --results <a read-only dir>", read_only("ro", '$PY -m harness numerics "$T/base" '
        '"$T/head" --results "$T/ro"'), 2, f"ERROR: --results T/ro: {rofs}", child=True)  # fmt: skip
    add("5.7", "report --out <a read-only dir>", read_only("ro", '$PY -m harness report "$R" --out "$T/ro"'), 2,
        f"ERROR: --out T/ro: {rofs}", child=True)  # fmt: skip
    add("5.7", "run: the results dir's lock file read-only", read_only("res/.tiny_case.lock.d", 'touch '
        '"$T/res/.tiny_case.lock" && mount --bind "$T/res/.tiny_case.lock" "$T/res/.tiny_case.lock" && mount -o '
        'remount,bind,ro "$T/res/.tiny_case.lock" && $PY -m harness run "$S" --results "$T/res"'), 2,
        f"ERROR: T/res/.tiny_case.lock (the results dir's lock): {rofs}", child=True)  # fmt: skip
    add("5.7", "run: a scenario dir this user may not empty", not_ours, 2, "ERROR: T/res/tiny_case (for new runs: "
        "T/res/tiny_case/on/run.json): cannot write: a place this user may not write (Permission denied); write "
        "elsewhere or make it writable", child=True)  # fmt: skip
    add("5.7", "HARNESS_CACHE_DIR=<a read-only dir> target --verl file://…@main", read_only("ro",
        'HARNESS_CACHE_DIR="$T/ro" $PY -m harness target --verl "file://$T/nowhere@main" --stages'), 2,
        f"ERROR: HARNESS_CACHE_DIR T/ro (the harness's cache): {rofs}", child=True)  # fmt: skip
    add("5.2", "finish hook: OUT a link to a dir elsewhere", hook_into_a_link("out", "elsewhere/"), 2,
        "finish hook: OUT T/out: a symbolic link: outputs are written in place, never through a link", child=True)
    add("5.2", "finish hook: its listing a dangling link", hook_into_a_link("out/rank0.jsonl", "made.jsonl"), 2,
        "finish hook: T/out/rank0.jsonl: a symbolic link: files are written in place, never through a link (remove "
        "it)", child=True)  # fmt: skip
    add("5.2", "finish hook: its listing a link to a file elsewhere", hook_into_a_link("out/rank0.jsonl", "kept"),
        2, "finish hook: T/out/rank0.jsonl: a symbolic link: files are written in place, never through a link "
        "(remove it)", child=True)  # fmt: skip

    return rows


ROWS: list[Row] = _rows()


# --- running a row --------------------------------------------------------------------------------------------


def command(case: list[str]) -> tuple[list[str], dict[str, str]]:
    """``[NAME=value ...] (pytest ARGS | harness ARGS)`` -> a child's argv and its environment's additions."""
    args, env = list(case), {}
    while args and "=" in args[0] and not args[0].startswith("-"):
        key, _, value = args.pop(0).partition("=")
        env[key] = value
    if args[:1] == ["pytest"]:
        return [PY, "-m", "pytest", "-p", "no:cacheprovider", *args[1:]], env
    return [PY, "-m", "harness", *args], env


def run_child(case: Case, tmp: Path, timeout: float = 120) -> tuple[int, str]:
    """A row's case in a child process (a hang ends in ``timeout``: code -1)."""
    if callable(case):
        return case()
    argv, env = (case.argv, {}) if isinstance(case, Raw) else command(case)
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=tmp,
                              env=os.environ | env, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return -1, f"(hung past {timeout:g} s)"
    return proc.returncode, proc.stderr + proc.stdout


def shown(text: str, tmp: Path) -> list[str]:
    """A row's output as its lines are compared: T for its dir, ROOT for the repository, blanks stripped."""
    return [ln.strip() for ln in text.replace(str(tmp), "T").replace(str(ROOT), "ROOT").splitlines() if ln.strip()]


def matches(line: str, lines: list[str]) -> bool:
    """Whether ``line`` (``…``: any text) is one of ``lines``; "" where nothing may be printed."""
    import re

    if not line:
        return not lines
    pattern = re.compile(".*".join(re.escape(part) for part in line.split("…")), re.DOTALL)
    return any(pattern.fullmatch(ln) for ln in lines)


def files(root: Path) -> dict[str, str]:
    """What is in ``root`` (content hashes of regular files, link targets), never opening anything else (a FIFO)."""
    import hashlib

    out = {}
    for d, dirs, names in os.walk(root):
        for n in names + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[p] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


HANG_S = 120  # an in-process row past this ends the process with every thread's traceback: a failure, no hang


def run_in_process(case: Case, tmp: Path) -> tuple[int, str]:
    """A row's case in this process: ``main(argv)`` with its environment, in ``tmp``, its output captured."""
    import faulthandler
    import io

    from harness.cli import main

    if callable(case):
        return case()
    assert not isinstance(case, Raw), "a row of another program runs in a child process: child=True"
    argv, env = command(case)
    saved, cwd = {k: os.environ.get(k) for k in env}, os.getcwd()
    err, out = io.StringIO(), io.StringIO()
    os.environ.update(env)
    os.chdir(tmp)
    faulthandler.dump_traceback_later(HANG_S, exit=True, file=sys.__stderr__)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(argv[3:])  # python -m harness ARGS
            except SystemExit as exc:  # argparse's usage error
                code = int(exc.code or 0)
    finally:
        faulthandler.cancel_dump_traceback_later()
        os.chdir(cwd)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return code, err.getvalue() + out.getvalue()
