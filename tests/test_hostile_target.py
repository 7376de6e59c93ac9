"""A hostile checkout (tests/hostile_repo.py) through the harness: what it refuses, what it contains.

A link out of the tree is refused by ``target``, ``run --verl``, ``compare`` and ``image ascend-context``, naming
it, and the host file's content is in no context and no environment; a link inside the tree stays a link. A build
backend and an import-time hook that write outside their environment run in the sandbox (harness/targets/sandbox.py):
every write they try is denied, and another target's environment hashes the same before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile_repo import HostileRepo, make_hostile_repo
from verl_repo import VerlRepo, git

from harness.targets import sandbox
from harness.targets.environment import _MADE, check_api, ensure_env, tree_hash
from harness.targets.spec import parse_target
from harness.training.workloads.verl_ppo import VerlPpo

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("hostile")


@pytest.fixture(scope="module")
def open_dirs() -> Iterator[tuple[Path, Path]]:
    """A cache others may enter (so the sandbox sees, and must be denied, its sibling environments) and a
    world-writable witness dir; pytest's own temp dirs are closed to other users."""
    cache = Path(tempfile.mkdtemp(prefix="harness-hostile-cache-"))
    witness = Path(tempfile.mkdtemp(prefix="harness-hostile-witness-"))
    cache.chmod(0o755)
    witness.chmod(0o1777)
    yield cache, witness
    subprocess.run(["rm", "-rf", str(cache), str(witness)], check=False)


@pytest.fixture(scope="module")
def hostile(repo: VerlRepo, tmp_path_factory: pytest.TempPathFactory, open_dirs: tuple[Path, Path]) -> HostileRepo:
    return make_hostile_repo(repo, tmp_path_factory.mktemp("hostile"), open_dirs[1], ROOT)


def worktree(hostile: HostileRepo, branch: str, where: Path) -> Path:
    git(hostile.path, "worktree", "add", "-q", str(where), branch)
    return where


def harness(cache: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HARNESS_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "harness", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=900)


def holding(top: Path, token: str) -> list[Path]:
    """Files (links not followed) under ``top`` whose bytes hold ``token``."""
    return [p for p in top.rglob("*") if p.is_file() and not p.is_symlink() and token.encode() in p.read_bytes()]


@pytest.mark.integration
def test_a_link_out_of_the_tree_is_refused_everywhere(
    hostile: HostileRepo, repo: VerlRepo, open_dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    cache = open_dirs[0]
    checkout = worktree(hostile, "outlink", tmp_path / "outlink")
    said = f"verl/host_secret links to {hostile.secret}, outside the checkout: refused"
    scenario = str(ROOT / "scenarios" / "tiny_fsdp_l1.yaml")
    ctx = tmp_path / "ctx"
    for argv in [
        ["target", "--verl", str(checkout)],
        ["run", scenario, "--verl", str(checkout), "--results", str(tmp_path / "run")],
        ["compare", "--base", f"{repo.path}@neutral", "--head", str(checkout), scenario, "--results", f"{tmp_path}/c"],
        ["image", "ascend-context", "--verl", str(checkout), "--out", str(ctx)],
    ]:
        proc = harness(cache, *argv)
        out = proc.stdout + proc.stderr
        print(f"$ harness {' '.join(argv[:2])} ...: exit {proc.returncode}: {out.strip().splitlines()[-1]}")
        assert proc.returncode == 2 and said in out and "Traceback" not in out, out
    by_ref = harness(cache, "target", "--verl", f"{hostile.path}@outlink")  # git archive, then extraction
    assert by_ref.returncode == 2, by_ref.stdout + by_ref.stderr
    assert f"verl/host_secret links to {hostile.secret}, outside the tree: refused" in by_ref.stdout + by_ref.stderr
    made = [d for d in (cache / "envs").iterdir() if d.is_dir()]  # the base of compare's, nothing half-made
    assert made and all((d / "harness-target.json").is_file() for d in made)
    for top in (cache, ctx, tmp_path / "run", tmp_path / "c"):
        assert not holding(top, hostile.token) if top.exists() else True

    inside = worktree(hostile, "inlink", tmp_path / "inlink")
    assert harness(cache, "target", "--verl", str(inside)).returncode == 0
    ctx2 = tmp_path / "ctx2"
    proc = harness(cache, "image", "ascend-context", "--verl", str(inside), "--out", str(ctx2))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    link = ctx2 / "verl-src" / "verl" / "alias_of_version"
    assert link.is_symlink() and os.readlink(link) == "version/version" and link.resolve().is_file()
    assert not holding(cache, hostile.token) and not holding(ctx2, hostile.token)


@pytest.mark.integration
@pytest.mark.skipif(not sandbox.available(), reason="the sandbox needs root (namespaces, a uid change)")
def test_build_and_probes_write_nothing_outside_their_environment(
    hostile: HostileRepo, repo: VerlRepo, open_dirs: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, witness = open_dirs
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(cache))
    _MADE.clear()
    neutral = ensure_env(parse_target(f"{repo.path}@neutral")).root  # another target's environment
    assert neutral is not None
    before = tree_hash(neutral)

    checkout = worktree(hostile, "hostile", tmp_path / "hostile")
    made = harness(cache, "target", "--verl", str(checkout))  # the build backend runs, then the facts probe
    assert made.returncode == 0, made.stdout + made.stderr
    _MADE.clear()
    env = ensure_env(parse_target(str(checkout)))
    assert env.reused
    check_api(env, VerlPpo.symbols, [], "verl_ppo")  # the probe `run --verl` makes: it imports the target's verl

    reports = {p.name.split("-")[0]: p.read_text() for p in witness.glob("*.txt")}
    for tag, text in sorted(reports.items()):
        print(f"{tag}:\n{text}")
    assert set(reports) == {"build", "import"}, reports  # both ran
    for tag, text in reports.items():
        head, *tries = text.splitlines()
        assert not head.startswith("uid 0 "), head
        assert any(f"{neutral}/PWNED-{tag}" in t for t in tries) and any("site-packages" in t for t in tries)
        assert tries and not [t for t in tries if t.endswith("WRITTEN")], text
    assert tree_hash(neutral) == before
    assert not list(Path(sysconfig.get_paths()["purelib"]).glob("zz_pwned_*")) and not list(ROOT.glob("PWNED-*"))
    assert not [p for p in cache.rglob("PWNED-*")]


@pytest.mark.integration
def test_a_changed_environment_is_rebuilt_not_reused(
    repo: VerlRepo, open_dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(open_dirs[0]))
    _MADE.clear()
    env = ensure_env(parse_target(f"{repo.path}@neutral"))
    assert env.root is not None
    init = Path(str(env.facts["packages_dir"])) / "verl" / "__init__.py"
    original = init.read_text()
    init.write_text(original + "\nimport os  # written by a training of another target\n")
    _MADE.clear()
    again = ensure_env(parse_target(f"{repo.path}@neutral"))
    assert not again.reused and init.read_text() == original
