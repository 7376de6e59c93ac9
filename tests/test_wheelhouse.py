"""``harness wheelhouse``: the harness's runtime closure as wheels, installed on a runner without network by pip alone
(docs/air-gapped.md)."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from harness.cli import main
from harness.cli.wheelhouse import closure, held

PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


def _freeze() -> str:
    return "\n".join(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())


def test_the_closure_is_what_the_harness_runs_with_at_the_versions_installed_here() -> None:
    found = closure(PYTHON, set())
    for dist in ("mindstudio-probe", "verl", "torch", "pydantic", "docker", "pytest"):
        assert found[dist] == metadata.version(dist)
    assert "verl-msprobe-harness" not in found  # built from the checkout, not downloaded
    assert not {"ruff", "mypy", "import-linter"} & set(found)  # the dev extra is not run time


def test_what_the_runner_holds_is_left_out_with_what_only_it_needs(tmp_path: Path) -> None:
    freeze = tmp_path / "freeze.txt"
    freeze.write_text("# the runner's image\ntorch==2.9.0+cu128\nray @ file:///wheels/ray.whl\n-e /src/verl\n")
    assert held(freeze) == {"torch", "ray"}
    found, kept = closure(PYTHON, set()), closure(PYTHON, held(freeze))
    assert not {"torch", "ray"} & set(kept)
    assert "aiohttp" in found and "aiohttp" not in kept  # ray's alone
    assert "numpy" in kept  # verl's and msprobe's too


def test_a_wheelhouse_is_made_in_an_empty_dir_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "keep.txt").write_text("mine")
    assert main(["wheelhouse", str(tmp_path / "w")]) == 2
    assert "is not empty (nothing is overwritten)" in capsys.readouterr().err


@pytest.mark.integration
def test_a_wheelhouse_installs_with_pip_alone_and_no_index(tmp_path: Path) -> None:
    """Everything held but the harness itself: no download, its wheel built from the checkout and installed offline."""
    freeze = tmp_path / "freeze.txt"
    freeze.write_text(_freeze())
    house = tmp_path / "house"
    assert main(["wheelhouse", str(house), "--held", str(freeze)]) == 0
    lines = (house / "requirements.txt").read_text().splitlines()
    harness = f"verl-msprobe-harness=={metadata.version('verl-msprobe-harness')}"
    assert [ln for ln in lines if not ln.startswith("#")] == [harness]
    how = lines[1].removeprefix("# ").split()  # the line the folder heads itself with, run as it stands
    assert how[:2] == ["python3", "-m"] and "--no-index" in how
    site = tmp_path / "site"
    subprocess.run([sys.executable, *how[1:], "--target", str(site)], check=True)
    assert (site / "harness" / "cli" / "wheelhouse.py").is_file()
