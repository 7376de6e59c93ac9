"""The harness's statistics and md5 compare (``harness.gate.numerics.stats_compare``) against msprobe's own, its oracle:
small generated dump pairs, perturbed on each side of each of msprobe's thresholds, run through both, CSV row for
row (every column) the same."""

from __future__ import annotations

import ast
import csv
import io
import json
import math
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from builders import tensor

from harness.artifacts import dumpfile
from harness.gate.numerics import msprobe_cli, rules
from harness.gate.numerics.cells import float_texts, group_cells, stats_cells
from harness.gate.numerics.compare import _compare_stage, engine_of
from harness.gate.numerics.report import StageNumerics, read_csvs
from harness.gate.numerics.rows import Entry, entry_leaves
from harness.gate.numerics.stats_compare import _Bench, _summary_cell, compare_files
from harness.gate.numerics.table import MD5_HEADER, SUMMARY_HEADER

NAN, INF = float("nan"), float("inf")


def t(norm: float = 2.0, mx: float = 1.0, mn: float = -1.0, mean: float = 0.1, **over: Any) -> dict[str, Any]:
    """A tensor's statistics (builders.tensor's, the bench's 2.0 norm) and other fields replaced."""
    return tensor(mx, mn, mean, norm) | over


def api(inputs: list[Any], outputs: list[Any], **extra: Any) -> dict[str, Any]:
    return {"input_args": inputs, "input_kwargs": extra.pop("kwargs", {}), "output": outputs, **extra}


def norms(n_in: float, n_out: float) -> dict[str, Any]:
    """An entry whose input norm and output norm are given (the bench's are 2.0 both)."""
    return api([t(n_in)], [t(n_out)])


def pair() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """(base, head) entries per stage: statistics mode."""
    base: dict[str, Any] = {}
    head: dict[str, Any] = {}
    # relative error of the output's norm with the input unchanged: pass <= 10 %, warning, error > 50 %
    for i, rel in enumerate((0.09, 0.11, 0.49, 0.5, 0.51, 3.0)):
        base[f"Functional.linear.{i}.forward"] = norms(2.0, 2.0)
        head[f"Functional.linear.{i}.forward"] = norms(2.0, 2.0 * (1 + rel))
    # input moved: an error needs every input under 10 %; a warning the output 10x the input
    for i, (rin, rout) in enumerate(((0.02, 0.19), (0.02, 0.21), (0.09, 0.6), (0.11, 0.6), (0.2, 0.1)), start=10):
        base[f"Functional.linear.{i}.forward"] = norms(2.0, 2.0)
        head[f"Functional.linear.{i}.forward"] = norms(2.0 * (1 + rin), 2.0 * (1 - rout))
    # max/min/mean moved (not judged), a zero bench norm (relative error inf), NaN and Inf on either side
    base["Functional.gelu.0.forward"] = api([t()], [t(mean=0.0)])
    head["Functional.gelu.0.forward"] = api([t(mx=3.0)], [t(mn=-7.0, mean=0.5)])
    base["Functional.gelu.1.forward"] = api([t()], [t(norm=0.0)])
    head["Functional.gelu.1.forward"] = api([t()], [t(norm=1.0)])
    base["Functional.gelu.2.forward"] = api([t()], [t()])
    head["Functional.gelu.2.forward"] = api([t()], [t(mx=NAN, mn=NAN, mean=NAN, norm=NAN)])
    base["Functional.gelu.3.forward"] = api([t()], [t(mx=NAN)])
    head["Functional.gelu.3.forward"] = api([t()], [t(mx=NAN)])
    base["Functional.gelu.4.forward"] = api([t(mx=INF)], [t()])
    head["Functional.gelu.4.forward"] = api([t()], [t(mn=-INF, mx=INF)])
    base["Functional.gelu.5.forward"] = api([t(mn=0.0)], [t(mx=0.0, mn=0.0)])  # equal values, not equal texts
    head["Functional.gelu.5.forward"] = api([t(mn=0.0)], [t(mx=-0.0, mn=0.0)])
    base["Functional.gelu.6.forward"] = api([t(mx=3)], [t(mean=0.0)])  # entries equal as values, not as texts
    head["Functional.gelu.6.forward"] = api([t(mx=3.0)], [t(mean=0.0)])
    base["Functional.gelu.7.forward"] = api([t(mx=3)], [t(mean=0.0)])
    head["Functional.gelu.7.forward"] = api([t(mx=3)], [t(mean=-0.0)])
    base["Functional.gelu.8.forward"] = api([t()], [t(mx=None, mn=INF)])  # written alike by orjson (null)
    head["Functional.gelu.8.forward"] = api([t()], [t(mx=NAN, mn=None)])
    # dtype in the float group (error), out of it (unmatched), shape, requires_grad, a scalar argument
    base["Tensor.add.0.forward"] = api([t(), t(), t(), {"type": "int", "value": 3}], [t(), t()],
                                       kwargs={"alpha": {"type": "float", "value": 1.0}})  # fmt: skip
    head["Tensor.add.0.forward"] = api(
        [t(dtype="torch.bfloat16"), t(dtype="torch.int64"), t(shape=[8, 4]), {"type": "int", "value": 4}],
        [t(requires_grad=False), t()], kwargs={"alpha": {"type": "float", "value": 1.0}})  # fmt: skip
    # not judged: Tensor.to (all), all_gather's inputs; nested outputs, None and a torch.Size
    base["Tensor.to.0.forward"] = api([t()], [t()])
    head["Tensor.to.0.forward"] = api([t(mx=NAN)], [t(norm=40.0)])
    base["Distributed._all_gather_base.0.forward"] = api([t()], [t()])
    head["Distributed._all_gather_base.0.forward"] = api([t(norm=40.0)], [t(norm=40.0)])
    base["Tensor.view.0.forward"] = api([t(), {"type": "torch.Size", "value": [4, 8]}, None], [[t(), t()]])
    head["Tensor.view.0.forward"] = api([t(), {"type": "torch.Size", "value": [8, 4]}, None], [[t(), t(norm=9.0)]])
    # entries on one side only; a dropped backward call shifts the later ones (msprobe's renumbering)
    base["Functional.dropout.0.forward"] = api([t()], [t()])
    head["Functional.relu.0.forward"] = api([t()], [t()])
    for i in range(3):
        base[f"Functional.linear.{i}.backward"] = {"input": [t(norm=2.0 + i)], "output": [t(norm=2.0 + i)]}
    for i in (0, 2):
        head[f"Functional.linear.{i}.backward"] = {"input": [t(norm=2.0 + i)], "output": [t(norm=2.0 + i)]}
    # modules and their parameters' gradients (L0)
    mod = "Module.model.layers.0.Qwen2DecoderLayer"
    base[f"{mod}.forward.0"] = api([t()], [t()], parameters={"weight": t()})
    head[f"{mod}.forward.0"] = api([t()], [t(norm=2.4)], parameters={"weight": t(norm=2.1)})
    base[f"{mod}.parameters_grad"] = {"weight": [t()], "bias": [t()]}
    head[f"{mod}.parameters_grad"] = {"weight": [t(norm=5.0)], "bias": [t()]}
    return base, head


def random_pair(n: int = 400) -> tuple[dict[str, Any], dict[str, Any]]:
    """Entries of one to three inputs and one or two outputs, each norm moved or not at random by a relative error
    drawn near the checkers' thresholds (0.1, 0.5, output 10x the inputs) or far from them, some statistics
    zero, -0.0 or equal, a few backward calls, a few leaves of another requires_grad, scalar arguments moved:
    the rows that pass as the entry-at-once reading writes them, the rest by the checkers, all as msprobe writes
    them."""
    r = random.Random(31)
    near = (0.0, 0.0, 0.009, 0.011, 0.05, 0.099, 0.101, 0.11, 0.3, 0.499, 0.501, 0.8, 2.0)

    def leaf() -> dict[str, Any]:
        stats = [r.choice((0.0, -0.0, 3.0)) if r.random() < 0.03 else r.uniform(0.5, 9) for _ in range(3)]
        return t(r.uniform(1, 50), *stats)

    def moved(x: dict[str, Any]) -> dict[str, Any]:
        y = dict(x, Norm=x["Norm"] * (1 + r.choice((-1, 1)) * r.choice(near)))
        if r.random() < 0.1:
            y["Mean"] = r.choice((y["Mean"] * 1.5, 0.0, -0.0))
        if r.random() < 0.02:
            y["requires_grad"] = not y["requires_grad"]
        return y

    base: dict[str, Any] = {}
    head: dict[str, Any] = {}
    for i in range(n):
        ins, outs = [leaf() for _ in range(r.randint(1, 3))], [leaf() for _ in range(r.randint(1, 2))]
        name = f"Functional.{r.choice(('linear', 'gelu', 'softmax'))}.{i}.{'backward' if i % 9 == 0 else 'forward'}"
        alpha = {"alpha": {"type": "float", "value": 0.5}} if i % 7 == 0 else {}  # a scalar argument, moved or not
        base[name] = api(ins, outs, kwargs=alpha)
        moved_alpha = {"alpha": {"type": "float", "value": r.choice((0.5, 0.75))}} if alpha else {}
        head[name] = api([moved(x) for x in ins], [moved(x) for x in outs], kwargs=moved_alpha)
        head[name] = head[name] if r.random() < 0.8 else base[name]
    return base, head


def md5_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    def m(h: str, **over: Any) -> dict[str, Any]:
        return t(md5=h, **over)

    base = {"Functional.linear.0.forward": api([m("aa"), m("bb")], [m("cc")]),
            "Functional.linear.1.forward": api([m("dd"), {"type": "int", "value": 2}], [m("ee")]),
            "Functional.linear.2.forward": api([m("ff")], [m("00")])}  # fmt: skip
    head = {"Functional.linear.0.forward": api([m("aa"), m("b2")], [m("cc")]),
            "Functional.linear.1.forward": api([m("dd"), {"type": "int", "value": 3}], [m("ee", dtype="torch.int8")]),
            "Functional.linear.3.forward": api([m("ff")], [m("00")])}  # fmt: skip
    return base, head


def lockstep_pair() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(base, head) of two ranks of entries mostly the same text on both sides, in one order (runs read past the
    bench's, :meth:`DumpFile.following`): rank 0 with a few entries moved (a norm, an argument's text longer), rank 1
    that too and an entry of the bench's missing on head (the orders part: the name index from there)."""
    r = random.Random(7)
    base: dict[str, Any] = {}
    for i in range(150):
        direction = "backward" if i % 5 == 4 else "forward"
        base[f"Functional.{r.choice(('linear', 'gelu'))}.{i}.{direction}"] = api(
            [t(r.uniform(1, 9), r.uniform(1, 2)) for _ in range(r.randint(1, 3))], [t(r.uniform(1, 9))],
            kwargs={"dim": {"type": "int", "value": 1}} if i % 3 == 0 else {})  # fmt: skip
    head = dict(base)
    names = list(base)
    head[names[40]] = api(base[names[40]]["input_args"], [t(base[names[40]]["output"][0]["Norm"] * 1.7)])
    head[names[60]] = api(base[names[60]]["input_args"], base[names[60]]["output"],
                          kwargs={"dim": {"type": "int", "value": 12345}})  # fmt: skip
    head[names[90]] = api(base[names[90]]["input_args"], [t(base[names[90]]["output"][0]["Norm"] * 1.05)])
    rank1 = {k: v for k, v in head.items() if k != names[100]}
    return [base, base], [head, rank1]


def write_tree(root: Path, stages: dict[str, list[dict[str, Any]]]) -> Path:
    """``step_2/<stage>/step0/rank<R>/`` for each stage's list of per-rank entries, as msprobe lays them out."""
    for stage, ranks in stages.items():
        for r, data in enumerate(ranks):
            d = root / "step_2" / stage / "step0" / f"rank{r}"
            d.mkdir(parents=True)
            doc = {"task": "statistics", "level": "mix", "framework": "pytorch", "dump_data_dir": None, "data": data}
            (d / "dump.json").write_text(json.dumps(doc, indent=1))
            first, *rest = data  # two call stacks: the first entry's, and one the rest share (each entry's first row)
            stacks = {"0": [[first], ["File a.py, line 1, in f"]], "1": [rest, ["File b.py, line 2, in g", "c.py"]]}
            (d / "stack.json").write_text(json.dumps(stacks))
            (d / "construct.json").write_text("{}")
    return root


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("oracle")
    base, head = pair()
    mbase, mhead = md5_pair()
    rank1_base = {k: v for k, v in base.items() if "linear" in k}  # two ranks, rank 1 a different subset
    rank1_head = {k: v for k, v in head.items() if "linear" in k} | {"Functional.linear.1.forward": norms(2.0, 9.0)}
    rbase, rhead = random_pair()
    lbase, lhead = lockstep_pair()
    b = write_tree(root / "base", {"actor_update": [base, rank1_base], "md5": [mbase], "random": [rbase],
                                   "lockstep": lbase})  # fmt: skip
    h = write_tree(root / "head", {"actor_update": [head, rank1_head], "md5": [mhead], "random": [rhead],
                                   "lockstep": lhead})  # fmt: skip
    out = root / "msprobe"
    for stage in ("actor_update", "md5", "random", "lockstep"):
        argv = ["-tp", str(h / "step_2" / stage / "step0"), "-gp", str(b / "step_2" / stage / "step0")]
        assert msprobe_cli._msprobe([*argv, "-o", str(out / stage)]) is None
    return b, h, out


def rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize(
    ("stage", "rank"), [("actor_update", "rank0"), ("actor_update", "rank1"), ("md5", "rank0"), ("random", "rank0")]
)
def test_every_row_and_column_as_msprobe_writes_them(trees: tuple[Path, Path, Path], tmp_path: Path, stage, rank):
    _same_rows_as_msprobe(trees, tmp_path, stage, rank)


@pytest.mark.parametrize("batch", [600, 2500, 1 << 14])
@pytest.mark.parametrize(("stage", "rank"), [("lockstep", "rank0"), ("lockstep", "rank1"), ("random", "rank0")])
def test_runs_read_past_give_the_rows_msprobe_writes(trees, tmp_path, monkeypatch, batch, stage, rank):
    """Runs of entries the same text on both sides are read past the bench's (neither split nor parsed there): the
    rows still msprobe's, with runs read past and runs that differ (a moved entry, one of a longer text, the orders
    parting on rank 1) at every run length."""
    monkeypatch.setattr(dumpfile, "BATCH", batch)
    told: list[bool] = []
    follows = _Bench.follows
    monkeypatch.setattr(_Bench, "follows", lambda self, *a: told.append(follows(self, *a)) or told[-1])
    _same_rows_as_msprobe(trees, tmp_path, stage, rank)
    if stage == "lockstep":
        assert True in told and False in told[1:], told


def _same_rows_as_msprobe(trees: tuple[Path, Path, Path], tmp_path: Path, stage: str, rank: str) -> None:
    base, head, oracle = trees
    (expected,) = (oracle / stage).glob(f"compare_result_{rank}_*.csv")
    mine = tmp_path / "mine.csv"
    seen: list[str] = []
    n = compare_files(*(d / "step_2" / stage / "step0" / rank / "dump.json" for d in (head, base)), mine,
                      lambda r: seen.append(r.result))  # fmt: skip
    want, got = rows(expected), rows(mine)
    assert got[0] == want[0] and want[0][: len(SUMMARY_HEADER if stage != "md5" else MD5_HEADER)] == (
        SUMMARY_HEADER if stage != "md5" else MD5_HEADER
    )
    assert n == len(got) - 1 == len(want) - 1
    diffs = [(w[0], [(h, a, b) for h, a, b in zip(want[0], g, w, strict=True) if a != b])
             for g, w in zip(got[1:], want[1:], strict=True) if g != w]  # fmt: skip
    assert diffs == []
    results = [g[got[0].index("Result")] for g in got[1:]]
    alone = [g[got[0].index("Bench Name")] == "N/A" for g in got[1:]]
    assert seen == [r for r, a in zip(results, alone, strict=True) if r != "pass" or a]  # on_row: those not passing
    # or with no counterpart on the bench, in order
    if (stage, rank) == ("actor_update", "rank0") or stage in ("md5", "random"):  # the pair reaches every verdict
        assert {"pass", "warning", "error"} <= set(results), results
    if stage == "random":  # each reading of a pass on many rows: equal entries, moved ones, near the thresholds
        assert results.count("pass") > 600 and results.count("warning") > 20 and results.count("error") > 30, results


def test_a_stage_is_counted_rank_by_rank_as_from_msprobes_csvs(trees: tuple[Path, Path, Path], tmp_path: Path):
    base, head, oracle = trees
    ours, theirs = StageNumerics(2, "actor_update"), StageNumerics(2, "actor_update")
    where = tmp_path / "h"
    stage = Path("step_2", "actor_update", "step0")
    ranks = [(r, head / stage / r / "dump.json", base / stage / r / "dump.json") for r in ("rank0", "rank1")]
    _compare_stage(ours, ranks, where, [])
    read_csvs(theirs, oracle / "actor_update", [])
    assert [Path(c).name for c in ours.csvs] == ["compare_result_rank0.csv", "compare_result_rank1.csv"]
    assert (ours.rows, ours.counts, ours.first) == (theirs.rows, theirs.counts, theirs.first)
    assert ours.first is not None and ours.first.name == "Functional.linear.1.forward.output.0"  # in dump order


def test_the_engine_switch_is_validated(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HARNESS_NUMERICS", "msprobe")
    assert engine_of(None) == "msprobe" and engine_of("harness") == "harness"
    monkeypatch.setenv("HARNESS_NUMERICS", "pandas")
    with pytest.raises(Exception, match="HARNESS_NUMERICS='pandas': one of harness, msprobe"):
        engine_of(None)


def test_statistics_cells_by_orjson_are_what_repr_writes():
    """orjson renders a row's floats in one call (its exponent and its 1e-5..1e-4 range re-rendered by repr): the
    cells must be repr's, as pandas writes them in msprobe's CSV, on random bit patterns, every decade and each
    side of the thresholds (1e-5, 1e-4, 1e16)."""
    r = random.Random(0)
    values = [struct.unpack("<d", r.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(20000)]
    values += [m * 10.0**k for k in range(-323, 309) for m in (1.0, 1.5, 9.999999999999999, 1.0000000000000002)]
    values += [c * (1 + r.uniform(-1e-3, 1e-3)) for c in (1e-5, 1e-4, 1e16, 0.1, 1.0) for _ in range(2000)]
    values += [0.0, -0.0, 5e-324, 2.0**53, 0.1 + 0.2, 1e22, 123456789.0]
    finite = [v for v in values if math.isfinite(v)]
    assert len(finite) > 20000
    assert [t for v in finite for t in float_texts([v])] == [repr(v) for v in finite]
    assert float_texts(finite[:12]) == [repr(v) for v in finite[:12]]
    assert float_texts([1.5, NAN, INF, -INF, 2, "N/A", True]) == ["1.5", "nan", " inf", " -inf", "2", "N/A", "True"]
    # one call on a mixed run (the statistics of many entries at once), each cell as csv.writer writes its value
    others = [3, -7, True, False, None, "None", "a,b", 'q"x', "line\nbreak", [1, 2], [5], {"k": 1}, NAN, INF]
    mixed = [v for f in finite[:3000] for v in (f, r.choice(others))]

    def cell(v: Any) -> str:
        if isinstance(v, float) and math.isinf(v):
            return " inf" if v > 0 else " -inf"  # msprobe's rendering of an inf for Excel
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\n").writerow([v, 0])  # one field alone: an empty one is written '""'
        return buf.getvalue()[: -len(",0\n")]

    assert float_texts(mixed) == [cell(v) for v in mixed]
    assert float_texts([v for v in mixed if not isinstance(v, list | dict)]) == [
        cell(v) for v in mixed if not isinstance(v, list | dict)
    ]
    assert float_texts([*mixed[:9], 2**70]) == [cell(v) for v in [*mixed[:9], 2**70]]  # beyond orjson's integers


def test_a_runs_cells_by_one_call_are_each_values_cells():
    """:func:`group_cells` (a run's statistics by one orjson call, words replaced in its text) against
    :func:`stats_cells` (value by value, checked above against repr and csv.writer), with either rendering of
    a value that is not a finite number: runs of numbers and Nones (one replace), with bools, with a NaN or an inf
    among the Nones (each group with a null alone), with strings holding commas, brackets and the words, lists,
    dicts and an integer beyond 64 bits (each such group alone)."""
    r = random.Random(5)
    numbers = [1.5, -2.0, 3, 0.0, -0.0, 1e-5, 1.5e-05, 2.5e-9, 1e16, 123456789.0, -7]
    kinds = {
        "numbers and None": [*numbers, None],
        "bools": [*numbers, None, True, False],
        "NaN and inf": [*numbers, None, NAN, INF, -INF],
        "strings": [*numbers, None, True, "None", "null", "a,b", "[0, 1]", "x],[y", 'q"x', "true"],
        "others": [*numbers, None, [1, 2], [5], {"k": 1}, 2**70, NAN],
    }
    for name, pool in kinds.items():
        for n in (1, 3, 40, 600):
            groups = [[r.choice(pool) for _ in range(4)] for _ in range(n)]
            if r.random() < 0.5:
                groups = [tuple(g) for g in groups]
            for other in (_summary_cell, None):
                want = stats_cells([v for g in groups for v in g], *([other] if other else []))
                assert group_cells(groups, *([other] if other else [])) == want, (name, n)
    assert group_cells([]) == []


def test_the_leaves_of_an_entry_alike_are_its_items():
    """entry_leaves (the rows of an entry the same on both sides, without a row side's object) is Entry.items' name,
    dtype, shape, requires_grad and statistics, or None (Entry.items then): on the pairs above and on values of
    the kinds msprobe writes its own way."""
    own = {"type": "torch.Size", "value": [2, 3]}, {"type": "slice", "value": [0, 4, 1]}
    entries = {k: v for side in (*pair(), *random_pair(60), *md5_pair()) for k, v in side.items()}
    entries |= {
        "Tensor.reshape.0.forward": api([t(), *own, {"type": "ellipsis", "value": "..."}], [t()]),
        "Distributed.send.0.forward": api([t()], [], kwargs={"dst": {"type": "int", "value": 1}}),
        "Distributed.all_reduce.0.forward": api([{"type": "torch.ProcessGroup", "group_ranks": [0, 1]}], [t()]),
        "Tensor.add.1.forward": api([t(), None, {"type": "bool", "value": True}], [t(requires_grad=None)]),
        "Tensor.add.2.forward": api([t(), {"type": "str", "value": "a,b"}], {"type": "torch.Tensor", **t()}),
        "Tensor.add.3.forward": api([[t(), t()]], [t()], kwargs={"alpha": {"type": "float", "value": 0.5}}),
        "Tensor.mul.0.backward": {"input": [t()], "output": [t(), {"type": "int", "value": 2}]},
    }
    told = 0
    for name, data in entries.items():
        items = Entry(name, name, data).items(False)
        if (leaves := entry_leaves(name, data)) is not None:
            told += 1
            assert leaves == [(it.name, it.dtype, it.shape, it.req_grad, it.stats) for it in items], name
    assert told > 0.8 * len(entries)
    assert all(entry_leaves(n, entries[n]) is None for n in ("Tensor.reshape.0.forward", "Distributed.send.0.forward",
               "Distributed.all_reduce.0.forward", "Tensor.add.1.forward", "Tensor.add.2.forward",
               "Tensor.add.3.forward", f"{'Module.model.layers.0.Qwen2DecoderLayer'}.forward.0"))  # fmt: skip


def thresholds_written_as_numbers(package: Path) -> list[str]:
    """The lines (file:line) where a module of ``package`` compares against one of msprobe's relative-error
    thresholds written as a number, rather than through rules' constants."""
    thresholds = {rules.QUIET_INPUTS, rules.OUTPUT_ERROR, rules.WARN_ON_EQUAL_INPUTS, rules.WARN_RATIO}
    found = set()
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                numbers = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant)}
                if numbers & thresholds:
                    found.add(f"{path.name}:{node.lineno}")
    return sorted(found)


def test_msprobes_thresholds_are_defined_once(tmp_path: Path):
    """A change of msprobe's rules is made in one place: the checkers and the fast path for entries whose rows all
    pass read the thresholds through rules' predicates; no comparison holds one as a number. The finder itself
    finds them where they were written twice (the checkers' and the fast path's, before the split)."""
    assert thresholds_written_as_numbers(Path(rules.__file__).parent) == []
    (tmp_path / "old.py").write_text(
        "def judged(into, out):\n    return into < 0.1 and out > 0.5\n"
        "def passing(into, out):\n    return (into < 0.1 and out > 0.5) or (into != 0 and out / into > 10)\n"
    )
    assert thresholds_written_as_numbers(tmp_path) == ["old.py:2", "old.py:4"]
    assert rules.output_error(0.0999, 0.5001) and not rules.output_error(0.1, 0.9) and not rules.output_error(0, 0.5)
    assert rules.output_warning(0, 0.1001) and not rules.output_warning(0, 0.1)
    assert rules.output_warning(0.01, 0.1001) and not rules.output_warning(0.01, 0.1)
