"""The streaming dump.json reader: same results as a whole-file parse, NaN literals, files that are no files."""

from __future__ import annotations

import gc
import json
import math
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

import pytest
from builders import dump_doc, tensor, write_dump
from msprobe.core.common.file_utils import save_json

from harness.artifacts import dumpfile
from harness.artifacts.dumpfile import DumpFile, NotRegularFile, normalise
from harness.artifacts.reader import DumpTree, Metrics, iter_tensors
from harness.checks import CHECKS, CheckContext
from harness.checks.contents import _plain, _plain_tensors
from harness.errors import MetricsError
from harness.gate.structure import key, structure_of

FIFO_REL = "step_2/actor_update/step0/rank0/dump.json"


def _doc(n: int) -> dict[str, Any]:
    """A dump with non-finite statistics, an empty entry, nesting and non-ASCII text, as the stdlib writes it."""
    doc = dump_doc("mix", "actor_update", n)
    doc["data"]["Functional.linear.0.forward"]["output"][0].update(Max=math.nan, Min=-math.inf, Mean=math.inf)
    doc["data"]["Tensor.add.7.forward"] = {}
    doc["data"]["Torch.cat.3.forward"] = {"input_args": [[{"type": "int", "value": 3}], "é"], "output": []}
    doc["dump_data_dir"] = {"nested": [1, 2.5, None]}
    return doc


def _streamed(path: Path) -> tuple[dict[str, Any], list[tuple[str, Any]]]:
    dump = DumpFile(path)
    entries = [kv for batch in dump.batches() for kv in batch.items()]
    return dump.header, entries


def _texts(path: Path) -> list[tuple[dict[str, Any], list[str] | None]]:
    return [(batch, dumpfile.run_texts(batch, text)) for batch, text in DumpFile(path).runs()]


def _same(a: Any, b: Any) -> bool:
    """Equality with NaN equal to itself (the repr compares floats exactly, NaN included)."""
    return repr(a) == repr(b)


@pytest.mark.parametrize("indent", [None, 1, 2])
@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_streaming_equals_a_whole_file_parse(tmp_path, monkeypatch, indent, chunk):
    monkeypatch.setattr(dumpfile, "CHUNK", chunk)  # tiny windows: every value is cut off somewhere
    monkeypatch.setattr(dumpfile, "BATCH", chunk)  # one entry per orjson call, or all of them in one
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(_doc(6), indent=indent, ensure_ascii=False))
    whole = json.loads(path.read_text())
    header, entries = _streamed(path)
    assert header == {k: whole[k] for k in ("task", "level", "framework")}
    assert _same(entries, list(whole["data"].items()))


def test_msprobe_written_nan_and_infinity_literals(tmp_path):
    path = tmp_path / "dump.json"
    save_json(str(path), _doc(3), indent=1)  # msprobe's own writer
    text = path.read_text()
    assert all(f": {lit}," in text for lit in ("NaN", "-Infinity", "Infinity"))
    entry = dict(_streamed(path)[1])["Functional.linear.0.forward"]
    stats = entry["output"][0]
    assert math.isnan(stats["Max"]) and stats["Min"] == -math.inf and stats["Mean"] == math.inf


@pytest.mark.parametrize("chunk", [7, 300, 1 << 20])
def test_entries_texts_are_theirs_as_msprobe_wrote_them(tmp_path, monkeypatch, chunk):
    """runs and run_texts: where a run of entries is cut in msprobe's layout, each entry's text (an entry equal on
    both sides of a compare is told by it); another layout has none, and its entries are read all the same."""
    monkeypatch.setattr(dumpfile, "CHUNK", chunk)
    monkeypatch.setattr(dumpfile, "BATCH", chunk)
    doc = _doc(6)
    path = tmp_path / "dump.json"
    save_json(str(path), doc, indent=1)
    runs = _texts(path)
    assert _same([kv for batch, _ in runs for kv in batch.items()], list(_streamed(path)[1]))
    assert [name for batch, texts in runs if texts for name in batch] == list(doc["data"])  # every one told here
    for batch, texts in runs:
        for name, text in zip(batch, texts or [], strict=True):
            assert _same(json.loads('{"' + text + "}"), {name: batch[name]})
    twice = '{\n "data": {\n  "a": {\n   "x": 1\n  },\n  "a": {\n   "x": 2\n  }\n }\n}'  # a name twice
    # and another member between them, after an indent of its own: as many texts as members, but not theirs
    uneven = twice.replace('},\n  "a"', '},\n   "b": 3,\n  "a"')
    for text in (twice, uneven):
        path.write_text(text)
        runs = _texts(path)
        if chunk == 7:  # each "a" in a run of its own: every run's texts told, and its members' own
            assert len(runs) == 2 and all(texts is not None for _, texts in runs), runs
            for batch, texts in runs:
                assert [json.loads('{"' + t + "}") for t in texts or []] == [{k: v} for k, v in batch.items()]
        else:  # one run holds both: none told (the texts there would be another member's)
            assert [texts for _, texts in runs] == [None], runs
    path.write_text(json.dumps(doc))  # no indent: not msprobe's layout
    assert {texts for _, texts in _texts(path)} == {None}


@pytest.mark.parametrize("chunk", [7, 300, 1 << 20])
def test_entries_read_lazily_are_the_entries_parsed(tmp_path, monkeypatch, chunk):
    """following, as the compare reads its bench: where the texts are given, the names as
    parsed and each value, read from its text, the value parsed; a run with a name escaped or a name twice is
    parsed (no texts), as is another layout; a text that is not one member is refused when read."""
    monkeypatch.setattr(dumpfile, "CHUNK", chunk)
    monkeypatch.setattr(dumpfile, "BATCH", chunk)
    doc = _doc(6)
    escaped = dump_doc("mix", "actor_update", 3)
    escaped["data"]['Tensor.a\\"b".0.forward'] = {"output": [tensor(1, 0, 0.5, 1)]}
    twice = '{\n "data": {\n  "a": {\n   "x": 1\n  },\n  "a": {\n   "x": 2\n  }\n }\n}'  # one member where one run
    path = tmp_path / "dump.json"
    layouts = {"msprobe": json.dumps(doc, indent=1), "non-ASCII": json.dumps(doc, indent=1, ensure_ascii=False),
               "no indent": json.dumps(doc), "escaped": json.dumps(escaped, indent=1), "twice": twice}  # fmt: skip
    for layout, text in layouts.items():
        path.write_text(text)
        (following := DumpFile(path).following()).send(None)
        lazy = list(following)
        read = [
            (k, dumpfile.entry_value(t) if texts else v)
            for batch, texts in lazy
            for (k, v), t in zip(batch.items(), texts or repeat(None), strict=False)
        ]
        assert _same(read, list(_streamed(path)[1]))
        told = [k for batch, texts in lazy if texts for k in batch]
        assert all(v is None for batch, texts in lazy if texts for v in batch.values())
        assert 'Tensor.a\\"b".0.forward' not in told
        if layout in ("msprobe", "non-ASCII") or (layout == "twice" and chunk < 100):  # twice: runs of one
            assert told == [k for k, _ in read]
        elif layout != "escaped" or chunk > 1000:  # escaped: the runs of the other entries are told
            assert told == []
    for broken in ('a": {\n   "x": 1\n  },\n   "b": 3', 'a": {\n   "x": [1\n  }', 'a": 1, "b": 2'):
        with pytest.raises(ValueError, match="not one JSON member"):
            dumpfile.entry_value(broken)


@pytest.mark.parametrize("chunk", [7, 300, 1 << 20])
@pytest.mark.parametrize("batch", [1600, 5000])  # runs of a few entries
def test_following_reads_past_the_same_text_and_cuts_where_the_other_does(tmp_path, monkeypatch, chunk, batch):
    """DumpFile.following, as the compare's bench follows the target's runs (DumpFile.runs): a run the same text is
    read past (SKIPPED), one that is not comes back up to the target's run's last entry, so that the next run
    starts where the target's does; what is read past and what comes back are every entry once, in order."""
    monkeypatch.setattr(dumpfile, "CHUNK", chunk)
    monkeypatch.setattr(dumpfile, "BATCH", batch)
    doc = dump_doc("mix", "actor_update", 12)
    target, bench = tmp_path / "target.json", tmp_path / "bench.json"
    save_json(str(bench), doc, indent=1)
    moved = list(doc["data"])[5]
    doc["data"][moved]["input_kwargs"] = {"pad": {"type": "str", "value": "x" * 1200}}  # the bench's cut elsewhere
    save_json(str(target), doc, indent=1)
    runs = DumpFile(bench).following()
    assert next(runs) == (dumpfile.SKIPPED, None)
    seen, skipped = [], 0
    for batch, text in DumpFile(target).runs():
        assert text is not None
        got, texts = runs.send((text, next(reversed(batch))))
        if got is dumpfile.SKIPPED:
            skipped += 1
            seen += list(batch)
        else:
            assert list(got) == list(batch) and texts is not None  # the same entries, as texts
            assert (moved in got) == (texts != dumpfile.run_texts(batch, text))
            seen += list(got)
    assert seen == list(doc["data"]) and 0 < skipped < len(seen)
    with pytest.raises(StopIteration):
        runs.send(None)


def test_the_collector_is_paused_only_while_a_dump_is_read(tmp_path):
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(_doc(3), indent=1))
    reading = DumpFile(path).batches()
    next(reading)
    assert not gc.isenabled()
    reading.close()  # a reader that stops early
    assert gc.isenabled()
    path.write_text(json.dumps(_doc(3), indent=1)[:-40])
    with pytest.raises(ValueError):
        _streamed(path)
    assert gc.isenabled()
    gc.disable()
    try:
        path.write_text(json.dumps(_doc(3), indent=1))
        _streamed(path)
        assert not gc.isenabled()  # a caller's own pause is left as it was
    finally:
        gc.enable()


def test_structure_equals_the_whole_file_reading(tmp_path):
    for rank, indent in ((0, 1), (1, None)):
        d = tmp_path / f"step_2/actor_update/step0/rank{rank}"
        d.mkdir(parents=True)
        (d / "dump.json").write_text(json.dumps(_doc(5 + rank), indent=indent))
    want = {}
    for rank in (0, 1):
        data = json.loads((tmp_path / f"step_2/actor_update/step0/rank{rank}/dump.json").read_text())["data"]
        names = Counter(normalise(n) for n in data)
        want[key("actor_update", rank)] = {"entries": len(data), "names": dict(sorted(names.items()))}
    assert structure_of(tmp_path) == want


@pytest.mark.parametrize("indent", [None, 1])
def test_every_truncation_is_an_error(tmp_path, indent):
    text = json.dumps(_doc(2), indent=indent)
    path = tmp_path / "dump.json"
    for cut in range(0, len(text), 13):
        path.write_text(text[:cut])
        with pytest.raises(ValueError):
            _streamed(path)


@pytest.mark.parametrize(
    ("text", "has_data", "header"),
    [
        ('{"data": [1], "task": "tensor"}', False, {"task": "tensor"}),
        ('{"level": "L0", "data": {}}', True, {"level": "L0"}),
        ("{}", False, {}),
    ],
)
def test_header_and_data_in_any_order(tmp_path, text, has_data, header):
    path = tmp_path / "dump.json"
    path.write_text(text)
    dump = DumpFile(path)
    assert list(dump.batches()) == []
    assert (dump.has_data, dump.header) == (has_data, header)


@pytest.mark.parametrize("text", ["[]", '{"data": {"a": 1,}}', '{"data": {}} x', '{"data": {"a": 1} "b": 2}'])
def test_malformed_documents_are_errors(tmp_path, text):
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(ValueError):
        _streamed(path)


def _within(seconds: float, fn: Callable[[], Any]) -> tuple[Any, float]:
    """fn's result (or exception) and its time; fails, instead of hanging the suite, past ``seconds``."""
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            outcome.append(exc)

    start = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"still running after {seconds} s"
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0], time.monotonic() - start


def _make_fifo(path: Path) -> None:
    os.mkfifo(path)


def _link_dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _make_dir(path: Path) -> None:
    path.mkdir()
    (path / "dump.json").write_text("{}")


@pytest.mark.parametrize(
    ("make", "kind"), [(_make_fifo, "FIFO"), (_link_dev_zero, "symlink"), (_make_dir, "directory")]
)
def test_fifo_or_device_link_is_one_layout_line_and_no_hang(good_case, make, kind):
    _, ctx = good_case
    path = ctx.tree.root / FIFO_REL
    path.unlink()
    make(path)
    fresh = CheckContext(ctx.scenario, ctx.dir)
    layout, _ = _within(10, lambda: CHECKS["layout"](fresh))
    assert layout.problems == [f"{FIFO_REL}: not a regular file ({kind})"]
    contents, seconds = _within(10, lambda: CHECKS["contents"](fresh))
    assert contents.passed and seconds < 10
    structure, _ = _within(10, lambda: structure_of(ctx.tree.root))
    assert structure["actor_update/rank0"]["entries"] == 8  # the other step's dump only
    with pytest.raises(NotRegularFile, match=kind):
        _streamed(path)


def test_metrics_fifo_is_a_readable_problem(tmp_path):
    os.mkfifo(tmp_path / "metrics.jsonl")
    with pytest.raises(MetricsError, match=r"not a regular file \(FIFO\)"):
        _within(10, lambda: Metrics.read(tmp_path / "metrics.jsonl"))


def test_symlinked_step_dir_is_a_stray_and_not_walked(good_case, monkeypatch):
    _, ctx = good_case
    root = ctx.tree.root
    (root / "step_9").symlink_to("/")
    (root / "step_2" / "actor_update" / "step0" / "rank5").symlink_to(root / "step_4" / "actor_update" / "step0")
    listed: list[Path] = []
    iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: listed.append(self) or iterdir(self))
    tree = DumpTree.scan(root)
    assert not [p for p in listed if p.name == "step_9" or p.is_relative_to("/proc")]
    assert {"step_9", "step_2/actor_update/step0/rank5"} <= set(tree.strays)
    layout = CHECKS["layout"](CheckContext(ctx.scenario, ctx.dir)).problems
    assert "unexpected path step_9 under the dump root (not step_N/stage/step0/rankR)" in layout


def test_symlinked_dump_root_is_one_layout_line_and_not_walked(good_case, monkeypatch):
    _, ctx = good_case
    dumps = ctx.tree.root
    dumps.rename(dumps.with_name("elsewhere"))
    dumps.symlink_to("/")
    listed: list[Path] = []
    iterdir = Path.iterdir
    monkeypatch.setattr(Path, "iterdir", lambda self: listed.append(self) or iterdir(self))
    fresh = CheckContext(ctx.scenario, ctx.dir)
    layout, seconds = _within(10, lambda: CHECKS["layout"](fresh))
    assert not listed and seconds < 10
    assert f"{dumps}: a symlink to /, not followed (dumps must lie in the run dir)" in layout.problems
    assert not CHECKS["contents"](fresh).passed  # nothing to check: "see the layout check"
    assert structure_of(dumps) == {}


def test_every_tensor_is_counted(good_case):
    _, ctx = good_case
    write_dump(ctx.tree.root, 3, "actor_update", 0)  # an unexpected dir: not read by the contents check
    result = CHECKS["contents"](CheckContext(ctx.scenario, ctx.dir))
    assert result.figures["contents.tensors"] == 2 * 2 * (4 * 2 + 4 * 2 * 2)


def _random_value(r: random.Random, depth: int) -> Any:
    leaves = [
        None,
        3,
        "x",
        tensor(),
        tensor(mx=math.nan),
        tensor(mn=2.0),
        {k: v for k, v in tensor().items() if k != "shape"},
        {"type": "int", "value": 3},
        {"type": "torch.Size", "value": [2, 3]},
    ]
    if depth == 0 or r.random() < 0.4:
        return r.choice(leaves)
    if r.random() < 0.5:
        return [_random_value(r, depth - 1) for _ in range(r.randrange(4))]
    return {f"k{i}": _random_value(r, depth - 1) for i in range(r.randrange(4))}


def test_the_contents_fast_path_agrees_with_the_full_walk():
    """The fast path counts an entry only when the full walk would find exactly those tensors, all plain."""
    r, counted = random.Random(0), 0
    for _ in range(3000):
        entry = {g: _random_value(r, 3) for g in r.sample(["input_args", "input_kwargs", "output", "type"], 3)}
        found = [t for _, t in iter_tensors(entry)]
        if (n := _plain_tensors(entry)) >= 0:
            assert n == len(found) and all(_plain(t) for t in found)
            counted += 1
    assert counted > 30  # the fast path is taken, not just always declined


def test_contents_figures_equal_a_whole_file_count(good_case):
    """Dumps in msprobe's layout (indent=1) with NaN literals: the streamed check counts what a full parse finds."""
    _, ctx = good_case
    tensors = nonfinite = 0
    for i, path in enumerate(sorted(ctx.tree.root.rglob("dump.json"))):
        doc = json.loads(path.read_text())
        doc["data"][f"Functional.linear.{i % 4}.forward"]["output"][0]["Max"] = math.nan
        save_json(str(path), doc, indent=1)
        found = [t for e in doc["data"].values() for _, t in iter_tensors(e)]
        tensors += len(found)
        nonfinite += sum(not all(math.isfinite(t[k]) for k in ("Max", "Min", "Mean", "Norm")) for t in found)
    result = CHECKS["contents"](CheckContext(ctx.scenario, ctx.dir))
    assert (result.figures["contents.tensors"], result.figures["contents.nonfinite_tensors"]) == (tensors, nonfinite)
    assert nonfinite == 8 and len(result.problems) == 4  # three examples and the count line


@pytest.mark.parametrize("key", ["data", "task", "level"])
def test_a_top_level_key_given_twice_is_not_a_dump(tmp_path, key):
    """json.load keeps the last "data", a stream the first: msprobe's compare and the harness read two different
    dumps from one file. Refused as invalid instead."""
    first = '{"a.0.forward": {"input_args": []}}' if key == "data" else '"x"'
    second = '{"b.0.forward": {}}' if key == "data" else '"y"'
    doc = {"task": '"statistics"', "level": '"L1"', "data": '{"c.0.forward": {}}'} | {key: first}
    text = "{" + ", ".join(f'"{k}": {v}' for k, v in doc.items()) + f', "{key}": {second}' + "}"
    path = tmp_path / "dump.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=f"the top-level key '{key}' twice at char"):
        list(DumpFile(path).batches())
