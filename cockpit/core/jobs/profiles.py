"""Provides job profiles: found by name, and rendered into a job submission.

A profile (`profile_load.load`: the file validated) names an entrypoint, Hydra-style overrides kept
exactly as written, a runtime_env, the cluster shape it expects and its metadata. Values may use
`${python}` (the interpreter running the cockpit) and `${cluster.nodes}` / `${cluster.gpus_per_node}`. A
secret is `${env:NAME}`, read from the submitter's shell at submit time, and only in a
`runtime_env.env_vars` value (anywhere else `load` refuses it: the entrypoint, overrides and metadata are
shown to everyone in the job list); it is shown masked everywhere. Safer still, `secret_files:` sends the
path of an owner-only file, never its content. Extra overrides (typed, or read back from a job's metadata
on resubmit) are never resolved. Errors name the file, the line and the key.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import stat
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from cockpit.core.config.settings import config_dir
from cockpit.core.config.shipped import profiles_dir
from cockpit.core.config.yaml_file import unsafe_reason
from cockpit.core.jobs.overrides import (
    SECRET_HOME,
    VARIABLE,
    Override,
    is_secret,
    parse_overrides,
    secret_reference,
    variable_key,
    variables,
)
from cockpit.core.jobs.profile_load import ClusterShape
from cockpit.core.jobs.profile_load import Profile as Profile
from cockpit.core.jobs.profile_load import ProfileError as ProfileError
from cockpit.core.jobs.profile_load import load as load
from cockpit.core.jobs.working_dir import ALWAYS_EXCLUDED
from cockpit.core.text import MASK


def search_path(warn: Callable[[str], None] | None = None, dirs: Sequence[Path] = ()) -> list[Path]:
    """Where profiles are found: ./profiles, the user's config dir, DIRS (the config's `profile_dirs`, which
    the caller passes), then the ones shipped with the cockpit.

    `./profiles` and the config dir are skipped (with one line to `warn`) when another user owns them or
    group or others may write them: they would decide what a profile name launches. The shipped ones
    belong to the installation.
    """
    shipped = profiles_dir()
    seen: list[Path] = []
    for path in (Path.cwd() / "profiles", config_dir() / "profiles", *dirs, shipped):
        if not path.is_dir() or path.resolve() in [p.resolve() for p in seen]:
            continue
        reason = None if path.resolve() == shipped else unsafe_reason(path)
        if reason is not None:
            if warn is not None:
                warn(f"skipped {path}: {reason}")
            continue
        seen.append(path)
    return seen


def _candidates(
    warn: Callable[[str], None] | None = None, dirs: Sequence[Path] = ()
) -> list[tuple[str, Path, Profile | ProfileError]]:
    """Every profile file on the search path, loaded, under the name it claims; first claim wins.

    The one precedence rule: `search_path()` order, then file name order in a directory. A file that
    fails to load claims its file name (what `name:` defaults to), so a broken `./profiles/demo.yaml`
    reports its error instead of silently handing over to the shipped `demo`. A file another user can
    write (outside the shipped directory) is skipped, with one line to `warn`.
    """
    shipped = profiles_dir()
    claimed: dict[str, tuple[Path, Profile | ProfileError]] = {}
    for directory in search_path(warn, dirs):
        for path in sorted(directory.glob("*.y*ml")):
            reason = None if directory.resolve() == shipped else unsafe_reason(path)
            if reason is not None:
                if warn is not None:
                    warn(f"skipped {path}: {reason}")
                continue
            loaded: Profile | ProfileError
            try:
                loaded = load(path)
            except ProfileError as exc:
                loaded = exc
            name = loaded.name if isinstance(loaded, Profile) else path.stem
            claimed.setdefault(name, (path, loaded))
    return [(name, path, loaded) for name, (path, loaded) in claimed.items()]


def discover(
    warn: Callable[[str], None] | None = None, dirs: Sequence[Path] = ()
) -> tuple[list[Profile], list[str]]:
    """The profiles a name reaches (one per name, by `search_path()` precedence, DIRS the config's
    `profile_dirs`), and one line per file that failed to load; each file or directory skipped as unsafe
    is one line to `warn`."""
    found: list[Profile] = []
    problems: list[str] = []
    for _name, _path, loaded in _candidates(warn, dirs):
        if isinstance(loaded, Profile):
            found.append(loaded)
        else:
            problems.append(str(loaded))
    return found, problems


def find(name_or_path: str, warn: Callable[[str], None] | None = None, dirs: Sequence[Path] = ()) -> Path:
    """The file of a profile given by name (`demo`, as `discover` sees it with DIRS, the config's
    `profile_dirs`) or path (`./my.yaml`, taken as given: you named it). Files skipped by name are one line
    each to `warn`.

    Raises:
        ProfileError: no such file or name; or the file that claims the name does not load.
    """
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if candidate.is_file():
            return candidate
        raise ProfileError(f"{name_or_path}: no such profile file.")
    candidates = _candidates(warn, dirs)
    for name, path, loaded in candidates:
        if name == name_or_path:
            if isinstance(loaded, ProfileError):
                raise loaded
            return path
    names = ", ".join(sorted(name for name, _path, _loaded in candidates)) or "none"
    raise ProfileError(f"no profile named {name_or_path!r} (known: {names}).")


def _resolve(
    text: str, shape: ClusterShape, found: dict[str, str], mask: bool, strict: bool, secret_ok: bool = False
) -> str:
    """`text` with its `${...}` variables replaced. Only with `secret_ok` (a `runtime_env.env_vars` value)
    is `${env:NAME}` read from this shell; anywhere else it raises (`load` refuses such a profile, so that
    is a caller's bug, never a secret sent in clear)."""

    def replace(match: re.Match[str]) -> str:
        key = variable_key(match)
        if key == "python":
            return sys.executable
        if key == "cluster.nodes":
            return str(shape.nodes)
        if key == "cluster.gpus_per_node":
            return str(shape.gpus_per_node)
        if is_secret(key):
            if not secret_ok:
                raise ProfileError(f"${{{key}}}: secrets are read only in {SECRET_HOME} values.")
            name = key[4:]
            value = os.environ.get(name)
            if value is None:
                if strict:
                    raise ProfileError(
                        f"${{env:{name}}} is not set in this shell: export {name} before submitting."
                    )
                return MASK
            found[name] = value
            return MASK if mask else value
        raise ProfileError(
            f"unknown variable ${{{key}}} (use python, cluster.nodes, cluster.gpus_per_node, env:NAME)."
        )

    return VARIABLE.sub(replace, text)


def upload_excludes(profile: Profile) -> list[str]:
    """The profile's `runtime_env.excludes` patterns (`.git` is left out of an upload whatever they say)."""
    return [str(e) for e in profile.runtime_env.get("excludes") or () if str(e) != ALWAYS_EXCLUDED]


def secret_names(profile: Profile) -> list[str]:
    """Names of the `${env:NAME}` secrets a profile uses (in its env_vars values), in order."""
    names: list[str] = []
    for value in (profile.runtime_env.get("env_vars") or {}).values():
        for key in variables(str(value)):
            if is_secret(key) and key[4:] not in names:
                names.append(key[4:])
    return names


def secret_file_problem(path: str) -> str | None:
    """Why a `secret_files` path must not be sent (None: a regular file only its owner, you, can read).

    The job reads it on the cluster's shared filesystem; a file others can read there is no secret.
    """
    try:
        info = os.stat(path)
    except ValueError:  # a NUL in the path; `load` refuses those
        return f"{path}: not a path"
    except FileNotFoundError:
        return f"{path}: no such file (it must be on the shared filesystem the job sees)"
    except OSError as exc:
        return f"{path}: cannot check it ({exc.strerror})"
    if not stat.S_ISREG(info.st_mode):
        return f"{path}: not a regular file"
    if info.st_uid != os.geteuid():
        return f"{path}: owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o077:
        mode = oct(stat.S_IMODE(info.st_mode))[2:]
        return f"{path}: mode {mode} lets others read it (chmod 600 {shlex.quote(path)})"
    return None


def with_shape(profile: Profile, nodes: int | None, gpus_per_node: int | None) -> Profile:
    """PROFILE run on another shape than its `cluster:` (`submit --nodes N --gpus-per-node G`, an
    allocation's shape): `${cluster.nodes}` and `${cluster.gpus_per_node}` follow, and the pre-flight
    holds the cluster to it."""
    from dataclasses import replace

    if nodes is None and gpus_per_node is None:
        return profile
    shape = ClusterShape(
        nodes=profile.cluster.nodes if nodes is None else nodes,
        gpus_per_node=profile.cluster.gpus_per_node if gpus_per_node is None else gpus_per_node,
    )
    return replace(profile, cluster=shape)


def new_submission_id(profile_name: str) -> str:
    """`<profile>-<yyyymmdd-hhmmss>-<suffix>`: readable, sortable, and unique even within a second."""
    return f"{profile_name}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def override_values(profile: Profile, overrides: Iterable[Override] = ()) -> dict[str, str]:
    """Key -> value of the profile's overrides (variables resolved) then `overrides` (as typed, never
    resolved), later ones winning: what the pre-flight checks read; nothing is parsed back out of an
    entrypoint."""
    found: dict[str, str] = {}
    values: dict[str, str] = {}
    for item in parse_overrides(profile.overrides):
        values[item.key] = _resolve(item.value, profile.cluster, found, mask=True, strict=False)
    for item in overrides:
        values[item.key] = item.value
    return values


def render(
    profile: Profile,
    overrides: Iterable[Override] = (),
    *,
    mask: bool = False,
    submission_id: str | None = None,
    check_secrets: bool = True,
) -> dict[str, Any]:
    """The JobSubmitRequest for this profile with extra `overrides` (split by `overrides.parse_overrides`).

    Profile overrides are appended to the entrypoint byte for byte as written (the job runs it through a
    shell, as the launch guides do), variables resolved; extra overrides are appended as typed, never
    resolved, shell-quoted when needed, and recorded in the metadata (`cockpit_overrides`, a JSON list) so
    a resubmit keeps them. `${env:NAME}` is read only in `runtime_env.env_vars` values; `secret_files`
    become env vars holding their paths, each checked to be an owner-only file.
    A `working_dir` that exists here is uploaded at submit (see `launch.submit`); any other path is
    taken to be on the cluster's shared filesystem and the entrypoint runs there (`cd DIR && ...`).
    With `mask`, secrets appear as MASK (for display); without `check_secrets`, unset ones do too and
    secret files are not checked.

    Raises:
        ProfileError: an unknown variable; with `check_secrets`, an unset secret or a secret file that
            is missing or readable by others; a `${env:...}` in an extra override (never resolved).
    """
    extra = tuple(overrides)
    for item in extra:
        reference = secret_reference(item.text)
        if reference is not None:
            raise ProfileError(f"{item.text!r}: {reference} in an extra override is never resolved.")
    found: dict[str, str] = {}
    shape = profile.cluster

    def res(value: Any, secret_ok: bool = False) -> Any:
        if isinstance(value, str):
            return _resolve(value, shape, found, mask, check_secrets, secret_ok)
        if isinstance(value, Mapping):
            return {str(k): res(v) for k, v in value.items()}
        if isinstance(value, list):
            return [res(v) for v in value]
        return value

    parts = [res(profile.entrypoint), *(res(o) for o in profile.overrides)]
    parts += [shlex.quote(o.text) for o in extra]
    runtime_env = res({k: v for k, v in profile.runtime_env.items() if k != "env_vars"})
    env_vars = {
        str(k): res(str(v), secret_ok=True) for k, v in (profile.runtime_env.get("env_vars") or {}).items()
    }
    for name, path in profile.secret_files.items():
        problem = secret_file_problem(path) if check_secrets else None
        if problem is not None:
            raise ProfileError(f"{profile.path}: secret_files.{name}: {problem}.")
        env_vars[name] = path
    if profile.post_mortem:
        env_vars["RAY_DEBUG_POST_MORTEM"] = "1"
    if env_vars:
        runtime_env["env_vars"] = env_vars
    entrypoint = " ".join(parts)
    if profile.working_dir:
        directory = res(profile.working_dir)
        if Path(os.path.expanduser(directory)).is_dir():
            runtime_env["working_dir"] = str(Path(os.path.expanduser(directory)).resolve())
            runtime_env["excludes"] = [ALWAYS_EXCLUDED, *upload_excludes(profile)]
        else:
            entrypoint = f"cd {shlex.quote(directory)} && {entrypoint}"
    request: dict[str, Any] = {
        "entrypoint": entrypoint,
        "submission_id": submission_id or new_submission_id(profile.name),
        "metadata": {
            **{k: res(v) for k, v in profile.metadata.items()},
            "cockpit_profile": profile.name,
            "cockpit_overrides": json.dumps([o.text for o in extra]),
        },
    }
    if runtime_env:
        request["runtime_env"] = runtime_env
    for key in ("num_cpus", "num_gpus", "memory"):
        if key in profile.entrypoint_resources:
            value = profile.entrypoint_resources[key]
            request[f"entrypoint_{key}"] = int(value) if key == "memory" else value
    return request


def line_of_text(path: Path, needle: str) -> int:
    """The first line of a profile file containing `needle` (an override key), else 1."""
    try:
        with path.open("rb") as file:
            lines = file.read(2**20).decode("utf-8", errors="replace").splitlines()
    except OSError:
        return 1
    return next((n for n, line in enumerate(lines, start=1) if needle and needle in line), 1)
