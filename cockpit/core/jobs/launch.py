"""Provides the one launch path from a profile to a running job: plan, then submit.

`plan` turns a profile, its extra overrides (parsed once by `parse_overrides`) and the nodes alive into
the pre-flight checklist and the exact JobSubmitRequest, secrets masked, for a person to read. `submit`
renders the same request with the real secrets, uploads a local working_dir once, and posts it under
the plan's submission id so that a retry never starts the job twice. `cockpit submit`, the TUI launcher
and `cockpit demo` all go this way, so every job carries its profile and overrides in its metadata.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardUnreachable, NotFound, RequestRejected
from cockpit.core.cluster.versions import version_fields
from cockpit.core.jobs.errors import LaunchBlocked, OverrideError
from cockpit.core.jobs.overrides import Override, parse_overrides
from cockpit.core.jobs.preflight import VERSION_CHECK, Check, preflight, upload_check, version_check
from cockpit.core.jobs.profiles import Profile, line_of_text, new_submission_id, render
from cockpit.core.jobs.submitted import remember_profile
from cockpit.core.jobs.working_dir import upload_files, zip_files
from cockpit.core.snapshots import NodeSnapshot

__all__ = [
    "LaunchBlocked",
    "LaunchPlan",
    "Override",
    "OverrideError",
    "parse_overrides",
    "plan",
    "submit",
    "submit_request",
    "upload_working_dir",
    "with_cluster_checks",
    "with_version_check",
    "zip_directory",
]


@dataclass(frozen=True)
class LaunchPlan:
    """What will be submitted and what the pre-flight found; nothing has been sent yet."""

    profile: Profile
    overrides: tuple[Override, ...]
    checks: tuple[Check, ...]
    request: dict[str, Any]
    """The exact JobSubmitRequest with secrets MASKED (for display and `--dry-run`)."""
    submission_id: str
    cluster_checked: bool
    """False when no nodes were given: the shape was not checked against a cluster."""

    @property
    def blocking(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if check.blocking)

    def where(self, check: Check) -> str:
        """`FILE:LINE` of the profile line a check is about (line 1 when it names no key there)."""
        return f"{self.profile.path}:{check.line or line_of_text(self.profile.path, check.key)}"


def plan(
    profile: Profile,
    overrides: Sequence[Override] = (),
    nodes: Sequence[NodeSnapshot] | None = None,
    *,
    at_submit: bool = True,
    submission_id: str | None = None,
    upload: Callable[[Profile], Check | None] = upload_check,
    ray_version: str = "",
) -> LaunchPlan:
    """The checklist and the masked request for `profile` with `overrides` on a cluster of `nodes`.

    With `at_submit`, a secret missing from this shell is a failed check; otherwise (a dry run) a warning.
    `upload`: the working_dir check (see `preflight.upload_check`). With `ray_version` (the cluster's),
    the request's fields are checked against it (else `with_cluster_checks` does it before submitting).

    Raises:
        ProfileError: the profile cannot be rendered (an unknown `${...}` variable).
    """
    split = tuple(overrides)
    chosen = submission_id or new_submission_id(profile.name)
    checks = tuple(preflight(profile, split, nodes, at_submit=at_submit, upload=upload))
    request = render(profile, split, mask=True, check_secrets=False, submission_id=chosen)
    version = version_check(request, ray_version) if ray_version else None
    if version is not None:
        checks = (*checks, version)
    return LaunchPlan(
        profile=profile,
        overrides=split,
        checks=checks,
        request=request,
        submission_id=chosen,
        cluster_checked=nodes is not None,
    )


async def with_version_check(client: DashboardClient, plan: LaunchPlan) -> LaunchPlan:
    """The plan with the check of its fields against the cluster's Ray version (`preflight.version_check`),
    asked (one GET) only when the request has a field that not every supported Ray accepts; a plan that
    has the check is kept."""
    from dataclasses import replace

    if any(c.name == VERSION_CHECK for c in plan.checks) or not version_fields(plan.request):
        return plan
    check = version_check(plan.request, (await client.version()).get("ray_version", ""))
    return plan if check is None else replace(plan, checks=(*plan.checks, check))


async def with_cluster_checks(client: DashboardClient, plan: LaunchPlan) -> LaunchPlan:
    """The plan with the checks that ask the cluster: the fields its Ray version accepts, and what needs
    the cluster to run something (a `debug: post_mortem` profile: can its workers load debugpy?). Run
    once, right before submitting; a plan that has them is kept."""
    from dataclasses import replace

    from cockpit.core.jobs.debugpy_probe import CHECK_NAME, debugpy_check

    plan = await with_version_check(client, plan)
    if any(c.name == CHECK_NAME for c in plan.checks):
        return plan
    check = await debugpy_check(client, plan.profile, str(plan.request.get("entrypoint", "")))
    return plan if check is None else replace(plan, checks=(*plan.checks, check))


async def submit(client: DashboardClient, plan: LaunchPlan, *, force: bool = False) -> str:
    """Submit a plan: real secrets, metadata `cockpit_profile` and `cockpit_overrides`, a local
    working_dir uploaded once, posted idempotently; the profile's file noted here for this job
    (`jobs.submitted`). Returns the submission id.

    Raises:
        LaunchBlocked: a check failed and `force` is not set (nothing is sent).
        ProfileError: a secret is not set in this shell.
    """
    plan = await with_cluster_checks(client, plan)
    if plan.blocking and not force:
        first = plan.blocking[0]
        raise LaunchBlocked(f"{plan.where(first)}: {first.name}: {first.detail}")
    request = render(plan.profile, plan.overrides, submission_id=plan.submission_id)
    submission_id = await submit_request(client, request)
    # For the hang watch, the curves and alerts: the file this job's profile came from (`jobs.submitted`).
    await asyncio.to_thread(remember_profile, submission_id, plan.profile.path)
    return submission_id


# -- the wire: upload and an idempotent POST ------------------------------------------------------


def zip_directory(path: Path, excludes: Sequence[str] = ()) -> bytes:
    """The directory as a zip (what Ray's SDK uploads): the files `working_dir.upload_files` lists, the
    same list the pre-flight check counts (`.git` always left out, `excludes`, `.gitignore`, `.rayignore`).

    Raises:
        UploadError: over 100 MiB, a bad pattern, an unreadable file.
    """
    return zip_files(upload_files(path, excludes))


async def upload_working_dir(client: DashboardClient, path: Path, excludes: Sequence[str] = ()) -> str:
    """Upload a local directory once (content-addressed) and return its `gcs://` URI."""
    data = await asyncio.to_thread(zip_directory, path, excludes)
    name = f"_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip"
    if not await client.package_exists(name):
        await client.upload_package(name, data)
    return f"gcs://{name}"


async def submit_request(client: DashboardClient, request: Mapping[str, Any], attempts: int = 3) -> str:
    """POST the job; after a network error, look the submission id up before posting again.

    A POST that reached the head but whose answer was lost must not start a second copy of a 64-GPU job:
    the id is unique per cluster, so finding it means the first POST worked. A local working_dir is
    uploaded first (once: the package is named by its content).
    """
    submission_id = str(request["submission_id"])
    body = dict(request)
    runtime_env = body.get("runtime_env")
    if isinstance(runtime_env, Mapping):
        working_dir = runtime_env.get("working_dir")
        if isinstance(working_dir, str) and "://" not in working_dir:
            excludes = runtime_env.get("excludes") or ()
            patterns = [str(e) for e in excludes] if isinstance(excludes, (list, tuple)) else []
            uri = await upload_working_dir(client, Path(working_dir), patterns)
            body["runtime_env"] = {**runtime_env, "working_dir": uri}
    for attempt in range(attempts):
        try:
            return await client.submit_job(body)
        except DashboardUnreachable:
            if attempt == attempts - 1:
                raise
        except RequestRejected as exc:
            if "already exists" not in exc.body:
                raise
            # Our own earlier POST got through: the job is there.
        try:
            await client.job(submission_id)
            return submission_id
        except NotFound:
            await asyncio.sleep(0.5 * (attempt + 1))
        except DashboardUnreachable:
            await asyncio.sleep(1.0 * (attempt + 1))
    return submission_id
