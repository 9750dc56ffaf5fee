"""Provides the pre-flight check of a `debug: post_mortem` profile: can the cluster's workers load debugpy?

Without `debugpy>=1.8` in the workers' Python, Ray only logs "Module 'debugpy>=1.8.0' cannot be loaded"
and the job fails as if post-mortem were off: the crash the user wanted to inspect is gone. The check
asks the cluster itself, as the job will run: a tiny job (same interpreter as the profile's entrypoint)
runs one task that imports debugpy in a worker, prints its version, and is deleted afterwards. It costs a
few seconds, once per submission of such a profile, and nothing for other profiles.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cockpit.core.cluster.answers import PROBE_PREFIX
from cockpit.core.errors import CockpitError
from cockpit.core.jobs.preflight import Check

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.jobs.profile_load import Profile

CHECK_NAME = "post-mortem debugger"
PROBE_CODE = (
    "import ray; ray.init(); "
    'f = ray.remote(num_cpus=0)(lambda: __import__("debugpy").__version__); '
    'print("COCKPIT_DEBUGPY", ray.get(f.remote()))'
)
FIX = (
    "install it in the cluster's Python (pip install 'debugpy>=1.8') or add `debugpy>=1.8` to the "
    "profile's runtime_env pip list; without it the job fails instead of pausing"
)
PYTHON_ENV_KEYS = ("pip", "uv", "conda", "py_executable", "image_uri", "container")
"""The runtime_env keys that decide which Python (and packages) the workers run."""
_VERSION = re.compile(r"COCKPIT_DEBUGPY (\d+)\.(\d+)\S*")
_PY = re.compile(r"(^|/)python[0-9.]*$")


def interpreter_of(entrypoint: str) -> str:
    """The Python the job's entrypoint starts (`/venv/bin/python -m x` → /venv/bin/python); `python`
    when it starts something else (`uv run ...`, a shell script)."""
    try:
        first = shlex.split(entrypoint)[0] if entrypoint.strip() else ""
    except ValueError:
        return "python"
    return first if _PY.search(first) else "python"


def _declares_debugpy(packages: Any) -> bool:
    """Whether a runtime_env pip/uv list installs a debugpy of 1.8 or later."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import InvalidVersion, Version

    if isinstance(packages, dict):
        packages = packages.get("packages", ())
    if not isinstance(packages, Iterable) or isinstance(packages, str):
        return False
    for item in packages:
        if not isinstance(item, str):
            continue
        try:
            requirement = Requirement(item.strip())
        except InvalidRequirement:
            continue
        if requirement.name.lower() != "debugpy":
            continue
        spec = requirement.specifier
        candidates = {Version(v) for v in ("1.8.0", "1.9.0", "2.0.0")}
        for clause in spec:
            with contextlib.suppress(InvalidVersion):
                candidates.add(Version(clause.version.replace("*", "0")))
        if any(v >= Version("1.8") and spec.contains(v, prereleases=True) for v in candidates):
            return True
    return False


def verdict(log: str) -> Check:
    """The check from the probe job's driver log."""
    match = _VERSION.search(log)
    if match:
        major, minor = int(match.group(1)), int(match.group(2))
        if (major, minor) >= (1, 8):
            return Check(CHECK_NAME, "ok", f"the workers' Python has debugpy {match.group(0).split()[1]}")
        return Check(
            CHECK_NAME, "fail", f"the workers' debugpy is {match.group(0).split()[1]}, older than 1.8: {FIX}"
        )
    if "No module named 'debugpy'" in log or "No module named debugpy" in log:
        return Check(CHECK_NAME, "fail", f"the workers' Python has no debugpy: {FIX}")
    last = next((line for line in reversed(log.splitlines()) if line.strip()), "no output")
    return Check(CHECK_NAME, "warn", f"not checked: the probe job did not say ({last.strip()[:160]})")


async def debugpy_check(
    client: DashboardClient, profile: Profile, entrypoint: str, timeout: float = 90.0
) -> Check | None:
    """None for a profile without `debug: post_mortem`; else whether its workers can load debugpy."""
    if not profile.post_mortem:
        return None
    env = profile.runtime_env or {}
    if _declares_debugpy(env.get("pip")) or _declares_debugpy(env.get("uv")):
        return Check(CHECK_NAME, "ok", "runtime_env installs debugpy")
    python = interpreter_of(entrypoint)
    job = f"{PROBE_PREFIX}{uuid.uuid4().hex[:8]}"
    request: dict[str, Any] = {
        "entrypoint": f"{shlex.quote(python)} -c {shlex.quote(PROBE_CODE)}",
        "submission_id": job,
        "entrypoint_num_cpus": 0,
        "metadata": {"cockpit": "debugpy probe (deleted when done)"},
    }
    # The Python the job's workers will run: the same interpreter-defining parts of its runtime_env
    # (its own pip or conda environment, interpreter, container). Building one takes a while the first
    # time (Ray caches it for the job that follows).
    python_env = {key: env[key] for key in PYTHON_ENV_KEYS if key in env}
    if python_env:
        request["runtime_env"] = python_env
        timeout = max(timeout, 600.0)
    try:
        await client.submit_job(request)
    except CockpitError as exc:
        return Check(CHECK_NAME, "warn", f"not checked: the probe job was refused ({exc})")
    try:
        row = None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            row = await client.job(job)
            if row.terminal:
                break
            await asyncio.sleep(1.0)
        if row is None or not row.terminal:
            await client.stop_job(job)
            return Check(
                CHECK_NAME, "warn", f"not checked: the probe job did not finish within {timeout:g} s"
            )
        log = (
            await client.log_file(node_id=row.driver_node_id, submission_id=job, lines=200)
            if row.driver_node_id
            else ""
        )
        return verdict(log + "\n" + row.message)
    except CockpitError as exc:
        return Check(CHECK_NAME, "warn", f"not checked: {exc}")
    finally:
        await _delete_when_done(client, job)


async def _delete_when_done(client: DashboardClient, job: str) -> None:
    """The probe leaves no job behind (the dashboard deletes only finished jobs: stop it first)."""
    for _ in range(20):
        with contextlib.suppress(CockpitError):
            if await client.delete_job(job):
                return
        with contextlib.suppress(CockpitError):
            await client.stop_job(job)
        await asyncio.sleep(0.5)
