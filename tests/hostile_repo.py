"""A hostile verl checkout, as a pull request could make one, on top of the test repository (tests/verl_repo.py).

Branches of a clone of that repository:
- ``outlink``: ``verl/host_secret`` links to a host file outside the checkout (its content must never be copied);
- ``inlink``: ``verl/alias_of_version`` links to a file inside the tree (copied as a link);
- ``hostile``: a build backend (setuptools' own, plus writes) and an import-time hook in ``verl/__init__.py`` that
  try to write into every sibling environment, every site-packages dir on sys.path outside their own environment
  (a ``.pth`` there runs in every later harness process) and the harness's checkout, and record what happened in
  ``witness`` (a world-writable dir: the only place the test can read their results back from) and on stderr.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from verl_repo import VerlRepo, git

ATTEMPT = '''\
def attempt(tag):
    """Write outside this environment; record, in the witness dir, what each write did."""
    import os
    import sys
    from pathlib import Path

    own = Path(sys.prefix)
    try:
        tries = [p / f"PWNED-{tag}" for p in sorted(own.parent.iterdir()) if p.is_dir() and p != own]
    except OSError:
        tries = []
    sites = [Path(p) for p in sys.path if p.endswith("site-packages") and own not in Path(p).parents]
    tries += [p / f"zz_pwned_{tag}.pth" for p in sites]
    tries.append(Path(HARNESS_ROOT) / f"PWNED-{tag}")
    lines = [f"uid {os.getuid()} prefix {own}"]
    for t in tries:
        try:
            t.write_text("import sys\\n")
            lines.append(f"{t}: WRITTEN")
        except OSError as exc:
            lines.append(f"{t}: {type(exc).__name__}")
    print("\\n".join(f"hostile {tag}: {ln}" for ln in lines), file=sys.stderr)  # in a training's log too
    try:
        (Path(WITNESS) / f"{tag}-{os.getpid()}.txt").write_text("\\n".join(lines) + "\\n")
    except OSError:  # a container without the witness dir: the log says it
        pass
'''
BACKEND = """\
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403

from hostile_writes import attempt


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    attempt("build")
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
"""


@dataclass(frozen=True)
class HostileRepo:
    path: Path  # a checkout: switch branches with git checkout
    secret: Path  # the host file outside it
    token: str  # the secret's content: must appear in no context and no environment
    witness: Path


def make_hostile_repo(base: VerlRepo, root: Path, witness: Path, harness_root: Path) -> HostileRepo:
    path = root / "hostile"
    subprocess.run(["git", "clone", "-q", str(base.path), str(path)], check=True)
    token = "host-secret-9f3c1e7a"
    secret = root / "host-secret.txt"
    secret.write_text(token + "\n")
    secret.chmod(0o600)

    git(path, "checkout", "-q", "-b", "outlink", "main")
    (path / "verl" / "host_secret").symlink_to(secret)
    git(path, "add", "verl/host_secret")
    git(path, "commit", "-q", "-m", "a link to a host file")

    git(path, "checkout", "-q", "-b", "inlink", "main")
    (path / "verl" / "alias_of_version").symlink_to("version/version")
    git(path, "add", "verl/alias_of_version")
    git(path, "commit", "-q", "-m", "a link inside the tree")

    git(path, "checkout", "-q", "-b", "hostile", "main")
    code = f"HARNESS_ROOT = {str(harness_root)!r}\nWITNESS = {str(witness)!r}\n\n\n" + ATTEMPT
    (path / "hostile_writes.py").write_text(code)
    (path / "hostile_backend.py").write_text(BACKEND)
    (path / "verl" / "_hostile.py").write_text(code)
    init = path / "verl" / "__init__.py"
    init.write_text(init.read_text() + '\nfrom verl._hostile import attempt as _attempt\n\n_attempt("import")\n')
    pyproject = path / "pyproject.toml"
    text = pyproject.read_text().replace(
        'build-backend = "setuptools.build_meta"', 'build-backend = "hostile_backend"\nbackend-path = ["."]'
    )
    pyproject.write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "a build backend and an import that write outside their environment")
    git(path, "checkout", "-q", "main")
    shutil.rmtree(path / "build", ignore_errors=True)
    return HostileRepo(path, secret, token, witness)
