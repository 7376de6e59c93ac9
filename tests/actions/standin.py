"""The stand-ins for the actions GitHub serves, as the workflow engine (tests/workflow_engine.py) runs them: each the
smallest that keeps the workflow's own logic real, so its inputs, outputs and failures are the action's.

    python3 standin.py checkout | setup-python | cache-restore | cache-save | upload-artifact | download-artifact

Inputs come as the runner gives them to an action (``INPUT_<NAME>``, upper case, dashes kept), outputs go to
``GITHUB_OUTPUT``. Where they reach:

- checkout: a clone of ``$ACT_REMOTES/<owner>/<name>.git`` (the test's stand-in for github.com), the ref fetched
  and checked out detached, the target emptied first as actions/checkout does; a repository that is not there
  fails as GitHub's "Repository not found". Where the clone is the harness (it has ``.ci/setup``) and
  ``ACT_STANDIN_VENV`` names one, ``.venv`` links the runner's warm environment (a hosted runner's pip cache, here
  already installed: the engine's tests do not reinstall torch on every run).
- setup-python: the host's ``pythonX.Y`` (``ACT_PYTHONS``: version=executable, as the engine found them), first on
  PATH; ``python-path`` its executable.
- cache-restore / cache-save: act's own cache server (``ACTIONS_CACHE_URL``), its protocol as actions/cache speaks it.
- upload-artifact / download-artifact: act's own artifact server (``ACTIONS_RUNTIME_URL``), its v3 protocol: one
  folder a run, so a ``run-id`` names another run's artifacts as GitHub's API does.

Standard library only: it runs on the runner's own python3, before anything is installed."""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path


def inp(name: str, default: str = "") -> str:
    return os.environ.get(f"INPUT_{name.upper()}", default).strip() or default


def output(**values: str) -> None:
    with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as f:
        f.writelines(f"{k}={v}\n" for k, v in values.items())


def fail(message: str) -> None:
    print(f"::error::{message}", flush=True)
    sys.exit(1)


def workspace() -> Path:
    return Path(os.environ["GITHUB_WORKSPACE"])


def git(*args: str, cwd: Path | None = None) -> str:
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode:
        said = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.returncode
        fail(f"git {' '.join(args)}: {said}")
    return proc.stdout.strip()


def checkout() -> None:
    repository = inp("repository", os.environ["GITHUB_REPOSITORY"])
    source = Path(os.environ["ACT_REMOTES"]) / f"{repository}.git"
    if not source.is_dir():
        fail(f"Repository not found: {repository} (the test's remotes hold no {source.name})")
    own = repository == os.environ["GITHUB_REPOSITORY"]
    ref = inp("ref") or (os.environ.get("GITHUB_SHA", "") if own else "")
    target = (workspace() / inp("path", ".")).resolve()
    target.mkdir(parents=True, exist_ok=True)
    for child in target.iterdir():  # actions/checkout empties the directory it clones into
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child)
        else:
            child.unlink()
    depth = inp("fetch-depth", "1")
    git("init", "-q", str(target))
    fetch = ["-C", str(target), "fetch", "-q", "--no-tags", *(["--depth", depth] if depth != "0" else []), str(source)]
    git(*fetch, ref or "HEAD")
    git("-C", str(target), "checkout", "-q", "--detach", "FETCH_HEAD")
    if depth == "0":  # every branch and tag, as fetch-depth: 0 does
        git("-C", str(target), "fetch", "-q", "--tags", str(source), "+refs/heads/*:refs/remotes/origin/*")
    if inp("persist-credentials", "true") == "true":
        git("-C", str(target), "config", "http.https://github.com/.extraheader", "AUTHORIZATION: basic ***")
    venv = os.environ.get("ACT_STANDIN_VENV")
    if venv and (target / ".ci" / "setup").is_file():
        (target / ".venv").symlink_to(venv)
    print(f"checkout: {repository}@{ref or 'HEAD'} -> {git('-C', str(target), 'rev-parse', 'HEAD')} in {target}")


def setup_python() -> None:
    version = inp("python-version")
    known = dict(p.split("=", 1) for p in os.environ.get("ACT_PYTHONS", "").split(os.pathsep) if "=" in p)
    exe = known.get(version)
    if not exe:
        fail(f"The version '{version}' with architecture 'x64' was not found for this operating system.")
    shim = Path(os.environ["RUNNER_TEMP"]) / f"python{version}" / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    for name in ("python", "python3", f"python{version}"):
        link = shim / name
        if not link.exists():
            link.symlink_to(exe)
    with open(os.environ["GITHUB_PATH"], "a", encoding="utf-8") as f:
        f.write(f"{shim}\n")
    output(**{"python-path": exe, "python-version": version})


def _cache_call(method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[
        int, bytes]:  # fmt: skip
    url = os.environ["ACTIONS_CACHE_URL"].rstrip("/") + "/_apis/artifactcache/" + path
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def _cache_paths() -> list[Path]:
    return [Path(os.path.expanduser(p.strip())) for p in inp("path").splitlines() if p.strip()]


def _version(paths: list[Path]) -> str:
    return hashlib.sha256("|".join([*map(str, paths), "gzip"]).encode()).hexdigest()


def cache_restore() -> None:
    paths, key = _cache_paths(), inp("key")
    keys = ",".join([key, *[k.strip() for k in inp("restore-keys").splitlines() if k.strip()]])
    status, body = _cache_call("GET", f"cache?keys={urllib.request.quote(keys)}&version={_version(paths)}")
    output(**{"cache-primary-key": key})
    if status == 204:
        print(f"Cache not found for input keys: {keys}")
        output(**{"cache-hit": "false"})
        return
    if status != 200:
        print(f"::warning::Failed to restore: cache service answered {status}")
        return
    found = json.loads(body)
    with urllib.request.urlopen(found["archiveLocation"], timeout=120) as answer:
        data = answer.read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall("/", filter="tar")
    print(f"Cache restored from key: {found['cacheKey']}")
    output(**{"cache-hit": str(found["cacheKey"] == key.lower()).lower(), "cache-matched-key": found["cacheKey"]})


def cache_save() -> None:
    paths, key = _cache_paths(), inp("key")
    if not key:
        fail("Input required and not supplied: key")
    existing = [p for p in paths if p.exists()]
    if not existing:
        print("::warning::Path Validation Error: Path(s) specified in the action for caching do(es) not exist, hence "
              "no cache is being saved.")  # fmt: skip
        return
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for p in existing:
            tar.add(str(p), arcname=str(p).lstrip("/"))
    data = buf.getvalue()
    status, body = _cache_call("POST", "caches", json.dumps({"key": key, "version": _version(paths),
                                                              "cacheSize": len(data)}).encode(),
                               {"Content-Type": "application/json"})  # fmt: skip
    if status != 200:
        print(f"::warning::Failed to save: Unable to reserve cache with key {key}: {status} {body[:200]!r}")
        return
    cache_id = json.loads(body)["cacheId"]
    _cache_call("PATCH", f"caches/{cache_id}", data, {"Content-Range": f"bytes 0-{len(data) - 1}/*",
                                                      "Content-Type": "application/octet-stream"})  # fmt: skip
    _cache_call("POST", f"caches/{cache_id}", json.dumps({"size": len(data)}).encode(),
                {"Content-Type": "application/json"})
    print(f"Cache saved with key: {key}")


def _artifacts_url(run_id: str) -> str:
    return os.environ["ACTIONS_RUNTIME_URL"].rstrip("/") + f"/_apis/pipelines/workflows/{run_id}/artifacts"


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=60) as answer:
        return json.loads(answer.read() or b"{}")


def upload_artifact() -> None:
    name = inp("name", "artifact")
    patterns = [p.strip() for p in inp("path").splitlines() if p.strip()]
    files: list[Path] = []
    roots: list[Path] = []
    for pattern in patterns:
        for hit in sorted(glob.glob(str(workspace() / pattern), recursive=True)):
            p = Path(hit)
            roots.append(p if p.is_dir() else p.parent)
            files += [f for f in sorted(p.rglob("*")) if f.is_file()] if p.is_dir() else [p]
    if not files:
        level = inp("if-no-files-found", "warn")
        line = f"No files were found with the provided path: {' '.join(patterns)}. No artifacts will be uploaded."
        if level == "error":
            fail(line)
        print(f"::{'warning' if level == 'warn' else 'notice'}::{line}")
        return
    root = Path(os.path.commonpath([str(r) for r in roots]))
    run_id = os.environ["GITHUB_RUN_ID"]
    listed = _get_json(_artifacts_url(run_id)) if (Path(os.environ["ACT_ARTIFACTS"]) / run_id).is_dir() else {}
    if any(a["name"] == name for a in listed.get("value") or []):
        fail("Failed to CreateArtifact: Received non-retryable error: Failed request: (409) Conflict: an artifact "
             "with this name already exists on the workflow run")  # fmt: skip
    req = urllib.request.Request(_artifacts_url(run_id), data=b"{}", method="POST",
                                 headers={"Content-Type": "application/json"})  # fmt: skip
    with urllib.request.urlopen(req, timeout=60) as answer:
        container = json.loads(answer.read())["fileContainerResourceUrl"]
    for f in files:
        item = urllib.request.quote(f"{name}/{f.relative_to(root).as_posix()}")
        data = f.read_bytes()
        put = urllib.request.Request(f"{container}?itemPath={item}", data=data, method="PUT",
                                     headers={"Content-Range": f"bytes 0-{max(len(data) - 1, 0)}/{len(data)}"})
        urllib.request.urlopen(put, timeout=60).read()
    print(f"Artifact {name} has been successfully uploaded! ({len(files)} files)")
    output(**{"artifact-id": name})


def download_artifact() -> None:
    name, pattern = inp("name"), inp("pattern")
    run_id = inp("run-id", os.environ["GITHUB_RUN_ID"])
    target = workspace() / inp("path", ".")
    folder = Path(os.environ["ACT_ARTIFACTS"]) / run_id
    listed = [a["name"] for a in (_get_json(_artifacts_url(run_id)).get("value") or [])] if folder.is_dir() else []
    if name:
        if name not in listed:
            fail(f"Unable to download artifact(s): Artifact not found for name: {name}")
        chosen, single = [name], True
    else:
        chosen, single = [n for n in listed if not pattern or fnmatch.fnmatch(n, pattern)], False
        if not chosen:
            print(f"No artifacts found matching pattern '{pattern}'" if pattern else "No artifacts found")
    for art in chosen:
        into = target if single or inp("merge-multiple", "false") == "true" else target / art
        items = _get_json(os.environ["ACTIONS_RUNTIME_URL"].rstrip("/") + f"/download/{run_id}?itemPath={art}")
        for item in items.get("value") or []:
            rel = Path(item["path"]).relative_to(art)
            dest = into / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(item["contentLocation"], timeout=60) as answer:
                dest.write_bytes(answer.read())
        print(f"Artifact {art} downloaded to {into}")
    output(**{"download-path": str(target)})


if __name__ == "__main__":
    {"checkout": checkout, "setup-python": setup_python, "cache-restore": cache_restore, "cache-save": cache_save,
     "upload-artifact": upload_artifact, "download-artifact": download_artifact}[sys.argv[1]]()  # fmt: skip
