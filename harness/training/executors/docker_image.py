"""The CPU image CI uses, made without a registry: a bare rootfs that runs the host's own Python.

The image holds only the merged-/usr symlinks, /etc/passwd and /etc/group, and empty mount points; it is
labelled ``io.harness.image.kind=host-python``, so the docker executor bind-mounts /usr, the harness's
interpreter, venv and source read-only at the same paths and runs the same interpreter the local executor
runs. Nothing is copied: making it takes well under a second and any venv change is seen at once.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import tarfile

import docker.errors

from harness.errors import InfraError
from harness.training.executors.docker import connect
from harness.training.executors.docker_options import HOST_PYTHON, IMAGE_KIND_LABEL
from harness.training.executors.docker_spec import host_python

PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
TOP_LEVEL = ("bin", "lib", "lib32", "lib64", "libx32")


def rootfs_tar() -> bytes:
    """The bare root filesystem as an uncompressed tar (a few kB)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:

        def add(name: str, kind: bytes, mode: int, data: bytes = b"", link: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.linkname, info.size = kind, mode, link, len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for d, mode in (("usr", 0o755), ("etc", 0o755), ("tmp", 0o1777), ("root", 0o700), ("work", 0o755)):
            add(d, tarfile.DIRTYPE, mode)
        for d in ("proc", "sys", "dev", "sbin"):  # a real /sbin: docker mounts its init as /sbin/docker-init
            add(d, tarfile.DIRTYPE, 0o755)
        for d in TOP_LEVEL:
            if os.path.islink(f"/{d}"):  # merged /usr; real dirs are bind-mounted instead (host_python)
                add(d, tarfile.SYMTYPE, 0o777, link=os.readlink(f"/{d}"))
        passwd = ["root:x:0:0:root:/root:/bin/sh", "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin"]
        group = ["root:x:0:", "nogroup:x:65534:"]
        uid, gid = os.getuid(), os.getgid()
        if uid != 0:  # the container runs as the host user (files stay the user's): let it have a name
            name = pwd.getpwuid(uid).pw_name
            passwd.append(f"{name}:x:{uid}:{gid}::/tmp:/bin/sh")
            group.append(f"{name}:x:{gid}:")
        add("etc/passwd", tarfile.REGTYPE, 0o644, ("\n".join(passwd) + "\n").encode())
        add("etc/group", tarfile.REGTYPE, 0o644, ("\n".join(group) + "\n").encode())
    return buf.getvalue()


def build_cpu_image(tag: str) -> str:
    """Import the rootfs as ``tag``; return the image id. Raises InfraError when no daemon answers."""
    client = connect()
    try:
        previous = client.images.get(tag).id
    except docker.errors.ImageNotFound:
        previous = None
    repository, sep, version = tag.rpartition(":")
    if not sep or "/" in version:  # no tag, or the colon was a registry port
        repository, version = tag, "latest"
    out = client.api.import_image_from_data(
        rootfs_tar(),
        repository=repository,
        tag=version,
        changes=[f"ENV PATH={PATH}", "ENV LANG=C.UTF-8", f"LABEL {IMAGE_KIND_LABEL}={HOST_PYTHON}", "WORKDIR /tmp"],
    )
    for line in str(out).splitlines():
        msg = json.loads(line) if line.strip().startswith("{") else {}
        if "error" in msg:
            raise InfraError(f"docker import of the CPU image {tag!r} failed: {msg['error']}")
    image_id = str(client.images.get(tag).id)
    if previous and previous != image_id:
        with contextlib.suppress(docker.errors.APIError):  # still used by a container: leave it
            client.images.remove(previous)
    return image_id


def smoke_check(tag: str) -> str:
    """Import torch, msprobe, verl and the harness inside the image, the way the executor runs it."""
    client = connect()
    host = host_python()
    from docker.types import Mount

    code = "import torch, msprobe, verl, harness; print('torch', torch.__version__, 'verl', verl.__version__)"
    out = client.containers.run(
        tag,
        [host.executable, "-c", code],
        mounts=[Mount(target=p, source=p, type="bind", read_only=True) for p in host.paths],
        environment={"HOME": "/tmp"},
        user=f"{os.getuid()}:{os.getgid()}",
        network_mode="none",
        remove=True,
    )
    return out.decode().strip()
