"""Provides the pre-flight checklist shown before a job is submitted.

A job that dies at minute 20 because the cluster shape or an environment variable was wrong costs hours;
these checks catch it before submitting: the shape asked vs the nodes alive, the framework's own shape
overrides (verl, NeMo RL, RLinf), RLinf GPU placement ranges, secrets, the upload size. A failed check
blocks submit unless the user forces it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cockpit.core.cluster.versions import parse_version, version_fields
from cockpit.core.jobs.errors import UploadError
from cockpit.core.jobs.overrides import Override, parse_override
from cockpit.core.jobs.profiles import (
    Profile,
    ProfileError,
    override_values,
    render,
    secret_file_problem,
    secret_names,
    upload_excludes,
)
from cockpit.core.jobs.working_dir import upload_files
from cockpit.core.snapshots import NodeSnapshot
from cockpit.core.units import human_bytes

Status = Literal["ok", "fail", "warn", "info"]


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    key: str = ""
    """The profile key or override the check is about, to point at its line."""
    line: int = 0
    """The profile line it is about, when known exactly (else found from `key`)."""

    @property
    def blocking(self) -> bool:
        return self.status == "fail"


def _int(values: dict[str, str], key: str) -> int | None:
    try:
        return int(values[key])
    except (KeyError, ValueError):
        return None


def _fits(nodes: Sequence[NodeSnapshot], want_nodes: int, want_gpus: int) -> tuple[bool, str]:
    alive = [n for n in nodes if n.alive]
    big_enough = [n for n in alive if n.logical_gpus >= want_gpus]
    have = f"{len(alive)} alive node(s), {len(big_enough)} with ≥{want_gpus} GPUs"
    return len(big_enough) >= want_nodes, have


def _shape_check(
    name: str,
    want_nodes: int | None,
    want_gpus: int | None,
    nodes: Sequence[NodeSnapshot] | None,
    key: str = "",
) -> Check | None:
    if want_nodes is None and want_gpus is None:
        return None
    want_nodes = want_nodes or 1
    want_gpus = want_gpus or 0
    asked = f"{want_nodes} x {want_gpus} GPUs"
    if nodes is None:
        return Check(name, "info", f"asks {asked} (not checked against a cluster)", key)
    fits, have = _fits(nodes, want_nodes, want_gpus)
    return Check(name, "ok" if fits else "fail", f"asks {asked}; cluster has {have}", key)


_RANGE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+))?\s*$")


def _placement_dict(text: str) -> dict[str, str]:
    """Hydra's dict form `'{actor\\,rollout:all,inference:20-23}'` (a comma in a key is escaped)."""
    text = text.strip().strip("'\"").strip()
    if not (text.startswith("{") and text.endswith("}")):
        return {}
    out: dict[str, str] = {}
    for item in re.split(r"(?<!\\),", text[1:-1]):
        name, sep, spec = item.partition(":")
        if sep:
            out[name.strip().replace("\\,", ",")] = spec.strip()
    return out


def placement_check(values: dict[str, str], total_gpus: int | None) -> Check | None:
    """RLinf `cluster.component_placement.*`: inclusive ranges, no overlap, covering every GPU."""
    prefix = "cluster.component_placement."
    entries = {k[len(prefix) :]: v for k, v in values.items() if k.startswith(prefix)}
    entries.update(_placement_dict(values.get("cluster.component_placement", "")))
    if not entries:
        return None
    if total_gpus is None:
        return Check(
            "RLinf placement", "fail", "needs cluster.num_nodes and cluster.num_gpus_per_node overrides"
        )
    owner: dict[int, str] = {}
    problems: list[str] = []
    culprit = ""
    for component, spec in entries.items():
        spec = spec.strip().strip("'\"")
        if spec == "all":
            gpus = range(total_gpus)
        else:
            match = _RANGE.match(spec)
            if match is None:
                problems.append(f"{component}={spec} is not a range like 0-7 or `all`")
                culprit = culprit or component
                continue
            first, last = int(match[1]), int(match[2] or match[1])
            if last < first or last >= total_gpus:
                problems.append(f"{component}={spec} is outside 0-{total_gpus - 1}")
                culprit = culprit or component
                continue
            gpus = range(first, last + 1)
        for gpu in gpus:
            if gpu in owner and spec != "all":
                problems.append(f"{component} overlaps {owner[gpu]} at GPU {gpu}")
                culprit = culprit or component
                break
            owner.setdefault(gpu, component)
    missing = [g for g in range(total_gpus) if g not in owner]
    if missing and not problems:
        problems.append(
            f"GPUs {missing[0]}-{missing[-1]} are given to no component (ranges must sum to {total_gpus})"
        )
    if problems:
        return Check(
            "RLinf placement", "fail", "; ".join(problems), prefix + (culprit or next(iter(entries)))
        )
    return Check("RLinf placement", "ok", f"{len(entries)} component group(s) cover GPUs 0-{total_gpus - 1}")


SHAPE_OVERRIDES = {
    "verl": ("trainer.nnodes", "trainer.n_gpus_per_node"),
    "intuitor": ("trainer.nnodes", "trainer.n_gpus_per_node"),
    "nemo_rl": ("cluster.num_nodes", "cluster.gpus_per_node"),
    "rlinf": ("cluster.num_nodes", "cluster.num_gpus_per_node"),
}
"""The overrides in which each framework is told the shape `cluster:` (nodes, GPUs per node) declares."""


def shape_agreement(profile: Profile) -> Check | None:
    """The profile's own shape overrides against its `cluster:` shape (extra overrides are the user's
    choice at submit; the framework checks weigh them against the cluster). A profile that says 2 nodes
    in `cluster:` and `trainer.nnodes=4` in its overrides is checked against the wrong shape."""
    keys = SHAPE_OVERRIDES.get(profile.framework)
    if keys is None or not profile.shape_lines:
        return None
    values = override_values(profile)
    lines = {
        parse_override(text).key: line
        for text, line in zip(profile.overrides, profile.override_lines, strict=False)
    }
    compared = []
    for key, field in zip(keys, ("nodes", "gpus_per_node"), strict=True):
        told, declared = _int(values, key), getattr(profile.cluster, field)
        if field not in profile.shape_lines or told is None:
            continue
        if told != declared:
            detail = (
                f"{key}={told} (line {lines.get(key, 1)}) disagrees with cluster.{field}: {declared} "
                f"(line {profile.shape_lines[field]}); make them agree, e.g. {key}=${{cluster.{field}}}"
            )
            return Check("profile shape", "fail", detail, key, lines.get(key, 0))
        compared.append(key)
    if not compared:
        return None
    return Check("profile shape", "ok", f"{' and '.join(compared)} agree with cluster:")


def _framework_checks(
    profile: Profile, values: dict[str, str], nodes: Sequence[NodeSnapshot] | None
) -> list[Check]:
    checks: list[Check | None] = []
    if profile.framework in ("verl", "intuitor"):
        checks.append(
            _shape_check(
                "verl trainer.nnodes x n_gpus_per_node",
                _int(values, "trainer.nnodes"),
                _int(values, "trainer.n_gpus_per_node"),
                nodes,
                "trainer.nnodes",
            )
        )
    elif profile.framework == "nemo_rl":
        checks.append(
            _shape_check(
                "NeMo RL cluster.num_nodes x gpus_per_node",
                _int(values, "cluster.num_nodes"),
                _int(values, "cluster.gpus_per_node"),
                nodes,
                "cluster.num_nodes",
            )
        )
    elif profile.framework == "rlinf":
        num_nodes, per_node = _int(values, "cluster.num_nodes"), _int(values, "cluster.num_gpus_per_node")
        checks.append(
            _shape_check(
                "RLinf cluster.num_nodes x num_gpus_per_node", num_nodes, per_node, nodes, "cluster.num_nodes"
            )
        )
        total = num_nodes * per_node if num_nodes is not None and per_node is not None else None
        checks.append(placement_check(values, total))
    return [c for c in checks if c is not None]


def upload_check(profile: Profile) -> Check | None:
    """The files and bytes the upload will hold: the list the zip is made of (`upload_files`). It walks
    the working_dir: a caller that plans the same profile over and over (the launcher, on each key) keeps
    the answer instead of walking again."""
    if not profile.working_dir:
        return None
    path = Path(os.path.expanduser(profile.working_dir))
    if not path.is_dir():
        return Check(
            "working_dir", "info", f"{profile.working_dir} is used in place on the cluster's filesystem"
        )
    try:
        listing = upload_files(path.resolve(), upload_excludes(profile))
    except UploadError as exc:
        return Check("working_dir upload", "fail", str(exc), "excludes")
    if listing.over:
        return Check(
            "working_dir upload",
            "fail",
            f"{path}: over the dashboard's limit of {listing.limit} bytes ({human_bytes(listing.limit)}); "
            "leave files out with runtime_env.excludes, .gitignore or .rayignore",
            "working_dir",
        )
    count = len(listing.files)
    return Check(
        "working_dir upload",
        "ok",
        f"{path}: {count} files, {listing.size} bytes ({human_bytes(listing.size)}) to upload; "
        ".git left out, then excludes, .gitignore and .rayignore as Ray reads them",
    )


VERSION_CHECK = "Ray version"


def version_check(request: Mapping[str, Any], ray_version: str) -> Check | None:
    """The request's fields that not every supported Ray accepts, against the cluster's RAY_VERSION:
    a failed check naming each one this version refuses and the version that brings it; None when the
    request has no such field (or the version cannot be read: the connect warning says so)."""
    version = parse_version(ray_version)
    fields = version_fields(request)
    if version is None or not fields:
        return None
    refused = [(field, line) for field in fields if (line := field.refused_by(version))]
    if refused:
        key = refused[0][0].name.split(" ")[0].rsplit(".", 1)[-1]
        return Check(VERSION_CHECK, "fail", "; ".join(line for _, line in refused), key)
    names = ", ".join(field.name for field in fields)
    return Check(VERSION_CHECK, "ok", f"the cluster's Ray {ray_version} accepts {names}")


def _secret_file_checks(profile: Profile, at_submit: bool) -> list[Check]:
    """Each `secret_files` path must be an owner-only file of yours. A missing one only warns in
    `profiles check` (it may live on the cluster's filesystem, not here); one others can read fails."""
    if not profile.secret_files:
        return []
    for name, path in profile.secret_files.items():
        problem = secret_file_problem(path)
        if problem is not None:
            missing = not os.path.lexists(path)
            status: Status = "warn" if missing and not at_submit else "fail"
            return [Check("secret files", status, f"{name}: {problem}", name)]
    sent = ", ".join(f"{name}={path}" for name, path in profile.secret_files.items())
    return [Check("secret files", "ok", f"{sent} (owner-only; the job reads the file, its path is sent)")]


def preflight(
    profile: Profile,
    overrides: Iterable[Override] = (),
    nodes: Sequence[NodeSnapshot] | None = None,
    *,
    at_submit: bool = True,
    upload: Callable[[Profile], Check | None] = upload_check,
) -> list[Check]:
    """The checklist for submitting `profile` with extra `overrides` (already split) to a cluster with
    `nodes` (None: static checks only). The framework checks read the profile's overrides and then the
    extra ones, later winning.

    With `at_submit`, a secret missing from this shell fails; otherwise (`profiles check`) it only warns,
    since secrets are read when the job is submitted. `upload` gives the working_dir check
    (`upload_check`, or a caller's memo of it).
    """
    checks: list[Check] = []
    shape = _shape_check(
        "cluster shape", profile.cluster.nodes, profile.cluster.gpus_per_node, nodes, "cluster:"
    )
    if shape is not None:
        checks.append(shape)
    missing = [name for name in secret_names(profile) if name not in os.environ]
    if missing:
        status: Status = "fail" if at_submit else "warn"
        checks.append(
            Check("secrets", status, f"not set in this shell: {', '.join(missing)} (export them)", missing[0])
        )
    elif secret_names(profile):
        checks.append(Check("secrets", "ok", f"{', '.join(secret_names(profile))} set (shown masked here)"))
    checks.extend(_secret_file_checks(profile, at_submit))
    extra = tuple(overrides)
    try:
        render(profile, extra, mask=True, check_secrets=False)
        values = override_values(profile, extra)
    except ProfileError as exc:
        checks.append(Check("profile", "fail", str(exc)))
        return checks
    agreement = shape_agreement(profile)
    if agreement is not None:
        checks.append(agreement)
    checks.extend(_framework_checks(profile, values, nodes))
    upload_result = upload(profile)
    if upload_result is not None:
        checks.append(upload_result)
    checks.append(
        Check(
            "environment",
            "info",
            "the job runs with the environment `ray start` ran in (PATH, venv, modules) plus runtime_env",
        )
    )
    return checks
