"""Provides the working_dir upload: which files go, picked as Ray 2.60's SDK picks them, and their zip.

Ray (`ray._private.runtime_env.packaging`: `_dir_travel`, `_get_excludes`, `get_excludes_from_ignore_files`)
matches `runtime_env.excludes` with pathspec's gitwildmatch patterns against each path relative to the
working_dir, and every directory's `.gitignore` (unless `RAY_RUNTIME_ENV_IGNORE_GITIGNORE=1`) and
`.rayignore` against the paths below that directory, relative to it; an excluded directory is not entered.
`upload_files` does the same, with three differences, each to send less:

- `.git` (a directory, or a worktree's `.git` file) is always left out, whatever `excludes` says;
- symlinks are never followed (Ray follows them: a link to `~/.ssh` would be uploaded);
- a directory is never matched against its own ignore file, as in git (in Ray, `.*` in the top
  `.gitignore` matches the working_dir itself and nothing at all is uploaded).

The pre-flight check and the zip both use `upload_files`, so the check shows the files and bytes the
upload will have. Nothing here knows about profiles or the dashboard.
"""

from __future__ import annotations

import io
import os
import stat
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pathspec import PathSpec

from cockpit.core.jobs.errors import UploadError

try:  # pathspec >= 0.12.2/1.0: the class the deprecated name "gitwildmatch" (what Ray uses) stands for.
    from pathspec.patterns.gitignore.spec import GitIgnoreSpecPattern as _Pattern
except ImportError:  # pragma: no cover - older pathspec, as an older Ray may pin
    from pathspec.patterns.gitwildmatch import GitWildMatchPattern as _Pattern

from cockpit.core.units import human_bytes

MAX_UPLOAD_BYTES = 100 * 2**20
"""The dashboard refuses packages over 100 MiB (`ray_constants.py`); counted here before compression."""
ALWAYS_EXCLUDED = ".git"
IGNORE_FILES = (".gitignore", ".rayignore")


@dataclass(frozen=True)
class UploadFiles:
    """What the upload of `root` holds: files (path, name in the zip) and empty directories, in zip order."""

    root: Path
    files: tuple[tuple[Path, str], ...]
    empty_dirs: tuple[str, ...]
    size: int
    """Bytes of all files, before compression (stops counting just past `limit`)."""
    limit: int
    over: bool
    """The files exceed the limit asked (the listing stopped there)."""


def excludes_spec(patterns: Iterable[str]) -> PathSpec[Any]:
    """gitwildmatch patterns, as Ray compiles `excludes` and ignore files.

    Raises:
        ValueError: a pattern pathspec cannot read (e.g. `!` alone); the message names it.
    """
    return PathSpec.from_lines(_Pattern, patterns)


@dataclass(frozen=True)
class _Ignore:
    base: str
    """The directory (relative to the root, "" for the root) whose paths the spec is matched against."""
    spec: PathSpec[Any]

    def match(self, relative: str) -> bool:
        if self.base:
            if not relative.startswith(self.base + "/"):
                return False
            relative = relative[len(self.base) + 1 :]
        return bool(self.spec.match_file(relative))


def _ignore_files(directory: Path, base: str, include_gitignore: bool) -> list[_Ignore]:
    found = []
    for name in IGNORE_FILES:
        if name == ".gitignore" and not include_gitignore:
            continue
        path = directory / name
        try:
            if not stat.S_ISREG(path.lstat().st_mode):
                continue
            lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UploadError(f"{path}: cannot read ({exc.strerror}).") from None
        try:
            found.append(_Ignore(base, excludes_spec(lines)))
        except ValueError as exc:
            raise UploadError(f"{path}: {exc}.") from None
    return found


def upload_files(root: Path, excludes: Sequence[str] = (), limit: int | None = None) -> UploadFiles:
    """The files (and empty directories) an upload of `root` holds, without `.git` and what `excludes`
    and the ignore files leave out; listing stops once the files pass `limit` bytes (default: what the
    dashboard accepts, `MAX_UPLOAD_BYTES`).

    Raises:
        UploadError: a bad pattern in `excludes` or an ignore file, an unreadable directory.
    """
    include_gitignore = os.environ.get("RAY_RUNTIME_ENV_IGNORE_GITIGNORE", "0") != "1"
    cap = MAX_UPLOAD_BYTES if limit is None else limit
    try:
        top = _Ignore("", excludes_spec([*excludes, ALWAYS_EXCLUDED]))
    except ValueError as exc:
        raise UploadError(f"runtime_env.excludes: {exc}.") from None
    files: list[tuple[Path, str]] = []
    empty: list[str] = []
    size = 0

    def visit(directory: Path, relative: str, ignores: list[_Ignore]) -> bool:
        """False once over the limit."""
        nonlocal size
        ignores = [*ignores, *_ignore_files(directory, relative, include_gitignore)]
        try:
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            raise UploadError(f"{directory}: cannot list ({exc.strerror}).") from None
        if not entries and relative:
            empty.append(relative)
        for entry in entries:
            name = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_symlink() or any(ignore.match(name) for ignore in ignores):
                continue
            if entry.is_dir(follow_symlinks=False):
                if not visit(Path(entry.path), name, ignores):
                    return False
            elif entry.is_file(follow_symlinks=False):
                size += entry.stat(follow_symlinks=False).st_size
                files.append((Path(entry.path), name))
                if size > cap:
                    return False
        return True

    within = visit(root, "", [top])
    return UploadFiles(root, tuple(files), tuple(empty), size, limit=cap, over=not within)


def zip_files(listing: UploadFiles) -> bytes:
    """The zip of exactly the files and empty directories listed (what Ray's SDK uploads).

    Raises:
        UploadError: the listing is over the limit, or a file cannot be read.
    """
    if listing.over:
        raise UploadError(
            f"{listing.root} is over {human_bytes(listing.limit)} to upload: the dashboard refuses it "
            "(leave files out with runtime_env.excludes, .gitignore or .rayignore)."
        )
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, strict_timestamps=False) as archive:
        for path, name in (*((listing.root / d, d) for d in listing.empty_dirs), *listing.files):
            try:
                archive.write(path, name)
            except OSError as exc:
                raise UploadError(f"{path}: cannot read ({exc.strerror}).") from None
    return buffer.getvalue()
