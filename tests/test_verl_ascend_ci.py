"""The harness's Ascend settings held against verl's own Ascend CI (tests/fixtures/verl_ascend_ci: verbatim copies of
verl's files at VERL_COMMIT): the job container, its env, the runner, the install pins, the gsm8k preparation, the
model cache, the job limit, the cron hours and the overrides verl's NPU scripts always set. When verl moves, copy
its newer files over the fixture (SOURCE.md) and these name what of the harness no longer matches."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from harness.scenario.loader import load_scenario

ROOT = Path(__file__).resolve().parents[1]
VERL = ROOT / "tests" / "fixtures" / "verl_ascend_ci"
VERL_COMMIT = "1dda039b9c6311889a9c9a26040677e1254814f9"
RUNNER = "linux-aarch64-a2b3-8"
# the scenarios of verl's a2b3-8 runners; qwen2_0_5b_fsdp_multinode runs on its a3-8 multi-node runners through verl's
# RayJob submitter (executor rayjob), held against verl's multi-node nightly by tests/test_rayjob.py
QWEN = [p for p in sorted((ROOT / "scenarios").glob("qwen2_0_5b_*.yaml")) if load_scenario(p).executor.kind != "rayjob"]
NPU_SCRIPTS = sorted((VERL / "tests" / "special_npu").rglob("*.sh"))


def _wf(path: Path) -> dict:
    return yaml.safe_load(path.read_text())


def _verl_jobs(runner: str = RUNNER) -> list[dict]:
    jobs = []
    for f in sorted((VERL / ".github" / "workflows").glob("*.yml")):
        jobs += [j for j in _wf(f)["jobs"].values() if j.get("runs-on") == runner and "container" in j]
    return jobs


def _harness_call_inputs(name: str) -> dict:
    return _wf(ROOT / ".github" / "workflows" / name)[True]["workflow_call"]["inputs"]


def test_the_fixture_names_the_commit_it_came_from():
    assert VERL_COMMIT in (VERL / "SOURCE.md").read_text()
    assert len(NPU_SCRIPTS) == 4 and len(_verl_jobs()) >= 5


def test_the_job_container_is_verls():
    """Image (the most used one of verl's a2b3-8 jobs), options, runner and env of both reusable workflows."""
    jobs = _verl_jobs()
    images = [j["container"]["image"] for j in jobs]
    image = max(set(images), key=images.count)
    options = [j["container"]["options"].strip() for j in jobs]
    assert max(set(options), key=options.count) == "--shm-size 16g"  # the VLM job asks 80g, the text ones 16g
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        inputs = _harness_call_inputs(name)
        assert inputs["image"]["default"] == image, name
        assert inputs["runner-labels"]["default"] == f'["{RUNNER}"]', name
        wf = _wf(ROOT / ".github" / "workflows" / name)
        job = next(j for j in wf["jobs"].values() if "container" in j)
        assert job["container"]["options"].strip() == "--shm-size 16g", name
        env = {**wf.get("env", {}), **job.get("env", {})}
        for verl_job in jobs:
            for key in {"HF_ENDPOINT", "HF_HUB_ENABLE_HF_TRANSFER", "TRANSFORMERS_VERBOSITY"} & set(verl_job["env"]):
                assert env[key] == verl_job["env"][key], f"{name}: {key}"
    # docker mode: the same base image and shared memory
    dockerfile = (ROOT / "docker" / "Dockerfile.ascend").read_text()
    repo, tag = image.rsplit(":", 1)
    assert f"ARG VERL_ASCEND_IMAGE={repo}\n" in dockerfile and f"ARG VERL_ASCEND_TAG={tag}\n" in dockerfile
    for path in QWEN:
        docker = load_scenario(path).executor.docker
        assert docker.shm_size == "16g" and docker.env["TRANSFORMERS_VERBOSITY"] == "error", path.name


def test_the_no_deps_pins_beside_verls_install_are_verls():
    text = (VERL / ".github" / "workflows" / "e2e_ascend.yml").read_text()
    pins = set(re.findall(r"pip install --no-deps (TransferQueue==\S+)", text))
    assert len(pins) == 1
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        assert {_harness_call_inputs(name)["extra-no-deps"]["default"]} == pins, name
    assert f'ARG VERL_NO_DEPS_EXTRAS="{pins.pop()}"' in (ROOT / "docker" / "Dockerfile.ascend").read_text()


def test_gsm8k_is_prepared_in_the_job_as_verl_does_and_read_where_verl_writes_it():
    verl_step = "examples/data_preprocess/gsm8k.py --local_dataset_path ${HOME}/.cache/datasets/openai/gsm8k"
    assert verl_step in (VERL / ".github" / "workflows" / "nightly_ascend.yml").read_text()
    script = (ROOT / ".ci" / "ascend-job").read_text()
    made = r'/examples/data_preprocess/gsm8k\.py" \\\n\s+--local_dataset_path "\$\{HOME\}/\.cache/datasets/openai/gsm8k'
    assert re.search(made, script)
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        assert "bash .ci/ascend-job gsm8k" in (ROOT / ".github" / "workflows" / name).read_text(), name
    for sh in NPU_SCRIPTS:  # verl's scripts read the parquet files from ~/data/gsm8k, gsm8k.py's default
        assert "$HOME/data/gsm8k/train.parquet" in sh.read_text(), sh.name
    for path in QWEN:
        assert load_scenario(path).workload.data_dir.endswith(":-~/data/gsm8k}"), path.name


def test_the_model_is_one_the_runners_hold():
    guide = (VERL / "docs" / "ascend_tutorial" / "contribution_guide" / "ascend_ci_guide_zh.rst").read_text()
    held = set(re.findall(r"``\$\{HOME\}/\.cache/models/([\w./-]+)``", guide))
    assert "Qwen/Qwen2.5-0.5B" in held and "Qwen/Qwen2-0.5B" not in held
    for path in QWEN:
        model = load_scenario(path).workload.model_path
        assert re.fullmatch(r"\$\{\w+:-~/\.cache/models/(.+)\}", model)[1] in held, path.name  # type: ignore[index]


def test_jobs_fit_the_guides_limit():
    guide = (VERL / "docs" / "ascend_tutorial" / "contribution_guide" / "ascend_ci_guide_zh.rst").read_text()
    limit = int(re.search(r"控制单个 job 的运行时间在 (\d+)min 以内", guide)[1])  # type: ignore[index]
    assert limit == 40
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        for job in _wf(ROOT / ".github" / "workflows" / name)["jobs"].values():
            assert job["timeout-minutes"] <= limit, name


def test_the_nightly_hour_is_clear_of_verls_jobs_on_the_same_runners():
    nightly = _wf(VERL / ".github" / "workflows" / "nightly_ascend.yml")
    busy = set()
    for job in nightly["jobs"].values():
        if job.get("runs-on") == RUNNER and (m := re.search(r"schedule == '(\d+) (\d+) \* \* \*'", job["if"])):
            start = int(m[2]) * 60 + int(m[1])
            busy |= set(range(start, start + job["timeout-minutes"]))  # the jobs may run their whole timeout
    assert busy
    caller = _wf(ROOT / "docs" / "verl-nightly-caller-example.yml")
    (cron,) = (c["cron"] for c in caller[True]["schedule"])
    minute, hour = (int(x) for x in cron.split()[:2])
    ours = set(range(hour * 60 + minute, hour * 60 + minute + 4 * 40))  # four scenario jobs, one after the other
    assert not ({t % (24 * 60) for t in ours} & busy), cron


def _overrides(sh: Path) -> dict[str, str]:
    return dict(m.groups() for m in re.finditer(r"^\s*\+?([\w.]+)=(\S+?)\s*\\?$", sh.read_text(), re.M))


def test_the_overrides_verls_npu_scripts_always_set():
    """torch.compile off everywhere; every Megatron script on mbridge (vanilla_mbridge=True): the harness sets them."""
    scripts = {sh.name: _overrides(sh) for sh in NPU_SCRIPTS}
    megatron = {n for n, ov in scripts.items() if ov.get("actor_rollout_ref.actor.strategy") == "megatron"}
    assert megatron and len(megatron) < len(scripts)
    for name, ov in scripts.items():
        assert ov["actor_rollout_ref.actor.use_torch_compile"] == "False", name
    for name in megatron:
        assert scripts[name]["actor_rollout_ref.actor.megatron.vanilla_mbridge"] == "True", name
    for path in QWEN:
        scenario = load_scenario(path)
        ov = dict(o.split("=", 1) for o in scenario.workload.overrides)
        assert ov["actor_rollout_ref.actor.use_torch_compile"] == "False", path.name
        if scenario.engine == "megatron":
            assert ov["actor_rollout_ref.actor.megatron.vanilla_mbridge"] == "True", path.name
            assert ov["critic.megatron.vanilla_mbridge"] == "True", path.name  # the critic's does not follow


def test_verls_jobs_run_as_root_and_so_does_the_job_container_mode():
    """verl's guide: ${HOME} is root (its jobs set no --user); the harness's job containers set none either."""
    guide = (VERL / "docs" / "ascend_tutorial" / "contribution_guide" / "ascend_ci_guide_zh.rst").read_text()
    assert "${HOME}是root" in guide
    assert not any("--user" in j["container"]["options"] for j in _verl_jobs())
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        for job in _wf(ROOT / ".github" / "workflows" / name)["jobs"].values():
            assert "--user" not in job.get("container", {}).get("options", ""), name


# The node runtime of each action an Ascend job container runs, at the commit pinned (each one's action.yml says
# `using: node20`); verl's own Ascend containers run actions/checkout@v4, node20 too: what they prove there
NODE20 = {
    "actions/checkout@11d5960a326750d5838078e36cf38b85af677262": "v4.4.0",
    "actions/upload-artifact@ea165f8d65b6e75b540449e92b4886f43607fa02": "v4.6.2",
    "actions/download-artifact@d3f86a106a0bac45b974a628896c90dbdf5c8093": "v4.3.0",
    "actions/github-script@f28e40c7f34bde8b3046d885e986cb6290c5673b": "v7.1.0",
}


def test_the_ascend_job_containers_run_actions_on_the_runtime_verls_own_run_there():
    """verl's Ascend jobs run actions/checkout@v4 (node20) in their containers; the node24 majors (checkout v6,
    upload-artifact v6, ...) are unproven in verl's image on those runners (the runner mounts its node into the
    container). Every action of the harness's Ascend job containers is a node20 major, checkout the one verl runs."""
    verl_actions = {s["uses"] for j in _verl_jobs() for s in j["steps"] if "uses" in s}
    assert verl_actions == {"actions/checkout@v4"}
    for name in ("nightly-ascend.yml", "verl-compare.yml"):
        for job in _wf(ROOT / ".github" / "workflows" / name)["jobs"].values():
            if "container" not in job:
                continue
            for step in job["steps"]:
                if "uses" in step:
                    action = step["uses"]
                    assert action in NODE20, f"{name}: {action} (not a node20 major verl's Ascend containers run)"
    tag = NODE20["actions/checkout@11d5960a326750d5838078e36cf38b85af677262"]
    assert tag.split(".")[0] == "v4"
