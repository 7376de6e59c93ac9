"""Each side of msprobe's rows: a dump.json entry's leaves as msprobe 26.2 reads them (``read_op``,
``op_item_parse``, ``gen_op_item``): one per leaf of an entry's input_args, input_kwargs, input, output, parameters
(``.input.N`` / ``.output.N`` / ``.parameters.NAME``, nested lists and dicts add ``.N`` / ``.KEY``) or
parameters_grad, ordered inputs, parameters, outputs, parameters_grad (``reorder_index``). Entries whose name has no
forward/backward/parameters_grad among its last two parts give none. A backward entry's match key has its call
number replaced by its rank among the backward calls of the same API (``update_backward_call``)."""

from __future__ import annotations

import json
import operator
import re
import zlib
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from harness.artifacts.dumpfile import CHUNK, MAX_VALUE, DumpFile, entry_value
from harness.gate.numerics.table import N_A

_IO = (("input_args", ".input"), ("input_kwargs", ".input"), ("input", ".input"), ("output", ".output"),
       ("parameters", ".parameters"))  # fmt: skip
_STATE = {"input_args": "input", "input_kwargs": "input"}
MAX_DEPTH = 400
_TENSOR = operator.itemgetter("shape", "Max", "Min", "Mean", "Norm", "requires_grad")
_REORDER = {"parameters": 1, "output": 2, "parameters_grad": 3}  # inputs first, then these


@dataclass(slots=True)
class Item:
    """One row's side: a leaf of an entry as msprobe's ``gen_op_item`` reads it."""

    name: str
    state: str
    dtype: str
    shape: str
    req_grad: str
    stats: Sequence[Any]  # max, min, mean, norm
    md5: str


UNREAD = object()  # an entry's value not parsed yet (the bench's: DumpFile.following)


@dataclass(slots=True)
class Entry:
    """One dump.json entry: its value and the key its rows are matched by (backward calls renumbered)."""

    name: str
    key: str
    value: Any  # as parsed, or UNREAD: parsed from ``text`` when first asked for
    text: str | None = None  # as written, where msprobe's layout shows it (DumpFile.runs, DumpFile.following)

    @property
    def data(self) -> Any:
        if self.value is UNREAD:
            self.value = entry_value(self.text or "")
        return self.value

    def items(self, crc: bool) -> list[Item]:
        """Its rows' sides, parsed when asked (the name index needs less); ``crc``: md5 mode's CRC-32s too."""
        if not isinstance(data := self.data, dict):
            return []
        name, split = self.name, self.name.split(".")
        items: list[Item] = []
        if split[-1] == "parameters_grad" or (len(split) >= 2 and split[-2] == "parameters_grad"):
            _parse(data, name, "parameters_grad", True, crc, items)
        else:
            for io, suffix in _IO:
                if io in data:
                    if type(value := data[io]) is list and not crc:
                        _tensors(value, name + suffix, _STATE.get(io, io), items)
                    else:
                        _parse(value, name + suffix, _STATE.get(io, io), False, crc, items)
        if "parameters" in data:  # else already inputs, then outputs
            items.sort(key=lambda it: _REORDER.get(it.state, 0))  # stable: msprobe's reorder_index
        return items


def _gen_item(data: dict[str, Any], name: str, state: str, crc: bool) -> Item:
    dtype = data.get("dtype")
    if dtype and not crc:  # a tensor in statistics mode, as most leaves are: the rest's result, without its tests
        req = data.get("requires_grad")
        stats = [data.get("Max"), data.get("Min"), data.get("Mean"), data.get("Norm")]
        return Item(name, state, str(dtype), str(data.get("shape")), N_A if req is None else str(req), stats,
                    str(data.get("md5")))  # fmt: skip
    stats = [data.get(k) for k in ("Max", "Min", "Mean", "Norm")]
    shape, md5 = data.get("shape"), data.get("md5")
    if not dtype:
        kind, value = data.get("type"), data.get("value")
        if kind in _KINDS_OF_THEIR_OWN or name.endswith(_PEERS):
            dtype, shape, stats, md5 = _of_their_own(data, name, kind, value, md5)
        else:
            dtype, shape, stats = str(type(value)), "[]", [value] * 4
    if not md5 and crc:  # msprobe's CRC-32 of a value without md5: read in md5 mode only
        md5 = f"{zlib.crc32(str(data.get('value', '')).encode()):08x}"
    req = data.get("requires_grad")
    return Item(name, state, str(dtype), str(shape), N_A if req is None else str(req), stats, str(md5))


_KINDS_OF_THEIR_OWN = {"torch.Size", "slice", "ellipsis", "torch.ProcessGroup"}
_PEERS = (".src", ".dst", ".group_src", ".group_dst")  # a collective's peer: its value as text


def _of_their_own(data: dict[str, Any], name: str, kind: Any, value: Any, md5: Any) -> tuple[Any, Any, list[Any], Any]:
    """A value that is not a tensor, of a kind msprobe writes its own way: dtype, shape, statistics, md5."""
    if kind == "torch.Size":
        return kind, str(value), [data.get(k) for k in ("Max", "Min", "Mean", "Norm")], md5
    if kind == "slice":
        import numpy as np  # only for msprobe's rendering of a slice's shape

        return kind, str(np.shape(np.array(value))), [data.get(k) for k in ("Max", "Min", "Mean", "Norm")], md5
    if kind == "ellipsis":
        return kind, "[]", [value] * 4, md5
    if name.endswith(_PEERS):
        return kind, "[]", [str(value)] * 4, str(value)
    ranks = str(data.get("group_ranks"))  # torch.ProcessGroup
    return kind, "[]", [ranks] * 4, ranks


Leaf = tuple[str, str, str, str, Sequence[Any]]  # a row side's name, dtype, shape, requires_grad, statistics


def entry_leaves(name: str, data: Any) -> list[Leaf] | None:
    """:meth:`Entry.items` in statistics mode, as the rows of an entry the same on both sides need them (the
    compare's ``stats_compare._Pending``), for an entry as most are: a call whose inputs and outputs are lists and
    keyword dicts of tensors and plain values; None for the rest (parameters, gradients, nesting, a None, a kind of
    value msprobe writes its own way). A row side's object costs as much as the rest of its leaf."""
    if type(data) is not dict or "parameters" in data or "parameters_grad" in name:
        return None
    out: list[Leaf] = []
    for part, suffix in _IO:
        if part not in data:
            continue
        value = data[part]
        if type(value) is list:
            members: Any = enumerate(value)
        elif type(value) is dict and type(value.get("type")) is not str and "class_type" not in value:
            members = value.items()
        else:
            return None
        for key, sub in members:
            if type(sub) is not dict or type(kind := sub.get("type")) is not str or "class_type" in sub:
                return None
            req = sub.get("requires_grad")
            req = "True" if req is True else "False" if req is False else N_A if req is None else str(req)
            if dtype := sub.get("dtype"):
                stats = [sub.get("Max"), sub.get("Min"), sub.get("Mean"), sub.get("Norm")]
                out.append((f"{name}{suffix}.{key}", str(dtype), str(sub.get("shape")), req, stats))
            elif kind in _KINDS_OF_THEIR_OWN or (leaf := f"{name}{suffix}.{key}").endswith(_PEERS):
                return None
            else:
                out.append((leaf, str(type(v := sub.get("value"))), "[]", req, [v] * 4))
    return out


def _tensors(data: list[Any], name: str, state: str, out: list[Item]) -> None:
    """:func:`_parse` of a list in statistics mode, its tensors' sides made here (most leaves are tensors in lists:
    a call per leaf costs as much as the leaf); the rest by :func:`_parse`."""
    for i, sub in enumerate(data):
        if (type(sub) is dict and (dtype := sub.get("dtype")) and type(sub.get("type")) is str
                and "class_type" not in sub):  # fmt: skip
            try:  # a tensor's fields, as msprobe writes them in statistics mode: by one call
                shape, mx, mn, mean, norm, req = _TENSOR(sub)
            except KeyError:  # one missing: None, as _gen_item reads it
                shape, req = sub.get("shape"), sub.get("requires_grad")
                mx, mn, mean, norm = sub.get("Max"), sub.get("Min"), sub.get("Mean"), sub.get("Norm")
            req = "True" if req is True else "False" if req is False else N_A if req is None else str(req)
            md5 = "None" if (md5 := sub.get("md5")) is None else str(md5)
            out.append(Item(f"{name}.{i}", state, str(dtype), str(shape), req, [mx, mn, mean, norm], md5))
        else:
            _parse(sub, f"{name}.{i}", state, False, False, out, 1)


def _parse(data: Any, name: str, state: str, grad: bool, crc: bool, out: list[Item], depth: int = 0) -> None:
    """``op_item_parse``: the leaves of one input/output/parameters value, appended to ``out`` (a list, not a
    generator per level: this runs once per leaf of every entry)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"{name}: nested deeper than {MAX_DEPTH}")
    if data is None:
        out.append(Item(name, state, N_A, N_A, N_A, ["None"] * 4, N_A))
    elif not data:
        return
    elif isinstance(data, list):
        for i, sub in enumerate(data):
            if type(sub) is dict and type(sub.get("type")) is str and "class_type" not in sub:  # a tensor, mostly
                out.append(_gen_item(sub, name if grad else f"{name}.{i}", state, crc))
            else:
                _parse(sub, name if grad else f"{name}.{i}", state, grad, crc, out, depth + 1)
    elif isinstance(data, dict):
        if data.get("class_type") == "torch.distributed.P2POp":
            tensor = data.get("tensor")
            if isinstance(tensor, dict):
                out.append(_gen_item(tensor, name, state, crc))
            else:
                out.append(Item(name, state, N_A, N_A, N_A, ["None"] * 4, N_A))
        elif isinstance(data.get("type"), str):
            out.append(_gen_item(data, name, state, crc))
        else:
            for key, sub in data.items():
                _parse(sub, f"{name}.{key}", state, grad, crc, out, depth + 1)


def _split(name: str) -> tuple[str, str, str]:
    """``split_data_name_components``: (API without call number, call+direction, direction)."""
    parts = name.split(".")
    last, second = parts[-1], parts[-2] if len(parts) >= 2 else ""
    if "parameters_grad" in (last, second):
        return ".".join(parts[:-1]) if len(parts) > 1 else "", "parameters_grad", "parameters_grad"
    for direction in ("forward", "backward"):
        if direction in (last, second):
            return ".".join(parts[:-2]) if len(parts) > 2 else "", f"{second}.{last}", direction
    return "", "", ""


class DumpEntries:
    """One dump.json's entries, with msprobe's backward renumbering (the target's read by :meth:`DumpFile.runs`,
    the bench's by :meth:`DumpFile.following`)."""

    def __init__(self, dump: DumpFile) -> None:
        self.dump = dump
        self.backward: dict[str, int] = defaultdict(int)

    def entry(self, name: str, data: Any) -> Entry | None:
        if name.endswith(".forward"):  # API.N.forward, as most are: a key of its own (what the rest gives)
            head = name[:-8]
            if (dot := head.rfind(".")) > 0 and head[dot + 1 :] != "parameters_grad":
                return Entry(name, name, data)
        base, call, direction = _split(name)
        if not base:
            return None
        key = name
        if direction == "backward":
            order = self.backward[base]
            self.backward[base] += 1
            head, _, tail = call.rpartition(".")
            if head.isdigit() or tail.isdigit():
                key = f"{base}.{str(order) if head.isdigit() else head}.{str(order) if tail.isdigit() else tail}"
        return Entry(name, key, data)


_KEY_LINE = re.compile(rb'\n  ("(?:[^"\\\n]|\\.)*"): ')


def entry_keys(dump: DumpFile) -> set[str]:
    """The bench's name index: every entry's match key. In msprobe's layout (``json.dump(indent=1)``: the file
    opens ``{`` newline, one space, a key) an entry's name is on a line of its own, two spaces in, and JSON text
    holds no raw newline in a string: the names are read from those lines, without parsing the entries (a
    third of the compare's time when it parsed them); any other layout is parsed. A second pass over the file
    the bench's read holds open (``DumpFile.opened``), not a second open."""
    side = DumpEntries(DumpFile(dump.path, file=dump.file))
    with dump.opened() as f:
        indent_1 = f.read(4) == b'{\n "'
    if indent_1:
        names = (m.group(1) for chunk in _lines(dump) for m in _KEY_LINE.finditer(chunk))
        entries = (side.entry(json.loads(raw) if b"\\" in raw else raw[1:-1].decode(), None) for raw in names)
    else:
        entries = (side.entry(name, None) for batch in side.dump.batches() for name in batch)
    return {e.key for e in entries if e is not None}


def _lines(dump: DumpFile) -> Iterator[bytes]:
    """A dump.json's bytes in runs of whole lines, each run from a newline to before the next run's: a line's
    leading newline stays with it."""
    carry = b""
    with dump.opened() as f:
        while chunk := f.read(CHUNK):
            buf = carry + chunk
            cut = max(buf.rfind(b"\n"), 0)
            if cut:
                yield buf[:cut]
            carry = buf[cut:]
            if len(carry) > MAX_VALUE:
                raise ValueError(f"{dump.path}: a line longer than {MAX_VALUE >> 20} MB")
    if carry:
        yield carry


def is_md5(dump: DumpFile) -> bool:
    """Whether a dump's statistics carry md5 (msprobe's ``md5_find``: the summary_mode md5 or xor dumps): as the
    dump's one whole read found it (``DumpFile.summary``: the run's facts, ``harness.artifacts.dumpfacts``), else
    read here. A dump whose text holds no ``"md5"`` has no such key: found by a byte search, the entries parsed only
    otherwise."""
    if dump.summary is not None:
        return dump.summary.md5
    with dump.opened() as f:
        seam = b""
        while (chunk := f.read(CHUNK)) and b'"md5"' not in seam + chunk[:4] and b'"md5"' not in chunk:
            seam = chunk[-4:]
    if not chunk:
        return False
    parsed = DumpFile(dump.path, file=dump.file)
    return any(parsed.md5 for _ in parsed.batches())
