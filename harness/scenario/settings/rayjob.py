"""The ``executor.rayjob`` block: a scenario's trainings submitted the way verl's Ascend multi-node nightly submits
its jobs (``.github/workflows/nightly_ascend_multinode.yml``): a payload POSTed to an in-cluster RayJob submitter
service, which makes a fresh KubeRay cluster for each job and tears it down afterwards
(``harness.training.executors.rayjob``).

The submitter's address is verl's own variable, ``SUBMITTER_URL`` (or this block's ``url``), the pods' image its
``IMAGE`` (or this block's ``image``); the shared cache is the one directory the runner's container and every pod of
the job's cluster see at the same path: each training's job script and bundle (the harness, the verl under test, the
wheels) and the results dir lie there, because a node's disk goes with its cluster."""

from __future__ import annotations

import re
from typing import Any, ClassVar, Literal

from pydantic import Field, PositiveInt, field_validator

from harness.outside import shown
from harness.scenario.settings.ray import ClusterRuntime, absolute_dir
from harness.strict import Strict

_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(?::\d{1,5})?/?$")


def check_url(value: str) -> str:
    """A submitter service's base address ``http(s)://HOST[:PORT]``; ValueError in one line otherwise."""
    if not _URL.match(value):
        raise ValueError(
            f"'{shown(value, 200)}' is not a RayJob submitter's address: "
            "http://rayjob-submitter.ci-system.svc.cluster.local or http(s)://HOST[:PORT]"
        )
    return value.rstrip("/")


class TemplatePatch(Strict):
    """One RFC 6902 operation on the RayJob's template, as verl's nightly sends them (its worker pods' cpu, memory,
    NPUs, the emptyDir's size)."""

    op: Literal["add", "replace", "remove"]
    path: str = Field(pattern=r"^/spec/", description="a JSON pointer into the RayJob, /spec/...")
    value: Any = None


class RayJobRuntime(ClusterRuntime):
    """A KubeRay cluster made for each training by verl's RayJob submitter service."""

    node_python: ClassVar[str | None] = "python3"  # verl's image's, in every pod (verl's nightly runs python3 there)

    url: str | None = Field(
        None,
        description="the submitter service, http://rayjob-submitter.ci-system.svc.cluster.local (SUBMITTER_URL, "
        "verl's own variable, wins over it)",
    )
    image: str = Field(
        "swr.cn-southwest-2.myhuaweicloud.com/modelfoundry/ascend-ci/verl/verl:latest-vllm-a3-ubuntu",
        description="the image of every pod of the job's cluster (verl's a3 image, as its multi-node nightly)",
    )
    worker_replicas: PositiveInt = Field(
        2, description="the RayJob's worker pods (verl's WORKER_REPLICAS): the nodes the training spans"
    )
    cache: str = Field(
        "/root/.cache/cicd_test",
        description="the shared cache: the runner's container and every pod see it at this path; the results dir "
        "must lie under it, and each training's job script and bundle (the harness, the verl under test, the "
        "wheels) lie in a directory of their own there, verl-msprobe-harness/<job>, removed as the training ends",
    )
    wheels_dir: str = Field(
        "/tmp/verl-msprobe-harness/wheels",
        description="on the harness's host, outside the shared cache: wheels every node installs --no-deps, "
        "offline, before the training (msprobe: verl's image lacks it), sent in the training's bundle; the "
        "workflow fills it",
    )
    template_patches: list[TemplatePatch] = Field(
        default_factory=list, description="RFC 6902 operations on the RayJob (verl's template_patches)"
    )
    watch_retries: int = Field(
        5, ge=0, le=100, description="a watch that drops is resumed this many times (verl: curl --retry 5)"
    )
    retry_delay_s: float = Field(10, ge=0, le=600, description="between two tries of the watch (verl: 10 s)")
    watch_read_s: float = Field(
        300, gt=0, le=3600, description="a watch silent this long is a dead connection: it is opened again, one of "
        "watch_retries (verl's curl has no such bound: a dead connection would run to the scenario's timeout)"
    )

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_url(value)

    @field_validator("cache", "wheels_dir")
    @classmethod
    def _dirs(cls, value: str) -> str:
        return absolute_dir(value)
