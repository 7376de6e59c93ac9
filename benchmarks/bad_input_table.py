"""Every bad input of issue 16, given to the real command line: what each prints and its exit code.

Not a test (the tests are tests/test_bad_input.py): a table for people, run by hand. Each case runs
``python -m harness ...`` in a child process in a fresh temp dir; a case that prints a traceback or does not end
in 60 s is marked BAD. Cases that need a training (the lock, ENOSPC inside a run) are tests, not rows here.

    .venv/bin/python benchmarks/bad_input_table.py            # markdown table on stdout
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
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
        (f"{cmd}: figure a dict", corrupt(setin("checks.overhead.figures", {"overhead.profiled": {"a": 1}}), cmd)),
        (f"{cmd}: runs a list", corrupt(setin("runs", [1]), cmd)),
        (f"{cmd}: exit_code 'x'", corrupt(setin("runs.off", {"exit_code": "x"}), cmd)),
        (f"{cmd}: settings a string", corrupt(setin("settings", "s"), cmd)),
        (f"{cmd}: environment a list", corrupt(setin("environment", []), cmd)),
    ]


def enospc(tmp: Path) -> str:
    """A real ENOSPC: a 256 KB tmpfs in a private mount namespace."""
    script = f'mount -t tmpfs -o size=256k tmpfs {tmp} && exec {sys.executable} -c "$0" {tmp}'
    argv = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, ENOSPC_CHILD]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    return " / ".join((proc.stdout + proc.stderr).strip().splitlines())


def results_link(tmp: Path) -> str:
    from harness.checks.base import CheckResult
    from harness.launch import ExecResult
    from harness.loader import load_scenario
    from harness.results import record_check
    from harness.rundir import ScenarioDir
    from harness.runs import RunRecord, ScenarioRuns

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
        from harness.checks import CHECKS
        from harness.checks.base import CheckContext
        from harness.loader import load_scenario
        from harness.rundir import ScenarioDir

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
    from harness.executors.docker import DockerRuntime

    return "; ".join(DockerRuntime(user="0:0").risks("cpu", host_uid=1000))


IN_PROCESS: list[tuple[str, Callable[[Path], str]]] = [
    ("docker: user 0:0, the harness as uid 1000 (risks)", root_user),
    ("full disk writing run.json (real ENOSPC, tmpfs)", enospc),
    ("results.json is a link to an outside file (record_check)", results_link),
    ('metrics `"timing_s/step": "fast"`', metrics("fast")),
    ('metrics `"timing_s/step": null`', metrics(None)),
]


def main() -> int:
    print("| case | exit | output (last line) |\n|---|---|---|")
    bad = 0
    for name, make in CASES:
        tmp = Path(tempfile.mkdtemp(prefix="badin-"))
        try:
            argv = [sys.executable, "-m", "harness", *make(tmp)]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=tmp)
                out = (proc.stderr + proc.stdout).strip()
                last = out.splitlines()[-1] if out else "(nothing)"
                code = str(proc.returncode)
                if "Traceback" in out:
                    bad += 1
                    code += " BAD (traceback)"
            except subprocess.TimeoutExpired:
                bad, code, last = bad + 1, "BAD (hung > 60 s)", ""
            last = last.replace(str(tmp), "$T").replace("|", "\\|")
            print(f"| {name} | {code} | `{last[:220]}` |", flush=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for name, run in IN_PROCESS:
        tmp = Path(tempfile.mkdtemp(prefix="badin-"))
        try:
            line = run(tmp).replace(str(tmp), "$T").replace("|", "\\|")
        except Exception as exc:  # a row, not a crash: the table is what is being shown
            bad, line = bad + 1, f"BAD {type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"| {name} | - | `{line[:260]}` |", flush=True)
    print("| dump tree `step_9 -> /`, FIFO/link named dump.json | - | issue 15 (dump-tree readers) |")
    print(f"\n{len(CASES) + len(IN_PROCESS)} cases, {bad} with a traceback or a hang")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
