"""The verl under test: specs, one cached environment per target, verdicts of real trainings, API drift.

One fixture repository (tests/verl_repo.py: the installed verl plus a bad, a neutral and a drift commit) and one
environment cache serve the whole session, so each target's environment is made once. Trainings use a 1-rank,
3-step variant of tiny_fsdp_l1 with budgets no machine load can flip: the verdict that matters is layout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from xml.etree import ElementTree

import pytest
from gate_builders import ENV, write_results
from verl_repo import PROFILE, VerlRepo, git

from harness.errors import InfraError
from harness.gate.against_baseline import gate_dirs
from harness.gate.baseline import build
from harness.gate.observe import observe_dir
from harness.report import verdicts
from harness.report.summary import summary_markdown
from harness.targets.environment import _MADE, ensure_env
from harness.targets.spec import TargetError, parse_target
from harness.training.executors.ascend_image import build_args, make_context

pytestmark = pytest.mark.xdist_group("target")  # the docker test re-reads the neutral commit's local results

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def use_cache(cache: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    for var in ("HARNESS_VERL", "HARNESS_MSPROBE", "HARNESS_SERIES"):
        monkeypatch.delenv(var, raising=False)
    _MADE.clear()  # each test sees the cache on disk, as a new process would
    return cache


def harness_pytest(cwd: Path, cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest", "scenarios", "-k", "tiny_fsdp_l1", "-p", "no:cacheprovider", "-q", *args]
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=900)


def checks(results: Path) -> dict[str, bool]:
    doc = json.loads((results / "tiny_fsdp_l1" / "results.json").read_text())
    return {k: v["passed"] for k, v in doc["checks"].items()}


def test_specs_resolve_to_identities_and_series(repo: VerlRepo, use_cache: Path, tmp_path: Path) -> None:
    pinned = parse_target()
    assert pinned.pinned and pinned.verl.version == "0.9.1" and pinned.series == "0.9.1"
    release = parse_target("0.9.1", "26.2.0")
    assert (release.verl.kind, release.verl.identity, release.msprobe.identity) == (
        "release",
        "verl==0.9.1",
        "msprobe==26.2.0",
    )
    bad = parse_target(f"{repo.path}@bad")
    assert (bad.verl.kind, bad.verl.commit, bad.series, bad.verl.identity) == (
        "git",
        repo.bad,
        "bad",
        f"verl@{repo.bad[:12]}",
    )
    by_sha = parse_target(f"file://{repo.path}@{repo.neutral[:10]}")  # a URL goes through a mirror in the cache
    assert by_sha.verl.commit == repo.neutral and by_sha.series == f"commit {repo.neutral[:12]}"
    assert parse_target(f"{repo.path}@v0.9.1").verl.commit == repo.release
    assert parse_target(f"{repo.path}@bad", series="main").series == "main"
    checkout = parse_target(str(repo.path))
    assert (checkout.verl.kind, checkout.verl.commit, checkout.verl.dirty, checkout.series) == (
        "checkout", repo.release, False, "main",
    )  # fmt: skip
    for spec, msprobe, said in [
        (f"{repo.path}@nosuchref", None, "no commit 'nosuchref'"),
        (str(tmp_path / "absent.whl"), None, "no such wheel file"),
        (str(tmp_path), None, "is not a git checkout"),
        ("not a spec", None, "expected a version"),
        (None, str(repo.path), "msprobe ships compiled parts"),
    ]:
        with pytest.raises(TargetError, match=said):
            parse_target(spec, msprobe)


@pytest.mark.integration
def test_environment_is_made_once_then_reused_at_a_fixed_width_path(repo: VerlRepo, use_cache: Path) -> None:
    started = time.monotonic()
    env = ensure_env(parse_target(f"{repo.path}@neutral"))
    cold = time.monotonic() - started
    cli = [sys.executable, "-m", "harness", "target", "--verl", f"{repo.path}@neutral"]
    started = time.monotonic()
    proc = subprocess.run(cli, capture_output=True, text=True, check=True, env={**os.environ}, cwd=ROOT)
    warm = time.monotonic() - started  # a new process: what a second session pays
    print(f"environment set-up for {env.target.verl.identity}: cold {cold:.2f}s, warm (new process) {warm:.2f}s")
    assert "reused in" in proc.stdout and str(env.root) in proc.stdout  # not remade (timings: printed, not judged)
    assert env.root is not None and env.root.parent == use_cache / "envs"
    verl_file = subprocess.run(
        [str(env.python), "-c", "import verl, harness, torch; print(verl.__file__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert verl_file.startswith(str(env.root)), "the target's verl, not the project venv's"
    other = ensure_env(parse_target(f"{repo.path}@bad"))
    assert other.root != env.root
    assert len(str(other.facts["packages_dir"])) == len(str(env.facts["packages_dir"]))  # fair disk figures


@pytest.mark.trains
def test_neutral_commit_passes_and_is_named_everywhere(repo: VerlRepo, cache: Path, small: Path) -> None:
    """The bad commit failing layout is test_compare_runs' (head against this release, under docker)."""
    xml = small / "neutral.xml"
    neutral = harness_pytest(
        small, cache, f"--verl={repo.path}@{repo.neutral}", f"--harness-results={small / 'res'}", f"--junitxml={xml}",
        "--harness-timing=record",  # one pair on a shared runner decides no timing: overhead reported, not gated
    )  # fmt: skip
    last = neutral.stdout.strip().splitlines()[-1]
    assert neutral.returncode == 0 and last.startswith("4 passed, 1 skipped"), neutral.stdout
    doc = json.loads((small / "res" / "tiny_fsdp_l1" / "results.json").read_text())
    assert doc["target"]["verl"]["commit"] == repo.neutral and doc["target"]["verl"]["dirty"] is False
    assert (
        doc["environment"]["target"] == f"verl@{repo.neutral[:12]}"
        and doc["environment"]["series"] == f"commit {repo.neutral[:12]}"
    )
    run = json.loads((small / "res" / "tiny_fsdp_l1" / "on" / "run.json").read_text())
    assert run["target"]["verl"]["commit"] == repo.neutral and run["argv"][0].startswith(str(cache / "envs"))
    props = {p.get("name"): p.get("value") for p in ElementTree.parse(xml).getroot().iter("property")}
    assert props["target.verl"] == f"verl@{repo.neutral[:12]}" and props["target.verl_dirty"] == "False"


@pytest.mark.integration
def test_api_drift_is_one_infrastructure_error_line(repo: VerlRepo, cache: Path, small: Path) -> None:
    proc = harness_pytest(small, cache, f"--verl={repo.path}@drift", f"--harness-results={small / 'res_drift'}", "-rE")
    assert proc.returncode == 1 and proc.stdout.strip().splitlines()[-1].startswith("5 errors"), proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if "(API drift)" in ln)
    print(line)
    assert (
        f"verl@{repo.drift[:12]} lacks verl.utils.profiler.DistProfiler (API drift): verl.utils.profiler has no "
        in line
    )


@pytest.mark.trains
def test_dirty_checkout_gets_its_own_environment_and_docker_runs_it_like_local(
    repo: VerlRepo, cache: Path, small: Path, use_cache: Path, tmp_path: Path
) -> None:
    """A clone at the neutral commit with an uncommitted comment: its own environment, named dirty everywhere; the
    docker executor (host-python image: the target's environment mounted read-only) gives the local verdicts."""
    from test_docker_daemon import daemon  # the CPU image on the daemon DOCKER_HOST names (CI requires one)

    checkout = tmp_path / "verl-checkout"
    git(tmp_path, "clone", "-q", "--branch", "neutral", str(repo.path), str(checkout))
    with (checkout / PROFILE).open("a") as f:
        f.write("# an uncommitted comment\n")
    dirty = parse_target(str(checkout))
    assert dirty.verl.dirty and dirty.verl.commit == repo.neutral and len(dirty.verl.dirty_hash or "") == 64
    assert ensure_env(dirty).root != ensure_env(parse_target(f"{repo.path}@neutral")).root
    status = git(checkout, "status", "--porcelain", "--ignored")
    assert status == f"M {PROFILE}", f"building must leave the checkout as it was: {status}"

    daemon()
    res = small / "res_docker_dirty"
    proc = harness_pytest(small, cache, f"--verl={checkout}", f"--harness-results={res}", "--executor=docker")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert checks(res) == checks(small / "res")  # the local run of the neutral commit (same code, one comment)
    doc = json.loads((res / "tiny_fsdp_l1" / "results.json").read_text())
    print(json.dumps(doc["target"], indent=1))
    assert doc["target"]["verl"]["dirty"] is True and doc["target"]["verl"]["commit"] == repo.neutral
    assert doc["environment"]["verl_dirty"] is True
    run = json.loads((res / "tiny_fsdp_l1" / "on" / "run.json").read_text())
    assert run["executor"] == "docker" and run["argv"][0] == str(ensure_env(dirty).python)


def test_gate_refuses_to_compare_across_series_unless_asked(tmp_path: Path) -> None:
    for run in ("release", "release2"):  # two runs: the overhead interval needs a run-to-run spread (none here)
        write_results(tmp_path / run, env={**ENV, "series": "0.9.1", "target": "verl==0.9.1"})
    baseline = build([tmp_path / "release", tmp_path / "release2"])
    write_results(tmp_path / "main", profiled=100.0, env={**ENV, "series": "main", "target": "verl@1a2b3c4d5e6f"})
    report = gate_dirs(baseline, [tmp_path / "main"])
    assert report.exit_code == 2 and "NOTHING COMPARED" in verdicts.lines(report)[-1]  # its one scenario not compared
    lines = [ln for ln in verdicts.lines(report) if "series" in ln and "ENVIRONMENT DIFFERS" in ln]
    assert lines == [
        "ENVIRONMENT DIFFERS tiny_case: not compared: series baseline '0.9.1', now 'main' "
        "(--compare-across-env compares anyway)"
    ]
    assert "target verl==0.9.1, series 0.9.1" in verdicts.lines(report)[0]
    assert gate_dirs(baseline, [tmp_path / "main"], across_env=True).exit_code == 1
    observed = observe_dir(tmp_path / "main")
    md = summary_markdown([("main", observed)], [verdicts.gate_doc(report, baseline, observed, [tmp_path / "main"])])
    assert "Target: verl 0.9.1 `verl@1a2b3c4d5e6f` from `?`, series `main`, msprobe 26.2.0." in md
    write_results(tmp_path / "nightly", env={**ENV, "series": "0.9.1", "target": "verl@1a2b3c4d5e6f"})
    (s,) = gate_dirs(baseline, [tmp_path / "nightly"]).scenarios  # same series, another commit: compared, noted
    assert s.status == "ok" and any("target verl==0.9.1 -> verl@1a2b3c4d5e6f" in n for n in s.notes)


def test_ascend_image_build_args_and_label(repo: VerlRepo, use_cache: Path, tmp_path: Path) -> None:
    """The Ascend build cannot run here: what the harness passes, what the Dockerfile declares, what is read back."""
    target = parse_target(f"{repo.path}@bad", "26.2.0", "main")
    build = make_context(target, tmp_path / "ctx", "harness:ascend-test")
    assert build.build_args == {
        "VERL_SRC": "verl-src",
        "HARNESS_TARGET_VERL": f"verl@{repo.bad[:12]}",
        "HARNESS_TARGET_SERIES": "main",
        "MSPROBE_VERSION": "26.2.0",
    }
    assert (build.context / "verl-src" / PROFILE).read_text() == git(repo.path, "show", f"{repo.bad}:{PROFILE}") + "\n"
    assert (build.context / "docker" / "Dockerfile.ascend").is_file() and (build.context / "harness").is_dir()
    argv = build.argv()
    assert argv[:4] == ["docker", "build", "-f", str(build.context / "docker" / "Dockerfile.ascend")]
    assert argv[-3:] == ["-t", "harness:ascend-test", str(build.context)]
    dockerfile = (ROOT / "docker" / "Dockerfile.ascend").read_text()
    declared = {ln.split()[1].split("=")[0] for ln in dockerfile.splitlines() if ln.startswith("ARG ")}
    assert set(build_args(target)) <= declared
    assert 'io.harness.target.verl="${HARNESS_TARGET_VERL}"' in dockerfile
    assert (ROOT / "docker" / "no-verl-src").is_dir()  # the default VERL_SRC: the base image's verl
    with pytest.raises(TargetError, match="base image's own"):
        make_context(parse_target("0.9.1"), tmp_path / "ctx2", "t")
    # the runner's registry, index and pins ride along; a name the Dockerfile does not declare is refused
    extra = {"VERL_ASCEND_IMAGE": "quay.io/ascend/verl", "PIP_INDEX_URL": "http://index.local/simple"}
    assert make_context(target, tmp_path / "ctx3", "t", "some-tag", extra).build_args.items() >= extra.items()
    with pytest.raises(TargetError, match=r"--build-arg PIP_INDEX: docker/Dockerfile\.ascend declares no such ARG"):
        make_context(target, tmp_path / "ctx4", "t", extra={"PIP_INDEX": "x"})


def test_self_contained_image_must_hold_the_target(tmp_path: Path) -> None:
    """The label read back: the scenario's image if it holds the target, else a local image labelled with it (base
    and head of a comparison each have one), else an infrastructure error naming both."""
    from harness.scenario.model import ExecutorSettings
    from harness.training.executors.docker import resolve_settings
    from harness.training.executors.docker_options import IMAGE_KIND_LABEL, TARGET_LABEL

    class Image:
        def __init__(self, verl: str, tag: str) -> None:
            self.labels = {IMAGE_KIND_LABEL: "self-contained", TARGET_LABEL: verl}
            self.tags, self.id, self.attrs = [tag], tag, {"Created": "2026-11-30"}

    built = Image("verl@feedfacecafe", "harness:head")

    class Client:  # what resolve_settings asks of a docker client
        class images:
            @staticmethod
            def get(tag: str) -> Image:
                return Image("verl@1a2b3c4d5e6f", tag)

            @staticmethod
            def list(filters: dict[str, str]) -> list[Image]:
                return [built] if filters["label"] == f"{TARGET_LABEL}=verl@feedfacecafe" else []

    settings = ExecutorSettings(kind="docker")
    held = resolve_settings(Client(), settings, "verl@1a2b3c4d5e6f").options("docker")
    assert held.image_kind == "self_contained" and held.image == settings.options("docker").image
    assert resolve_settings(Client(), settings, None).options("docker").image_kind == "self_contained"  # pinned
    assert resolve_settings(Client(), settings, "verl@feedfacecafe").options("docker").image == "harness:head"
    with pytest.raises(InfraError, match=r"holds verl@1a2b3c4d5e6f, the run asks for verl@0123456789ab"):
        resolve_settings(Client(), settings, "verl@0123456789ab")
    Client.images.get = staticmethod(lambda tag: Image("verl@1a\n::error title=image::all good", tag))  # its builder's
    with pytest.raises(InfraError, match=r"holds verl@1a\\n::error title=image::all good, the run asks for"):
        resolve_settings(Client(), settings, "verl@0123456789ab")


def test_missing_named_image_falls_through_to_the_label(tmp_path: Path) -> None:
    """verl-compare builds one image per side (:base, :head) while the scenarios name another tag: a daemon that
    does not hold the named image must still find the one labelled with the run's target (the lookup by name
    raises ImageNotFound there), and fail in one line only when neither exists."""
    import docker.errors

    from harness.scenario.model import ExecutorSettings
    from harness.training.executors.docker import resolve_settings
    from harness.training.executors.docker_options import IMAGE_KIND_LABEL, TARGET_LABEL

    class Image:
        def __init__(self, verl: str, tag: str) -> None:
            self.labels = {IMAGE_KIND_LABEL: "self-contained", TARGET_LABEL: verl}
            self.tags, self.id, self.attrs = [tag], tag, {"Created": "2026-11-30"}

    built = [Image("verl@feedfacecafe", "verl-msprobe-harness:head")]

    class Client:  # a daemon holding only the image built for head
        class images:
            @staticmethod
            def get(tag: str) -> Image:
                held = {i.tags[0]: i for i in built}
                if tag not in held:
                    raise docker.errors.ImageNotFound(f"No such image: {tag}")
                return held[tag]

            @staticmethod
            def list(filters: dict[str, str]) -> list[Image]:
                return [i for i in built if filters["label"] == f"{TARGET_LABEL}={i.labels[TARGET_LABEL]}"]

    settings = ExecutorSettings(kind="docker", docker={"image": "verl-msprobe-harness:ascend"})
    found = resolve_settings(Client(), settings, "verl@feedfacecafe").options("docker")
    assert (found.image, found.image_kind) == ("verl-msprobe-harness:head", "self_contained")
    with pytest.raises(
        InfraError,
        match=r"image 'verl-msprobe-harness:ascend' not found .*labelled "
        r"io\.harness\.target\.verl=verl@0123456789ab",
    ):
        resolve_settings(Client(), settings, "verl@0123456789ab")
    with pytest.raises(InfraError, match=r"image 'verl-msprobe-harness:ascend' not found"):
        resolve_settings(Client(), settings, None)  # the pinned releases: no label to look for


@pytest.mark.integration
def test_half_made_environment_is_rebuilt(repo: VerlRepo, use_cache: Path) -> None:
    target = parse_target(f"{repo.path}@neutral")
    env = ensure_env(target)
    assert env.root is not None
    (env.root / "harness-target.json").unlink()  # as if the harness died while making it
    shutil.rmtree(env.root / "bin")
    _MADE.clear()
    again = ensure_env(target)
    assert not again.reused and (again.root / "bin" / "python").exists() and again.root == env.root


def test_a_spec_that_is_an_option_of_git_reaches_git_as_a_repository_never_as_an_option(
    use_cache: Path, tmp_path: Path
) -> None:
    """A SPEC's repository goes after ``--``: ``--upload-pack=CMD@main`` named the command git runs on the other
    side, and the cache's mirror path became the repository cloned."""
    for spec in (f"--upload-pack=touch {tmp_path}/pwned@main", "-cprotocol.allow=always@main", "--no-local@v1"):
        with pytest.raises(TargetError) as err:
            parse_target(spec)
        repository = spec.rpartition("@")[0]
        assert f"git clone --quiet --mirror -- {repository} " in str(err.value)
        assert str(err.value).endswith(f"fatal: repository '{repository}' does not exist"), err.value
    assert not (tmp_path / "pwned").exists()


def _zip(path: Path, *names: str) -> str:
    import zipfile

    with zipfile.ZipFile(path, "w") as whl:
        for name in names:
            whl.writestr(name, "")
    return str(path)


def test_a_file_that_is_no_wheel_of_the_package_is_refused_where_it_is_named(tmp_path: Path) -> None:
    """A census of a file named .whl that holds no verl (not a zip, no dist-info, another package's wheel) was a
    census of nothing, exit 0: refused where the SPEC is read, one line."""
    (text := tmp_path / "verl-0.9.1-py3-none-any.whl").write_text("not a zip")
    plain = _zip(tmp_path / "plain.whl", "verl/__init__.py")
    other = _zip(tmp_path / "other-1.0-py3-none-any.whl", "other-1.0.dist-info/WHEEL", "verl/__init__.py")
    verl = _zip(tmp_path / "verl-0.9.1-py3-none-any.whl.x.whl", "verl-0.9.1.dist-info/WHEEL", "verl/__init__.py")
    no_wheel = "not a wheel (no zip archive with a *.dist-info/WHEEL)"
    for verl_spec, msprobe_spec, said in [
        (str(text), None, f"--verl {text}: {no_wheel}, not of verl: name a verl wheel"),
        (plain, None, f"--verl {plain}: {no_wheel}, not of verl: name a verl wheel"),
        (other, None, f"--verl {other}: a wheel of other, not of verl: name a verl wheel"),
        (None, verl, f"--msprobe {verl}: a wheel of verl, not of mindstudio-probe: name a mindstudio-probe wheel"),
    ]:
        with pytest.raises(TargetError) as err:
            parse_target(verl_spec, msprobe_spec)
        assert str(err.value) == said
    assert parse_target(verl).verl.kind == "wheel"


def test_a_commit_from_a_history_reaches_git_as_a_revision_never_as_an_option(tmp_path: Path) -> None:
    """A duet's range names the last good night's commit, read from the history file: ``--output=FILE`` made
    ``git rev-list`` write FILE wherever it named."""
    from harness.cli.duet import _range

    repo = tmp_path / "verl"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "c0")
    head = git(repo, "rev-parse", "HEAD")
    with pytest.raises(TargetError, match=r"^git rev-list --count --first-parent --end-of-options --output="):
        _range(repo, f"--output={tmp_path}/written", head, [])
    assert list(tmp_path.iterdir()) == [repo]


@pytest.mark.integration  # the probe's command line (a stand-in for a target's interpreter)
def test_what_a_targets_interpreter_prints_is_data_one_escaped_line_each(tmp_path: Path) -> None:
    """The target's own code runs in its interpreter before the probe answers (import-time code, its metadata): the
    answer's strings, and the output of a failed probe or install, are shown as one line each in what the harness
    prints and records, never as a workflow command."""
    from harness.targets.environment import _probe

    answer = {"versions": {"verl": "0.9.1\n::error title=target::all good"}, "own_distributions": ["##[error]x"]}
    (python := tmp_path / "python").write_text(f"#!/bin/sh\nprintf '%s\\n' 'HARNESS-PROBE {json.dumps(answer)}'\n")
    python.chmod(0o755)
    facts = _probe(str(python), "facts", what="probing")
    assert facts == {
        "versions": {"verl": "0.9.1\\n::error title=target::all good"},
        "own_distributions": ["#\\#[error]x"],
    }
    python.write_text("#!/bin/sh\necho '##[error]all good, merge it' >&2\necho '::error::forged\x07' >&2\nexit 1\n")
    with pytest.raises(InfraError) as err:
        _probe(str(python), "facts", what="probing")
    assert str(err.value) == "probing: exit 1: #\\#[error]all good, merge it | ::error::forged\\x07"
