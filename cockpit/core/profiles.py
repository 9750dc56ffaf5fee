"""Provides job profiles: saved launches in YAML, loaded, validated and rendered into a job submission.

A profile names an entrypoint, Hydra-style overrides kept exactly as written, a runtime_env, the cluster
shape it expects and its metadata. Values may use `${python}` (the interpreter running the cockpit),
`${cluster.nodes}` / `${cluster.gpus_per_node}` and `${env:NAME}`: a secret read at submit time, sent to
the cluster and shown masked everywhere else. Errors name the file, the line and the key.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.errors import CockpitError

MASK = "••••••"
_VAR = re.compile(r"\$\{([^}]+)\}")
_KEYS = {
    "name",
    "description",
    "entrypoint",
    "overrides",
    "working_dir",
    "runtime_env",
    "cluster",
    "entrypoint_resources",
    "metadata",
    "tags",
    "debug",
}


class ProfileError(CockpitError):
    """A profile that cannot be used; the message names file, line and key."""


@dataclass(frozen=True)
class ClusterShape:
    nodes: int = 1
    gpus_per_node: int = 0


@dataclass(frozen=True)
class Profile:
    """A validated profile, values still unresolved (secrets stay `${env:...}` references)."""

    name: str
    path: Path
    entrypoint: str
    description: str = ""
    overrides: tuple[str, ...] = ()
    working_dir: str = ""
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    cluster: ClusterShape = ClusterShape()
    entrypoint_resources: Mapping[str, float] = field(default_factory=dict)
    metadata: Mapping[str, str] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    post_mortem: bool = False


def search_path() -> list[Path]:
    """Where profiles are found: ./profiles, the user's config dir, then the ones shipped with the cockpit."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "ray-cockpit" / "profiles"
    shipped = Path(__file__).resolve().parents[2] / "profiles"
    seen: list[Path] = []
    for path in (Path.cwd() / "profiles", config, shipped):
        if path.is_dir() and path.resolve() not in [p.resolve() for p in seen]:
            seen.append(path)
    return seen


def find(name_or_path: str) -> Path:
    """The file of a profile given by name (`demo`) or path (`./my.yaml`)."""
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if candidate.is_file():
            return candidate
        raise ProfileError(f"{name_or_path}: no such profile file.")
    for directory in search_path():
        for suffix in (".yaml", ".yml"):
            path = directory / f"{name_or_path}{suffix}"
            if path.is_file():
                return path
    names = ", ".join(sorted(p.stem for d in search_path() for p in d.glob("*.y*ml"))) or "none"
    raise ProfileError(f"no profile named {name_or_path!r} (known: {names}).")


def _line_of(node: yaml.Node | None, key: str) -> int:
    if isinstance(node, yaml.MappingNode):
        for key_node, _value in node.value:
            if getattr(key_node, "value", None) == key:
                return int(key_node.start_mark.line) + 1
    return 1


def load(path: Path) -> Profile:
    """Load and validate one profile file.

    Raises:
        ProfileError: "FILE:LINE: key: what is wrong".
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror}).") from None
    try:
        node = yaml.compose(text)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ProfileError(f"{path}{line}: not valid YAML ({getattr(exc, 'problem', exc)}).") from None
    if not isinstance(doc, Mapping):
        raise ProfileError(f"{path}:1: a profile is a mapping of keys (name, entrypoint, ...).")

    def fail(key: str, message: str) -> ProfileError:
        return ProfileError(f"{path}:{_line_of(node, key.split('.')[0])}: {key}: {message}")

    unknown = sorted(set(map(str, doc)) - _KEYS)
    if unknown:
        raise fail(unknown[0], f"unknown key (expected one of {', '.join(sorted(_KEYS))}).")
    entry = doc.get("entrypoint")
    if isinstance(entry, Mapping):
        module = entry.get("module")
        if not isinstance(module, str) or not module:
            raise fail("entrypoint", "needs `module:` (or give a command string).")
        args = entry.get("args") or []
        entrypoint = " ".join(["${python}", "-m", module, *map(str, args)])
    elif isinstance(entry, str) and entry.strip():
        entrypoint = entry.strip()
    else:
        raise fail("entrypoint", "missing: give a command string or {module: ..., args: [...]}.")
    overrides = doc.get("overrides") or []
    if not isinstance(overrides, list) or not all(isinstance(o, (str, int, float)) for o in overrides):
        raise fail("overrides", "must be a list of key=value strings.")
    runtime_env = doc.get("runtime_env") or {}
    if not isinstance(runtime_env, Mapping):
        raise fail("runtime_env", "must be a mapping (env_vars, pip, py_executable, ...).")
    env_vars = runtime_env.get("env_vars") or {}
    if not isinstance(env_vars, Mapping):
        raise fail("runtime_env", "env_vars must be a mapping of NAME: value.")
    cluster = doc.get("cluster") or {}
    if not isinstance(cluster, Mapping):
        raise fail("cluster", "must be a mapping with nodes and gpus_per_node.")
    try:
        shape = ClusterShape(
            nodes=int(cluster.get("nodes", 1)), gpus_per_node=int(cluster.get("gpus_per_node", 0))
        )
    except (TypeError, ValueError):
        raise fail("cluster", "nodes and gpus_per_node must be whole numbers.") from None
    resources = doc.get("entrypoint_resources") or {}
    if not isinstance(resources, Mapping):
        raise fail("entrypoint_resources", "must be a mapping like {num_cpus: 1}.")
    metadata = doc.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise fail("metadata", "must be a mapping of strings.")
    debug = doc.get("debug")
    if debug not in (None, "post_mortem"):
        raise fail("debug", "the only value is `post_mortem`.")
    return Profile(
        name=str(doc.get("name") or path.stem),
        path=path,
        entrypoint=entrypoint,
        description=str(doc.get("description") or ""),
        overrides=tuple(str(o) for o in overrides),
        working_dir=str(doc.get("working_dir") or ""),
        runtime_env=dict(runtime_env),
        cluster=shape,
        entrypoint_resources={str(k): float(v) for k, v in resources.items()},
        metadata={str(k): str(v) for k, v in metadata.items()},
        tags=tuple(str(t) for t in doc.get("tags") or ()),
        post_mortem=debug == "post_mortem",
    )


def _resolve(text: str, shape: ClusterShape, secrets: dict[str, str], mask: bool) -> str:
    def replace(match: re.Match[str]) -> str:
        key = match.group(1).strip()
        if key == "python":
            return sys.executable
        if key == "cluster.nodes":
            return str(shape.nodes)
        if key == "cluster.gpus_per_node":
            return str(shape.gpus_per_node)
        if key.startswith("env:"):
            name = key[4:]
            value = os.environ.get(name)
            if value is None:
                raise ProfileError(
                    f"${{env:{name}}} is not set in this shell: export {name} before submitting."
                )
            secrets[name] = value
            return MASK if mask else value
        raise ProfileError(
            f"unknown variable ${{{key}}} (use python, cluster.nodes, cluster.gpus_per_node, env:NAME)."
        )

    return _VAR.sub(replace, text)


def render(
    profile: Profile,
    extra_overrides: tuple[str, ...] = (),
    *,
    mask: bool = False,
    submission_id: str | None = None,
) -> dict[str, Any]:
    """The JobSubmitRequest for this profile. With `mask`, secrets appear as MASK (for display)."""
    secrets: dict[str, str] = {}
    shape = profile.cluster

    def res(value: Any) -> Any:
        if isinstance(value, str):
            return _resolve(value, shape, secrets, mask)
        if isinstance(value, Mapping):
            return {str(k): res(v) for k, v in value.items()}
        if isinstance(value, list):
            return [res(v) for v in value]
        return value

    parts = [res(profile.entrypoint), *(shlex.quote(res(o)) for o in (*profile.overrides, *extra_overrides))]
    runtime_env = res(dict(profile.runtime_env))
    env_vars = {str(k): str(v) for k, v in (runtime_env.get("env_vars") or {}).items()}
    if profile.post_mortem:
        env_vars["RAY_DEBUG_POST_MORTEM"] = "1"
    if env_vars:
        runtime_env["env_vars"] = env_vars
    if profile.working_dir:
        runtime_env.setdefault("working_dir", res(profile.working_dir))
    request: dict[str, Any] = {
        "entrypoint": " ".join(parts),
        "submission_id": submission_id or f"{profile.name}-{time.strftime('%Y%m%d-%H%M%S')}",
        "metadata": {**{k: res(v) for k, v in profile.metadata.items()}, "cockpit_profile": profile.name},
    }
    if runtime_env:
        request["runtime_env"] = runtime_env
    for key in ("num_cpus", "num_gpus", "memory"):
        if key in profile.entrypoint_resources:
            request[f"entrypoint_{key}"] = profile.entrypoint_resources[key]
    return request
