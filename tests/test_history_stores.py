"""The history store seam (harness/history/stores.py): one protocol, each test run against both stores (a branch of a
bare git repository, a plain directory), then what is the git branch's alone (a remote that cannot be read, the lease
on the commit fetched) and a night kept in a directory end to end (``harness history night --directory``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.history.stores import Directory, GitBranch, HistoryStore, Moved, Refused, Unreadable

BRANCH = "precision-debugger-history"


def git(*argv: str, cwd: Path | None = None) -> str:
    return subprocess.run(["git", *argv], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture(params=["git branch", "directory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> HistoryStore:
    if request.param == "directory":
        return Directory(tmp_path / "kept")
    git("init", "-q", "--bare", str(tmp_path / "history.git"))
    return GitBranch(str(tmp_path / "history.git"), BRANCH)


def saved(store: HistoryStore, tmp_path: Path, files: dict[str, str], name: str = "w") -> str:
    """A working copy of ``store`` with ``files`` written in it, saved: the line the save said."""
    copy = store.checkout(tmp_path / name)
    for rel, text in files.items():
        (copy.work / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy.work / rel).write_text(text)
    return store.save(copy, [rel.split("/")[0] for rel in files], "a night")


def held(store: HistoryStore, tmp_path: Path, name: str) -> str | None:
    got = store.read(name, tmp_path / "scratch")
    return None if got is None else got.data.decode()


def test_an_empty_store_is_a_first_night(store, tmp_path):
    copy = store.checkout(tmp_path / "w")
    assert copy.version == "" and copy.note and copy.work.is_dir()
    assert held(store, tmp_path, "cpu.json") is None


def test_what_is_saved_is_read_and_checked_out_again_and_nothing_new_is_said(store, tmp_path):
    said = saved(store, tmp_path, {"cpu.json": '{"nights": 1}'})
    assert said.startswith("history: ") and "now at" in said
    assert held(store, tmp_path, "cpu.json") == '{"nights": 1}'
    got = store.read("cpu.json", tmp_path / "scratch")
    assert got is not None and got.at.startswith("of ")
    copy = store.checkout(tmp_path / "again")
    assert copy.version and copy.note is None and (copy.work / "cpu.json").read_text() == '{"nights": 1}'
    assert store.save(copy, ["cpu.json", "docs"], "nothing") == "history: nothing new to record"


def test_only_the_names_given_are_saved_never_a_lock_or_a_stray_file(store, tmp_path):
    copy = store.checkout(tmp_path / "w")
    for name in ("cpu.json", ".cpu.json.lock", "stray.txt"):
        (copy.work / name).write_text(name)
    store.save(copy, ["cpu.json", "docs"], "a night")  # docs/ absent: nothing of it
    assert held(store, tmp_path, "cpu.json") == "cpu.json"
    assert held(store, tmp_path, ".cpu.json.lock") is None and held(store, tmp_path, "stray.txt") is None


def test_a_page_is_saved_as_the_copy_holds_it(store, tmp_path):
    saved(store, tmp_path, {"cpu.json": "1", "docs/cpu/index.html": "one", "docs/cpu/old.html": "old"})
    copy = store.checkout(tmp_path / "w2")
    (copy.work / "docs" / "cpu" / "old.html").unlink()
    (copy.work / "docs" / "cpu" / "index.html").write_text("two")
    store.save(copy, ["cpu.json", "docs"], "a night")
    assert held(store, tmp_path, "docs/cpu/index.html") == "two"
    assert held(store, tmp_path, "docs/cpu/old.html") is None


def test_a_store_written_meanwhile_is_not_overwritten(store, tmp_path):
    """Two jobs take the store; the first saves; the second's save is refused (Moved) and the first's night kept."""
    saved(store, tmp_path, {"cpu.json": "0"}, "seed")
    first, second = store.checkout(tmp_path / "first"), store.checkout(tmp_path / "second")
    (first.work / "cpu.json").write_text("first")
    (second.work / "cpu.json").write_text("second")
    store.save(first, ["cpu.json"], "first")
    with pytest.raises(Moved, match="another job wrote it"):
        store.save(second, ["cpu.json"], "second")
    assert held(store, tmp_path, "cpu.json") == "first"


def test_a_store_first_written_meanwhile_is_not_overwritten(store, tmp_path):
    """Two first nights: the store absent for both; the second's save finds it there and is refused."""
    first, second = store.checkout(tmp_path / "first"), store.checkout(tmp_path / "second")
    (first.work / "cpu.json").write_text("first")
    (second.work / "cpu.json").write_text("second")
    store.save(first, ["cpu.json"], "first")
    with pytest.raises(Moved):
        store.save(second, ["cpu.json"], "second")
    assert held(store, tmp_path, "cpu.json") == "first"


def _plant_link(store: HistoryStore, tmp_path: Path, where: str, to: Path) -> None:
    """A symbolic link at ``where`` in the store (another writer's), to ``to``."""
    if isinstance(store, Directory):
        (store.root / where).parent.mkdir(parents=True, exist_ok=True)
        (store.root / where).symlink_to(to)
        return
    assert isinstance(store, GitBranch)
    work = tmp_path / "linker"
    git("clone", "-q", "-b", BRANCH, store.remote, str(work))
    (work / where).parent.mkdir(parents=True, exist_ok=True)
    (work / where).unlink(missing_ok=True)
    (work / where).symlink_to(to)
    git("add", "-A", cwd=work)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "a link", cwd=work)
    git("push", "-q", "origin", BRANCH, cwd=work)


@pytest.mark.parametrize("where", ["docs/cpu", "cpu.json"])
def test_a_link_in_the_store_is_refused_before_anything_is_written_through_it(store, tmp_path, where):
    saved(store, tmp_path, {"cpu.json": "0"}, "seed")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep me")
    if where == "cpu.json" and isinstance(store, Directory):
        (store.root / "cpu.json").unlink()
    _plant_link(store, tmp_path, where, outside)
    with pytest.raises(Refused, match=rf"holds a symbolic link \({where}\): nothing is written through a link"):
        store.checkout(tmp_path / "w")
    assert sorted(p.name for p in outside.iterdir()) == ["keep.txt"]


# -- the git branch's own ------------------------------------------------------------------------------------------
def test_a_remote_that_cannot_be_read_is_unreadable_for_the_night_and_for_the_duet(tmp_path):
    store = GitBranch(str(tmp_path / "no-such.git"), BRANCH)
    with pytest.raises(Unreadable, match=rf"^cannot read {tmp_path / 'no-such.git'} \(its branch {BRANCH}\)$"):
        store.checkout(tmp_path / "w")
    with pytest.raises(Unreadable, match=rf"^cannot read the history branch {BRANCH} of .*no-such\.git \(.+\)$"):
        store.read("cpu.json", tmp_path / "scratch")


def test_the_branch_is_pushed_with_a_lease_on_the_commit_fetched_and_named_as_the_nightly(tmp_path):
    bare = tmp_path / "history.git"
    git("init", "-q", "--bare", str(bare))
    store = GitBranch(str(bare), BRANCH)
    assert saved(store, tmp_path, {"cpu.json": "1"}) == f"history: {BRANCH} now at {git('rev-parse', BRANCH, cwd=bare)}"
    assert git("log", "-1", "--format=%an <%ae> %s", BRANCH, cwd=bare) == (
        "precision_debugger nightly <nightly@localhost> a night"
    )
    copy = store.checkout(tmp_path / "w")
    assert copy.version == git("rev-parse", BRANCH, cwd=bare)
    other = git("commit-tree", f"{BRANCH}^{{tree}}", "-p", BRANCH, "-m", "another job's night", cwd=bare)
    git("update-ref", f"refs/heads/{BRANCH}", other, cwd=bare)
    (copy.work / "cpu.json").write_text("2")
    with pytest.raises(Moved, match=rf"moved since this job read it \({copy.version[:12]} then, {other[:12]} now"):
        store.save(copy, ["cpu.json"], "late")
    assert git("rev-parse", BRANCH, cwd=bare) == other


# -- a night kept in a directory, end to end -----------------------------------------------------------------------
def test_a_night_kept_in_a_directory_is_appended_checked_published_and_saved(tmp_path, capsys):
    from gate_builders import ENV, write_results

    kept = tmp_path / "kept"
    for i in (1, 2):
        night = tmp_path / f"night{i}"
        write_results(night, env=ENV | {"verl_commit": f"{i:02x}" * 20, "cpu_model": "Xeon"}, dumps=False)
        job = tmp_path / f"job{i}"
        code = main(["history", "night", "--directory", str(kept), "--results", str(job), f"cpu.json={night}"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert f"history: {kept} now at " in out and out.rstrip().endswith("history: exit 0")
    assert len(json.loads((kept / "cpu.json").read_text())["nights"]) == 2
    assert (kept / "docs" / "cpu" / "index.html").is_file() and (kept / "docs" / ".nojekyll").is_file()
    assert (tmp_path / "job2" / "cpu-check.json").is_file()
    summary = (tmp_path / "job2" / "step-summary.md").read_text()
    assert summary.startswith(f"## precision_debugger: the history of nights (directory {kept})")
    out = tmp_path / "fetched.json"
    assert main(["history", "fetch", "--directory", str(kept), "--results", str(tmp_path / "f"), "cpu.json",
                 str(out)]) == 0  # fmt: skip
    assert out.read_bytes() == (kept / "cpu.json").read_bytes()
    assert main(["history", "fetch", "--directory", str(kept), "--results", str(tmp_path / "f"), "gpu.json",
                 str(out)]) == 0  # fmt: skip
    assert not out.exists() and "no gpu.json on the directory" in capsys.readouterr().out
