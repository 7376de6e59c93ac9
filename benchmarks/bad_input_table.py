"""Every bad input of tests/test_bad_input.py, given to the real command line: what each prints and its exit code.

Not a test (the tests are tests/test_bad_input.py): a table for people, run by hand. Each case runs
``python -m harness ...`` (or ``python -m pytest ...``; leading ``NAME=value`` words set the environment) in a
child process in a fresh temp dir; a case that prints a traceback, does not end in 60 s, or changes or removes a
file that was there before it ran (an output written over an input) is marked BAD. Cases that need a training
(the lock, ENOSPC inside a run) are tests, not rows here.

    .venv/bin/python benchmarks/bad_input_table.py            # markdown table on stdout
    .venv/bin/python benchmarks/bad_input_table.py "^[1-7] "  # only the rows whose name matches a regex
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from builders import BASE, merge  # noqa: E402
from gate_builders import write_results  # noqa: E402
from test_bad_input import ENOSPC_CHILD  # noqa: E402

Case = tuple[str, Callable[[Path], list[str]]]


def scenario(tmp: Path, text: str | bytes, name: str = "bad_case.yaml", sub: str = "scenarios") -> list[str]:
    path = tmp / sub / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["validate", str(path)]


def edited(**over: object) -> Callable[[Path], list[str]]:
    return lambda tmp: scenario(tmp, yaml.safe_dump(merge(BASE, over), sort_keys=False))


def docker(**opts: object) -> Callable[[Path], list[str]]:
    return edited(executor={"kind": "docker", "docker": opts})


def fifo(tmp: Path) -> list[str]:
    (tmp / "scenarios").mkdir()
    os.mkfifo(tmp / "scenarios" / "fifo.yaml")
    return ["validate", str(tmp / "scenarios" / "fifo.yaml")]


def good_results(tmp: Path) -> Path:
    res = tmp / "res"
    write_results(res, "tiny_case", dumps=False)
    return res / "tiny_case" / "results.json"


def corrupt(content: Callable[[dict], object] | bytes, command: str) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        path = good_results(tmp)
        baseline = tmp / "baseline.json"
        if command == "gate":
            merge = [sys.executable, "-m", "harness", "baseline", "merge", str(path.parent.parent), "-o", str(baseline)]
            subprocess.run(merge, capture_output=True, check=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(json.dumps(content(json.loads(path.read_text()))))
        return {
            "gate": ["gate", "--baseline", str(baseline), "--results", str(path.parent.parent)],
            "merge": ["baseline", "merge", str(path.parent.parent), "-o", str(tmp / "b2.json")],
            "report": ["report", str(path.parent.parent), "--out", str(tmp / "report")],
        }[command]

    return make


def link_results(tmp: Path) -> list[str]:
    path = good_results(tmp)
    outside = tmp / "outside.json"
    outside.write_text('{"keep": true}')
    path.unlink()
    path.symlink_to(outside)
    return ["report", str(path.parent.parent), "--out", str(tmp / "report")]


def junit(tmp: Path) -> list[str]:
    (tmp / "a.xml").write_text('<?xml version="1.0"?><testsuites><testsuite name="x"><testcase name="a" cl')
    return ["junit-merge", str(tmp / "out.xml"), str(tmp / "a.xml")]


def results_file(command: str) -> Callable[[Path], list[str]]:
    def make(tmp: Path) -> list[str]:
        (tmp / "file").write_text("x")
        sc = scenario(tmp, yaml.safe_dump(merge(BASE, {}), sort_keys=False), "tiny_case.yaml")[1]
        if command == "run":
            return ["run", sc, "--results", str(tmp / "file")]
        return ["gate", "--baseline", str(tmp / "file"), "--results", str(tmp / "file")]

    return make


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


CASES: list[Case] = [
    # 1. writes outside the results dir
    ("report: results.json `scenario: ../x`", corrupt(setin("scenario", "../x"), "report")),
    ("report: results.json `scenario: /tmp/abs`", corrupt(setin("scenario", "/tmp/abs"), "report")),
    ("report: results.json is a symlink", link_results),
    # 2. container settings
    ("docker: host / mounted rw", docker(mounts=[{"source": "/", "target": "/host", "read_only": False}])),
    ("docker: the docker socket", docker(mounts=[{"source": "/var/run/docker.sock", "target": "/s"}])),
    ("docker: /var/run (holds the socket)", docker(mounts=[{"source": "/var/run", "target": "/r"}])),
    ("docker: user 0:0 (the harness runs as root here: allowed)", docker(user="0:0")),
    ("docker: LD_PRELOAD in env", docker(env={"LD_PRELOAD": "/x.so"})),
    ("docker: PYTHONPATH passed", docker(pass_env=["PYTHONPATH"])),
    ("docker: npu_devices on a cpu scenario", docker(npu_devices=[0])),
    ("docker: host network, no accelerators", docker(network="host")),
    ("docker: privileged: true", docker(privileged=True)),
    ("docker: cap_add", docker(cap_add=["SYS_ADMIN"])),
    ("docker: unsafe: true, no reason", docker(network="host", unsafe=True)),
    ("docker: unsafe: true with a reason (accepted)", docker(network="host", unsafe=True, unsafe_reason="debug")),
    # 5. tracebacks before
    ("validate: non-UTF-8 file", lambda t: scenario(t, b"description: \xff\xfe\n")),
    ("validate: binary file", lambda t: scenario(t, bytes(range(256)) * 4)),
    ("validate: 50,000 nested [", lambda t: scenario(t, "[" * 50_000)),
    ("validate: file over 1 MB", lambda t: scenario(t, "description: " + "x" * (1 << 20) + "\n")),
    ("validate: dir name with ':' (bad file)", lambda t: scenario(t, "engine: x\n", sub="a:b/scenarios")),
    ("validate: steps: 100000000", edited(steps=100_000_000)),
    ("validate: FIFO named .yaml", fifo),
    ("validate: /dev/zero", lambda t: ["validate", "/dev/zero"]),
    ("validate: a directory named .yaml", lambda t: (t / "d.yaml").mkdir() or ["validate", str(t / "d.yaml")]),
    ("validate: timestamp 2024-13-45", lambda t: scenario(t, "description: 2024-13-45\n")),
    ("validate: !!python/object tag", lambda t: scenario(t, "description: !!python/object:os.system {}\n")),
    ("junit-merge: truncated XML", junit),
    ("run --results FILE", results_file("run")),
    ("gate --baseline FILE --results FILE", results_file("gate")),
    # 6. accepted nonsense before
    (
        "validate: duplicate key (executor twice)",
        lambda t: scenario(
            t, yaml.safe_dump(merge(BASE, {}), sort_keys=False) + "executor: {kind: local}\nexecutor: {kind: docker}\n"
        ),
    ),
    ("validate: timeout_s: .inf", edited(executor={"timeout_s": float("inf")})),
    ("validate: max_per_step: true", edited(budgets={"disk": {"max_per_step": True}})),
    ("validate: world_size: true", edited(world_size=True)),
    ("validate: max_profiled_ratio: .nan", edited(budgets={"overhead": {"max_profiled_ratio": float("nan")}})),
]
for cmd in ("gate", "merge", "report"):
    CASES += [
        (f"{cmd}: results.json empty", corrupt(b"", cmd)),
        (f"{cmd}: results.json truncated", corrupt(b'{"scenario": "tiny_case", "checks": {', cmd)),
        (f"{cmd}: results.json binary", corrupt(bytes(range(256)), cmd)),
        (f"{cmd}: results.json `[]`", corrupt(lambda d: [], cmd)),
        (f"{cmd}: results.json `null`", corrupt(lambda d: None, cmd)),
        (f"{cmd}: results.json nested 100,000 deep", corrupt(b"[" * 100_000, cmd)),
        (f"{cmd}: no scenario", corrupt(drop("scenario"), cmd)),
        (f"{cmd}: checks a list", corrupt(setin("checks", []), cmd)),
        (f"{cmd}: check passed 'yes'", corrupt(setin("checks.overhead.passed", "yes"), cmd)),
        (f"{cmd}: figures a list", corrupt(setin("checks.overhead.figures", [1]), cmd)),
        (f"{cmd}: figure a dict", corrupt(setin("checks.overhead.figures", {"overhead.wall.profiled": {"a": 1}}), cmd)),
        (f"{cmd}: runs a list", corrupt(setin("runs", [1]), cmd)),
        (f"{cmd}: exit_code 'x'", corrupt(setin("runs.off", {"exit_code": "x"}), cmd)),
        (f"{cmd}: settings a string", corrupt(setin("settings", "s"), cmd)),
        (f"{cmd}: environment a list", corrupt(setin("environment", []), cmd)),
    ]


# --- the second battery -----------------------------------------------------------------------------------------

SHA = "1" + "a" * 39  # a sha that starts with a digit: the old version pattern's worst case (0.8 s at 24 characters)
REAL_CPU = str(ROOT / "scenarios" / "real_fsdp_l1.yaml")  # verl's trainer, device cpu: the local executor only


def tiny(tmp: Path) -> str:
    return scenario(tmp, yaml.safe_dump(merge(BASE, {}), sort_keys=False), "tiny_case.yaml")[1]


def results(tmp: Path, name: str = "res") -> Path:
    write_results(tmp / name, "tiny_case", dumps=False)
    return tmp / name


def merged(tmp: Path) -> tuple[Path, Path]:
    res, baseline = results(tmp), tmp / "baseline.json"
    argv = [sys.executable, "-m", "harness", "baseline", "merge", str(res), "-o", str(baseline)]
    subprocess.run(argv, capture_output=True, check=True)
    return res, baseline


def bad_baseline(mutate: Callable[[dict], object]) -> Callable[[Path], list[str]]:
    """gate against a baseline whose one scenario ``mutate`` changed."""

    def make(tmp: Path) -> list[str]:
        res, baseline = merged(tmp)
        doc = json.loads(baseline.read_text())
        mutate(doc["scenarios"]["tiny_case"])
        baseline.write_text(json.dumps(doc))
        return ["gate", "--baseline", str(baseline), "--results", str(res)]

    return make


def every(key: str, value: object) -> Callable[[dict], object]:
    return lambda sb: sb[key].update(dict.fromkeys(sb[key], value))


def figure(name: str, value: object) -> Callable[[dict], dict]:
    def f(d: dict) -> dict:
        d["checks"]["overhead"]["figures"][name] = value
        return d

    return f


def git_repo(tmp: Path) -> Path:
    repo = tmp / "verl"
    repo.mkdir()
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    for argv in (["init", "-q"], [*ident, "commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", *argv], cwd=repo, check=True, capture_output=True)
    return repo


def junit_file(tmp: Path) -> Path:
    path = tmp / "a.xml"
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="x"><testcase name="a"/></testsuite></testsuites>'
    )
    return path


def same_name(tmp: Path) -> list[str]:
    return ["validate", tiny(tmp / "a"), tiny(tmp / "b")]


def compare(*opts: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["compare", tiny(tmp), "--base", "0.9.1", "--head", "0.9.1", *opts]


def copied(tmp: Path) -> list[str]:
    res = results(tmp)
    shutil.copytree(res, tmp / "copy")
    return ["calibrate", str(res), str(tmp / "copy"), "-o", str(tmp / "c.json")]


def file_at(tmp: Path, name: str = "file") -> Path:
    (tmp / name).write_text("x")
    return tmp / name


STAGE_OFF = {"required_patterns": {"ref_compute_log_prob": ["^x"]}}
CASES += [
    # 1. hangs: the version pattern backtracked (65-90 s and more, SIGINT ignored meanwhile)
    ("1 target --verl <40-hex sha>~1", lambda t: ["target", "--verl", SHA + "~1"]),
    ("1 target --msprobe 26.2.0-a x38!", lambda t: ["target", "--msprobe", "26.2.0-" + "a" * 38 + "!"]),
    ("1 HARNESS_VERL=<40-hex sha>~1 target", lambda t: [f"HARNESS_VERL={SHA}~1", "target"]),
    ("1 HARNESS_MSPROBE=26.2.0-a x38! target", lambda t: ["HARNESS_MSPROBE=26.2.0-" + "a" * 38 + "!", "target"]),
    ("1 compare --base <40-hex sha>~1", lambda t: ["compare", tiny(t), "--base", SHA + "~1", "--head", "0.9.1"]),
    # 2. counts bounded at the edge
    ("2 compare --repeats 1000000000", compare("--repeats", "1000000000")),
    ("2 compare --max-repeats 1000000000", compare("--max-repeats", "1000000000")),
    ("2 compare --repeats 0", compare("--repeats", "0")),
    ("2 compare --repeats ³ (a unicode digit)", compare("--repeats", "\u00b3")),
    (
        "2 pytest --harness-compare-repeats 1000000000",
        lambda t: ["pytest", "--co", "--harness-compare-repeats", "1000000000"],
    ),
    ("2 pytest --harness-compare-repeats 0", lambda t: ["pytest", "--co", "--harness-compare-repeats", "0"]),
    (
        "2 pytest --harness-compare-max-repeats 1000000000",
        lambda t: ["pytest", "--co", "--harness-compare-max-repeats", "1000000000"],
    ),
    # 3. tracebacks before
    (
        "3 HARNESS_CACHE_DIR=<file> target --verl 0.9.0",
        lambda t: [f"HARNESS_CACHE_DIR={file_at(t)}", "target", "--verl", "0.9.0"],
    ),
    (
        "3 HARNESS_CACHE_DIR=<file> run",
        lambda t: [f"HARNESS_CACHE_DIR={file_at(t)}", "run", tiny(t), "--results", str(t / "r")],
    ),
    ("3 report --out <existing file>", lambda t: ["report", str(results(t)), "--out", str(file_at(t))]),
    ("3 schema -o <dir>", lambda t: ["schema", "-o", str(t)]),
    ("3 schema -o <missing parent>/x.json (made)", lambda t: ["schema", "-o", str(t / "missing" / "x.json")]),
    ("3 schema -o <file>/x.json", lambda t: ["schema", "-o", str(file_at(t) / "x.json")]),
    ("3 junit-merge <dir> a.xml", lambda t: ["junit-merge", str(t), str(junit_file(t))]),
    (
        "3 image ascend-context --out <file>",
        lambda t: ["image", "ascend-context", "--verl", str(git_repo(t)), "--out", str(file_at(t))],
    ),
    (
        "3 report on a results dir whose path holds byte 0xff",
        lambda t: ["report", os.fsdecode(bytes(results(t, "res")) + b"\xff")],
    ),
    ("3 report: results.json figure NaN", corrupt(figure("overhead.wall.profiled", math.nan), "report")),
    ("3 report: results.json figure Infinity", corrupt(figure("overhead.wall.profiled", math.inf), "report")),
    ("3 target --verl <300-character name> (ENAMETOOLONG)", lambda t: ["target", "--verl", "a" * 300]),
    ("3 target --verl <300-character name>.whl", lambda t: ["target", "--verl", "a" * 300 + ".whl"]),
    ("3 HARNESS_MAX_DUMP=lots compare", lambda t: ["HARNESS_MAX_DUMP=lots", *compare()(t)]),
    (
        "3 baseline merge --k disk=abc",
        lambda t: ["baseline", "merge", str(results(t)), "-o", str(t / "b.json"), "--k", "disk=abc"],
    ),
    # 4. accepted nonsense: baselines, results.json figures, calibration, policy
    ("4 gate: baseline tolerances -0.5", bad_baseline(every("tolerances", -0.5))),
    ("4 gate: baseline tolerances NaN", bad_baseline(every("tolerances", math.nan))),
    (
        "4 gate: baseline figure 'nanx'",
        bad_baseline(lambda sb: sb["figures"].update({"overhead.wall.unprofiled": "nanx"})),
    ),
    (
        "4 gate: baseline figure NaN",
        bad_baseline(lambda sb: sb["figures"].update({"overhead.wall.profiled": math.nan})),
    ),
    ("4 gate: baseline runs 0", bad_baseline(lambda sb: sb.update(runs=0))),
    (
        "4 gate: baseline ratio sample 0",
        bad_baseline(lambda sb: sb["ratio_samples"]["overhead.wall.profiled"][0].update({"step2.rank0": 0})),
    ),
    ("4 gate: results.json figure NaN", corrupt(figure("overhead.wall.profiled", math.nan), "gate")),
    ("4 gate: results.json figure 'fast'", corrupt(figure("overhead.wall.unprofiled", "fast"), "gate")),
    ("4 merge: results.json figure NaN", corrupt(figure("overhead.wall.profiled", math.nan), "merge")),
    (
        "4 merge: results.json disk figure -1",
        corrupt(lambda d: d["checks"]["disk"]["figures"].update({"disk.total_bytes": -1}) or d, "merge"),
    ),
    ("4 calibrate R R", lambda t: ["calibrate", str(results(t)), str(t / "res"), "-o", str(t / "c.json")]),
    ("4 calibrate R <a copy of R>", copied),
    (
        "4 baseline merge --k overhead=-1",
        lambda t: ["baseline", "merge", str(results(t)), "-o", str(t / "b.json"), "--k", "overhead=-1"],
    ),
    (
        "4 baseline merge --floor disk=nan",
        lambda t: ["baseline", "merge", str(results(t)), "-o", str(t / "b.json"), "--floor", "disk=nan"],
    ),
    (
        "4 calibrate --floor disk=-0.5",
        lambda t: [
            "calibrate",
            str(results(t)),
            str(results(t, "r2")),
            "-o",
            str(t / "b.json"),
            "--floor",
            "disk=-0.5",
        ],
    ),
    ("4 baseline merge --k -1", lambda t: ["baseline", "merge", str(results(t)), "-o", str(t / "b.json"), "--k", "-1"]),
    # 5. scenarios
    ("5 validate: required_patterns for a stage not profiled", edited(expect=STAGE_OFF)),
    ("5 validate: min_entries 10 above max_entries 5", edited(expect={"min_entries": 10, "max_entries": 5})),
    ("5 validate: max_total: 0", edited(budgets={"disk": {"max_total": 0}})),
    ("5 validate: max_profiled_ratio: 0.5", edited(budgets={"overhead": {"max_profiled_ratio": 0.5}})),
    (
        "5 validate: max_stage_ratio {actor_update: 0}",
        edited(budgets={"overhead": {"max_stage_ratio": {"actor_update": 0}}}),
    ),
    ("5 validate: two files named tiny_case in one run", same_name),
    # 6. options
    ("6 run --executor docker on a device cpu verl_ppo scenario", lambda t: ["run", REAL_CPU, "--executor", "docker"]),
    (
        "6 compare --executor docker on a device cpu verl_ppo scenario",
        lambda t: ["compare", REAL_CPU, "--base", "0.9.1", "--head", "0.9.1", "--executor", "docker"],
    ),
    ("6 target --series 'main\\nREGRESSED fake'", lambda t: ["target", "--series", "main\nREGRESSED fake"]),
    ("6 HARNESS_SERIES='main\\nREGRESSED fake' target", lambda t: ["HARNESS_SERIES=main\nREGRESSED fake", "target"]),
    ("6 target --verl '0.9.1\\nREGRESSED'", lambda t: ["target", "--verl", "0.9.1\nREGRESSED"]),
    ("6 run --progress-every -5", lambda t: ["run", tiny(t), "--progress-every", "-5"]),
    ("6 run --progress-every nan", lambda t: ["run", tiny(t), "--progress-every", "nan"]),
    ("6 pytest --harness-progress-every inf", lambda t: ["pytest", "--co", "--harness-progress-every", "inf"]),
    ("6 HARNESS_MAX_DUMP=lots run", lambda t: ["HARNESS_MAX_DUMP=lots", "run", tiny(t), "--results", str(t / "r")]),
    ("6 HARNESS_MIN_FREE=-1GB run", lambda t: ["HARNESS_MIN_FREE=-1GB", "run", tiny(t), "--results", str(t / "r")]),
    ("6 run --max-dump 0", lambda t: ["run", tiny(t), "--max-dump", "0", "--results", str(t / "r")]),
    (
        "6 target --verl file:///nonexistent@main (git clone)",
        lambda t: ["target", "--verl", f"file://{t}/nonexistent@main"],
    ),
    # 7. data loss: outputs that are inputs
    (
        "7 baseline merge R -o R/tiny_case/results.json",
        lambda t: ["baseline", "merge", str(results(t)), "-o", str(t / "res" / "tiny_case" / "results.json")],
    ),
    (
        "7 gate --json R/tiny_case/results.json",
        lambda t: [
            "gate",
            *(
                lambda r, b: [
                    "--baseline",
                    str(b),
                    "--results",
                    str(r),
                    "--json",
                    str(r / "tiny_case" / "results.json"),
                ]
            )(*merged(t)),
        ],
    ),
    (
        "7 calibrate R R2 -o R/tiny_case/results.json",
        lambda t: [
            "calibrate",
            str(results(t)),
            str(results(t, "r2")),
            "-o",
            str(t / "res" / "tiny_case" / "results.json"),
        ],
    ),
    (
        "7 baseline merge R -o B --tolerances-from B",
        lambda t: [
            "baseline",
            "merge",
            *(lambda r, b: [str(r), "-o", str(b), "--tolerances-from", str(b)])(*merged(t)),
        ],
    ),
    (
        "7 gate --baseline B --json B",
        lambda t: ["gate", *(lambda r, b: ["--baseline", str(b), "--results", str(r), "--json", str(b)])(*merged(t))],
    ),
    ("7 junit-merge a.xml a.xml", lambda t: ["junit-merge", str(junit_file(t)), str(t / "a.xml")]),
    ("7 report R --out R", lambda t: ["report", str(results(t)), "--out", str(t / "res")]),
    ("7 report R --out R/tiny_case", lambda t: ["report", str(results(t)), "--out", str(t / "res" / "tiny_case")]),
    (
        "7 report T/R1 T/R2 --out T (its PNG dirs are R1, R2)",
        lambda t: ["report", str(results(t)), str(results(t, "r2")), "--out", str(t)],
    ),
    (
        "7 image ascend-context --out <inside the verl checkout>",
        lambda t: ["image", "ascend-context", "--verl", str(git_repo(t)), "--out", str(t / "verl" / "ctx")],
    ),
    (
        "7 image ascend-context --out <inside the harness>",
        lambda t: ["image", "ascend-context", "--verl", str(git_repo(t)), "--out", str(ROOT / "harness" / "ctx")],
    ),
]


def enospc(tmp: Path) -> str:
    """A real ENOSPC: a 256 KB tmpfs in a private mount namespace."""
    script = f'mount -t tmpfs -o size=256k tmpfs {tmp} && exec {sys.executable} -c "$0" {tmp}'
    argv = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, ENOSPC_CHILD]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return " / ".join((proc.stdout + proc.stderr).strip().splitlines())


def results_link(tmp: Path) -> str:
    from harness.artifacts.record import ExecResult, RunRecord
    from harness.artifacts.rundir import ScenarioDir
    from harness.checks.base import CheckResult
    from harness.checks.results import record_check
    from harness.scenario.loader import load_scenario
    from harness.training.runs import ScenarioRuns

    sdir = ScenarioDir(tmp / "res" / "tiny_case")
    sdir.root.mkdir(parents=True)
    outside = tmp / "outside.txt"
    outside.write_text("keep me")
    sdir.results.symlink_to(outside)
    rec = RunRecord("off", "local", ["python"], ExecResult(exit_code=0, wall_s=1.0))
    runs = ScenarioRuns(sdir, "s", {"off": rec}, 0.0, target={"block": None, "environment": {}})
    sc = load_scenario(scenario(tmp, yaml.safe_dump(BASE, sort_keys=False), "tiny_case.yaml")[1])
    record_check(sc, runs, CheckResult("disk"))
    return f"outside file still {outside.read_text()!r}; results.json a link: {sdir.results.is_symlink()}"


def metrics(value: object) -> Callable[[Path], str]:
    def make(tmp: Path) -> str:
        from harness.artifacts.rundir import ScenarioDir
        from harness.checks import CHECKS
        from harness.checks.base import CheckContext
        from harness.scenario.loader import load_scenario

        sc = load_scenario(scenario(tmp, yaml.safe_dump(BASE, sort_keys=False), "tiny_case.yaml")[1])
        sdir = ScenarioDir(tmp / "res" / "tiny_case")
        for mode in ("off", "on"):
            path = sdir.run(mode).metrics
            path.parent.mkdir(parents=True)
            rows = [{"step": n, "data": {"timing_s/step": 1.0 if n != 3 else value}} for n in range(1, 6)]
            path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        return "overhead check: " + "; ".join(CHECKS["overhead"](CheckContext(sc, sdir)).problems)

    return make


def root_user(tmp: Path) -> str:
    from harness.scenario.settings.docker import DockerRuntime

    return "; ".join(DockerRuntime(user="0:0").risks("cpu", host_uid=1000))


IN_PROCESS: list[tuple[str, Callable[[Path], str]]] = [
    ("docker: user 0:0, the harness as uid 1000 (risks)", root_user),
    ("full disk writing run.json (real ENOSPC, tmpfs)", enospc),
    ("results.json is a link to an outside file (record_check)", results_link),
    ('metrics `"timing_s/step": "fast"`', metrics("fast")),
    ('metrics `"timing_s/step": null`', metrics(None)),
]


def files(root: Path) -> dict[str, str]:
    """What is in ``root`` (content hashes of regular files, link targets), never opening anything else (a FIFO)."""
    out = {}
    for d, dirs, names in os.walk(root):
        for n in names + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            p = os.path.join(d, n)
            if os.path.islink(p):
                out[p] = "-> " + os.readlink(p)
            elif os.path.isfile(p):
                out[p] = hashlib.sha256(Path(p).read_bytes()).hexdigest()
    return out


def command(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """``[NAME=value ...] (pytest ARGS | harness ARGS)`` -> argv and environment."""
    env = dict(os.environ)
    while args and "=" in args[0] and not args[0].startswith("-"):
        key, _, value = args.pop(0).partition("=")
        env[key] = value
    if args[:1] == ["pytest"]:
        return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args[1:]], env
    return [sys.executable, "-m", "harness", *args], env


def main(only: str = "") -> int:
    print("| case | exit | s | output (last line) |\n|---|---|---|---|")
    bad = rows = 0
    for name, make in CASES:
        if not re.search(only, name):
            continue
        rows += 1
        tmp = Path(tempfile.mkdtemp(prefix="badin-"))
        try:
            argv, env = command(make(tmp))
            before = files(tmp)
            started = time.monotonic()
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp, env=env)
                out = (proc.stdout + proc.stderr).strip()
                lines = out.splitlines() or ["(nothing)"]
                last = next((ln for ln in reversed(lines) if "error: " in ln), lines[-1])  # pytest's usage error
                code = str(proc.returncode)
                if "Traceback" in out:
                    bad += 1
                    code += " BAD (traceback)"
            except subprocess.TimeoutExpired:
                bad, code, last = bad + 1, "BAD (hung > 60 s)", ""
            seconds = time.monotonic() - started
            after = files(tmp)
            if changed := sorted(p for p, h in before.items() if after.get(p) != h):
                bad += 1
                code += f" BAD (changed or removed {', '.join(changed)})"
            last = last.replace(str(tmp), "$T").replace(str(ROOT), "$ROOT").replace("|", "\\|")
            code = code.replace(str(tmp), "$T")
            print(f"| {name} | {code} | {seconds:.1f} | `{last[:220]}` |", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, run in IN_PROCESS:
        if not re.search(only, name):
            continue
        rows += 1
        tmp = Path(tempfile.mkdtemp(prefix="badin-"))
        try:
            line = run(tmp).replace(str(tmp), "$T").replace("|", "\\|")
        except Exception as exc:  # a row, not a crash: the table is what is being shown
            bad, line = bad + 1, f"BAD {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"| {name} | - | - | `{line[:260]}` |", flush=True)
    if not only:
        print("| dump tree `step_9 -> /`, FIFO/link named dump.json | - | - | the dump-tree readers' tests |")
    print(f"\n{rows} cases, {bad} with a traceback or a hang or a changed input")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:2]))
