"""Provides which profile file each job submitted from here came from, so that a profile given by path
(`cockpit submit TARGET ./runs/grpo.yaml`) still gives the job its `progress:`, `hang_after:` and
`metrics:` in the hang watch, the Metrics screen and `cockpit alerts`, which otherwise find a profile
only by the name in the job's metadata, on the search path.

The job's metadata is anyone's text (whoever can submit to the cluster writes it): it names a profile,
never a file to read. This record is the user's own: `submitted-profiles.json` in the cockpit's state
directory (`COCKPIT_STATE_DIR`, else the XDG state home), mode 0600, written by the cockpit that submitted
the job: submission id -> the profile file's absolute path, `MAX_KEPT` at most, the newest kept. A file
that cannot be read or written costs the lookup (the name on the search path is used), never a command.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from cockpit.core.jobs.profile_load import Profile, load
from cockpit.core.local.record import save_private_json, state_dir

FILE = "submitted-profiles.json"
MAX_KEPT = 500


def _path(directory: Path | None) -> Path:
    return (directory or state_dir()) / FILE


def _read(directory: Path | None) -> dict[str, str]:
    try:
        data = json.loads(_path(directory).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def remember_profile(submission_id: str, profile_file: Path, directory: Path | None = None) -> None:
    """Note that SUBMISSION_ID was submitted from PROFILE_FILE."""
    kept = _read(directory)
    kept.pop(submission_id, None)
    kept[submission_id] = str(profile_file.resolve())
    path = _path(directory)
    with contextlib.suppress(OSError):
        save_private_json(path, dict(list(kept.items())[-MAX_KEPT:]))


def profile_file(submission_id: str, directory: Path | None = None) -> Path | None:
    """The profile file SUBMISSION_ID was submitted from here, when noted and still a file."""
    noted = _read(directory).get(submission_id) if submission_id else None
    if noted is None:
        return None
    path = Path(noted)
    return path if path.is_file() else None


def noted_profile(submission_id: str, name: str) -> Profile | None:
    """The profile in the file SUBMISSION_ID was submitted from here, when one is noted and it still holds
    the profile NAME (the job's metadata names it); None otherwise.

    Raises:
        ProfileError, OSError: the noted file no longer loads.
    """
    path = profile_file(submission_id)
    if path is None:
        return None
    profile = load(path)
    return profile if profile.name == name else None
