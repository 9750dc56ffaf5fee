"""Provides job submission from a profile: the working_dir upload and a submit that never runs twice."""

from __future__ import annotations

import asyncio
import hashlib
import io
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cockpit.core.profiles import MAX_UPLOAD_BYTES, ProfileError
from cockpit.core.ray_api import DashboardClient, DashboardUnreachable, NotFound, RequestRejected


def zip_directory(path: Path, excludes: tuple[str, ...] = (".git",)) -> bytes:
    """The directory as a zip (what Ray's SDK uploads), without `excludes`, at most 100 MiB."""
    buffer = io.BytesIO()
    total = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if d not in excludes)
            for name in sorted(files):
                file = Path(root) / name
                if file.is_symlink() or name in excludes:
                    continue
                total += file.stat().st_size
                if total > MAX_UPLOAD_BYTES:
                    raise ProfileError(
                        f"{path} is over {MAX_UPLOAD_BYTES // 2**20} MiB: the dashboard refuses it."
                    )
                archive.write(file, file.relative_to(path).as_posix())
    return buffer.getvalue()


async def upload_working_dir(
    client: DashboardClient, path: Path, excludes: tuple[str, ...] = (".git",)
) -> str:
    """Upload a local directory once (content-addressed) and return its `gcs://` URI."""
    data = await asyncio.to_thread(zip_directory, path, excludes)
    name = f"_ray_pkg_{hashlib.sha1(data).hexdigest()[:16]}.zip"
    if not await client.package_exists(name):
        await client.upload_package(name, data)
    return f"gcs://{name}"


async def submit_request(client: DashboardClient, request: Mapping[str, Any], attempts: int = 3) -> str:
    """POST the job; after a network error, look the submission id up before posting again.

    A POST that reached the head but whose answer was lost must not start a second copy of a 64-GPU job:
    the id is unique per cluster, so finding it means the first POST worked.
    """
    submission_id = str(request["submission_id"])
    body = dict(request)
    runtime_env = body.get("runtime_env")
    if isinstance(runtime_env, Mapping):
        working_dir = runtime_env.get("working_dir")
        if isinstance(working_dir, str) and "://" not in working_dir:
            excludes = tuple(str(e) for e in runtime_env.get("excludes") or (".git",))
            uri = await upload_working_dir(client, Path(working_dir), excludes)
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
