"""The CUDA tier's device check, prepared for a machine that is lent with a GPU but no network (docs/cuda.md).

The lent machine has a CUDA PyTorch and transformers preinstalled, nothing else this project needs; each call to it
carries at most 64 MiB, and ray's wheel (verl's profiler module imports ray) is larger than that. So:

1. here, ``pack``: download (or build, for sdist-only packages) a wheel of every distribution the check imports
   that the machine lacks, for its Python, and cut them into bundles under ``.device-wheels/`` (git-ignored), each
   under the per-call limit; a wheel larger than a bundle is split into pieces with a SHA-256 manifest;
2. on the machine, one call per bundle, ``install BUNDLE`` (carry that bundle only): pieces wait in
   ``.device-env/`` (git-ignored, so it stays between calls on the warm machine) until all have come, then the
   wheels install there with ``pip --target`` (no index, no dependencies: the machine's torch stays);
3. on the machine, ``check`` (chained after the last ``install``): the GPU, then every tiny CUDA scenario's checks
   with the harness's pytest plugin, figures (overhead on and off, disk) and the first entries of a dump, into
   ``$OUT`` (what comes back).

Only the standard library here: the machine's Python runs this file before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHEELS = ROOT / ".device-wheels"
ENV = ROOT / ".device-env"
SITE = ENV / "site"
PIECES = ENV / "pieces"
BUNDLE_BYTES = 60 * 2**20  # under the 64 MiB a call carries, with room for the working tree itself
# what the lent machine has (the issue: a CUDA PyTorch and transformers) and what must never travel from here: this
# project's CPU torch, and CUDA libraries the machine's torch brings with its own build
ON_THE_MACHINE = ("torch", "nvidia-", "triton", "transformers", "tokenizers", "safetensors", "huggingface-hub")
# the modules the check imports; their distributions (and what those import at import time) are what travels
IMPORTS = (
    "harness.cli",
    "harness.pytest_plugin",
    "harness.training.workloads.cpu_ppo.train",
    "msprobe.pytorch",
    "pytest",
    "ray",
)


def imported_distributions(extra: list[str]) -> dict[str, str]:
    """{distribution: version} of everything importing ``IMPORTS`` loads, in this project's venv (asked of a fresh
    interpreter: this process has loaded nothing of them)."""
    code = (
        "import importlib, importlib.metadata as md, json, sys\n"
        f"for m in {IMPORTS!r}: importlib.import_module(m)\n"
        "tops = {n.split('.')[0] for n in sys.modules}\n"
        "dists = {d for t in tops for d in md.packages_distributions().get(t, [])}\n"
        "print(json.dumps({d: md.version(d) for d in dists}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=ROOT).stdout
    found: dict[str, str] = json.loads(out.strip().splitlines()[-1])
    from importlib import metadata

    found.update({d: metadata.version(d) for d in extra})
    found.pop("verl-msprobe-harness", None)  # the harness runs from the checkout that travels with every call
    return {d: v for d, v in sorted(found.items()) if not d.lower().replace("_", "-").startswith(ON_THE_MACHINE)}


def pack(args: argparse.Namespace) -> int:
    if WHEELS.exists() and any(WHEELS.iterdir()):
        print(f"{WHEELS} is not empty: remove it first (nothing is overwritten)", file=sys.stderr)
        return 2
    dists = imported_distributions(args.extra)
    have = {ln.split("==")[0].lower() for ln in Path(args.freeze).read_text().splitlines()} if args.freeze else set()
    wanted = {d: v for d, v in dists.items() if d.lower() not in have}
    dl = WHEELS / "all"
    dl.mkdir(parents=True)
    target = [
        "--python-version",
        args.python_version,
        "--platform",
        "manylinux2014_x86_64",
        "--platform",
        "manylinux_2_17_x86_64",
        "--platform",
        "manylinux_2_28_x86_64",
        "--platform",
        "any",
    ]
    print(f"{len(wanted)} distributions to pack: {', '.join(wanted)}", flush=True)
    pins = [f"{d}=={v}" for d, v in wanted.items()]
    download = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", *target, "-d", str(dl)]
    if subprocess.run([*download, *pins]).returncode != 0:  # one pip for all (~5 s each); else one by one
        for pin in pins:
            if subprocess.run([*download, pin], capture_output=True).returncode != 0:
                # sdist only (e.g. antlr4-python3-runtime): pure Python, built here
                subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dl), pin], check=True)
    for out in bundle(dl):
        mib = sum(p.stat().st_size for p in out.iterdir()) / 2**20
        print(f"{out.relative_to(ROOT)}: {len(list(out.iterdir()))} files, {mib:.1f} MiB")
    for leftover in dl.iterdir():
        leftover.unlink()
    dl.rmdir()
    print(f"{len(wanted)} distributions for Python {args.python_version}; carry one bundle per `install` call")
    return 0


def bundle(dl: Path) -> list[Path]:
    """The wheels in ``dl`` moved into ``WHEELS/bundle<N>``, each under ``BUNDLE_BYTES``: largest first, a wheel
    over it in pieces of their own (its last piece shares a bundle with smaller wheels)."""
    bundles: list[list[Path]] = [[]]
    for whl in sorted(dl.iterdir(), key=lambda p: -p.stat().st_size):
        if whl.stat().st_size > BUNDLE_BYTES:
            bundles += _split(whl)
            continue
        fits = [b for b in bundles if sum(p.stat().st_size for p in b) + whl.stat().st_size <= BUNDLE_BYTES]
        if not fits:
            bundles.append([])
            fits = bundles[-1:]
        fits[0].append(whl)  # first fit, largest first: the fewest calls
    dirs = []
    for i, files in enumerate([b for b in bundles if b], 1):
        out = WHEELS / f"bundle{i}"
        out.mkdir(parents=True)
        for f in files:
            f.rename(out / f.name)
        dirs.append(out)
    return dirs


def _split(whl: Path) -> list[list[Path]]:
    """A wheel over a bundle, cut into pieces of one bundle each, with a manifest naming them and its SHA-256."""
    data = whl.read_bytes()
    step = BUNDLE_BYTES - 512  # room for the manifest beside the last piece
    pieces = []
    for i in range(0, len(data), step):
        piece = whl.with_name(f"{whl.name}.part{i // step:02d}")
        piece.write_bytes(data[i : i + step])
        pieces.append([piece])
    manifest = whl.with_name(f"{whl.name}.manifest.json")
    manifest.write_text(
        json.dumps({"wheel": whl.name, "pieces": len(pieces), "sha256": hashlib.sha256(data).hexdigest()})
    )
    pieces[-1].append(manifest)
    whl.unlink()
    return pieces


def install(args: argparse.Namespace) -> int:
    bundle = Path(args.bundle)
    PIECES.mkdir(parents=True, exist_ok=True)
    wheels = [p for p in bundle.iterdir() if p.suffix == ".whl"]
    for p in bundle.iterdir():
        if ".whl.part" in p.name or p.name.endswith(".manifest.json"):
            (PIECES / p.name).write_bytes(p.read_bytes())
    for manifest in PIECES.glob("*.manifest.json"):
        m = json.loads(manifest.read_text())
        parts = [PIECES / f"{m['wheel']}.part{i:02d}" for i in range(m["pieces"])]
        if missing := [p.name for p in parts if not p.exists()]:
            print(f"{m['wheel']}: waiting for {', '.join(missing)} (a later bundle)")
            continue
        whl = PIECES / m["wheel"]
        whl.write_bytes(b"".join(p.read_bytes() for p in parts))
        if hashlib.sha256(whl.read_bytes()).hexdigest() != m["sha256"]:
            print(f"{m['wheel']}: reassembled wheel does not match its SHA-256", file=sys.stderr)
            return 2
        for p in parts:
            p.unlink()
        manifest.unlink()
        wheels.append(whl)
    if wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-index",
                "--no-deps",
                "--target",
                str(SITE),
                "--upgrade",
                *map(str, wheels),
            ],
            check=True,
        )
    print(f"installed {len(wheels)} wheels into {SITE.relative_to(ROOT)}")
    return 0


def check(args: argparse.Namespace) -> int:
    """Run on the machine: the GPU, the tiny CUDA scenarios' checks, their figures and a dump's first entries."""
    out = Path(os.environ.get("OUT") or args.out)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(SITE)]),
        "HARNESS_CACHE_DIR": str(ENV / "cache"),
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    py = [sys.executable]
    subprocess.run(["nvidia-smi", "-L"], check=False)
    probe = (
        "import torch, msprobe, verl, ray; "
        "print('torch', torch.__version__, torch.cuda.device_count(), 'GPU(s)', 'verl', verl.__version__)"
    )
    if subprocess.run([*py, "-c", probe], env=env, cwd=ROOT).returncode != 0:
        print("the stack does not import: a distribution is missing (pack --extra DIST)", file=sys.stderr)
        return 2
    scenarios = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "scenarios").glob(f"{args.select}.yaml"))
    subprocess.run([*py, "-m", "harness", "validate", *scenarios], env=env, cwd=ROOT, check=True)
    results = out / "results"
    status = subprocess.run(
        [
            *py,
            "-m",
            "pytest",
            "-p",
            "harness.pytest_plugin",
            *scenarios,
            "-rfEXs",
            "-p",
            "no:cacheprovider",
            f"--harness-results={results}",
            f"--junitxml={out / 'junit.xml'}",
        ],
        env=env,
        cwd=ROOT,
    ).returncode
    subprocess.run([*py, "-m", "harness", "report", str(results), "--out", str(out / "report")], env=env, cwd=ROOT)
    for dump in sorted(results.glob("*/on/dumps/step_*/*/step0/rank0/dump.json"))[:3]:
        data = json.loads(dump.read_text())["data"]
        print(f"{dump.relative_to(results)}: {len(data)} entries; first:")
        for key in list(data)[:3]:
            print(f"  {key}: {json.dumps(data[key])[:400]}")
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    q = sub.add_parser("pack", help="here: wheels for the machine, in bundles under .device-wheels/")
    q.add_argument("--python-version", required=True, help="the machine's Python, e.g. 3.11 (its first call prints it)")
    q.add_argument("--freeze", help="the machine's `pip freeze`: what it has does not travel")
    q.add_argument("--extra", action="append", default=[], help="one more distribution (repeatable)")
    q.set_defaults(func=pack)
    q = sub.add_parser("install", help="on the machine: install one bundle (pieces wait for the rest)")
    q.add_argument("bundle")
    q.set_defaults(func=install)
    q = sub.add_parser("check", help="on the machine: checks, figures and a dump's first entries into $OUT")
    q.add_argument("--select", default="tiny_cuda_*", help="scenario file glob under scenarios/")
    q.add_argument("--out", default="cuda-check", help="where results go when $OUT is not set")
    q.set_defaults(func=check)
    args = p.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
