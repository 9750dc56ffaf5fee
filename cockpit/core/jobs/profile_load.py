"""Provides `load`: one profile file validated into a `Profile`, every key typed and checked.

The file is read by `profile_file.read_yaml` (limits: size, UTF-8, no aliases, no duplicate keys, depth).
Then each key is checked against what the cockpit and Ray accept; a `${env:NAME}` secret anywhere but a
`runtime_env.env_vars` value is refused, judged on each reference as the resolver reads it. Errors are one
line naming the file, the line and the key (`progress:` must compile, `hang_after:` be a duration that
`units.parse_duration` reads, `metrics:` a format name or a regex with a `step` group, as
`metrics.parse_format` reads them). Nothing here resolves a variable or touches the cluster.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.config.yaml_file import ProfileError, read_yaml
from cockpit.core.jobs.errors import OverrideError
from cockpit.core.jobs.overrides import SECRET_HOME, parse_override, secret_reference
from cockpit.core.jobs.working_dir import excludes_spec
from cockpit.core.metrics.lines import parse_format
from cockpit.core.text import clean
from cockpit.core.units import parse_duration

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
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
    "framework",
    "secret_files",
    "progress",
    "hang_after",
    "metrics",
}
FRAMEWORKS = ("generic", "demo", "verl", "intuitor", "nemo_rl", "rlinf")
"""Frameworks whose overrides the pre-flight checks understand."""
RUNTIME_ENV_KEYS = (
    "py_modules",
    "py_executable",
    "java_jars",
    "working_dir",
    "conda",
    "pip",
    "uv",
    "container",
    "excludes",
    "env_vars",
    "config",
    "worker_process_setup_hook",
    "image_uri",
    "_nsight",
    "_rocprof_sys",
)
"""Fields Ray 2.60 accepts in a runtime_env (anything else fails the job at start)."""


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
    framework: str = "generic"
    post_mortem: bool = False
    secret_files: Mapping[str, str] = field(default_factory=dict)
    """Env var name -> absolute path of an owner-only file the job reads; the path is sent, not the file."""
    shape_lines: Mapping[str, int] = field(default_factory=dict)
    """The line of each `cluster:` key the file gives (`nodes`, `gpus_per_node`); empty: no shape given."""
    override_lines: tuple[int, ...] = ()
    """The line of each of `overrides`."""
    progress: str = ""
    """A regex (checked to compile): only driver-log lines it finds count as progress; empty: any line."""
    hang_after: float | None = None
    """Seconds without progress that make a hang (`hang.hang_policy` reads both); None: the default."""
    metrics: str = ""
    """How the driver log prints metrics: a format name (`metrics.FORMATS`) or a regex with a `step` group
    and a group per key (checked at load); empty: what `framework` prints (`metrics.job_format`)."""


def _line_of(node: yaml.Node | None, dotted: str) -> int:
    """The line of a (dotted) key in the composed YAML, or of its nearest parent that exists."""
    line = 1
    for key in dotted.split("."):
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if getattr(key_node, "value", None) == key:
                line = int(key_node.start_mark.line) + 1
                node = value_node
                break
        else:
            break
    return line


def _item_line(node: yaml.Node | None, key: str, index: int) -> int:
    """The line of item `index` of the list under top-level `key`."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            is_list = isinstance(value_node, yaml.SequenceNode)
            if getattr(key_node, "value", None) == key and is_list and index < len(value_node.value):
                return int(value_node.value[index].start_mark.line) + 1
    return _line_of(node, key)


class _Checker:
    """Type checks with errors that name the file, the line and the key."""

    def __init__(self, path: Path, node: yaml.Node | None) -> None:
        self.path = path
        self.node = node

    def fail(self, key: str, message: str, line: int | None = None) -> ProfileError:
        return ProfileError(f"{self.path}:{line or _line_of(self.node, key)}: {key}: {message}")

    def mapping(self, value: Any, key: str, what: str) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(key, f"must be a mapping ({what}), not {_kind(value)}.")
        return value

    def string(self, value: Any, key: str) -> str:
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self.fail(key, f"must be a string, not {_kind(value)}.")
        return value

    def whole(self, value: Any, key: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self.fail(key, f"must be a whole number, not {value!r}.")
        return value

    def number(self, value: Any, key: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise self.fail(key, f"must be a number, not {value!r}.")
        return float(value)

    def pattern(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        try:
            re.compile(text)
        except re.error as exc:
            where = "" if exc.pos is None else f" at position {exc.pos}"
            raise self.fail(key, f"not a regular expression: {clean(exc.msg)}{where}.") from None
        except (OverflowError, RecursionError) as exc:  # `a{99999999999}`, thousands of nested groups
            raise self.fail(key, f"not a regular expression Python takes: {exc}.") from None
        return text

    def metrics_format(self, value: Any, key: str) -> str:
        """A format name or a regex with a `(?P<step>...)` group and a group per key."""
        text = self.string(value, key)
        if text:
            try:
                parse_format(text)
            except ValueError as exc:
                raise self.fail(key, clean(str(exc))) from None
        return text

    def duration(self, value: Any, key: str) -> float | None:
        """Seconds from `10m`, `1h30m`, `90s` or a number of seconds."""
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(key, f"must be a duration such as 10m or 90s, not {_kind(value)}.")
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            raise self.fail(key, str(exc)) from None

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if value is None:
            return ()
        if not isinstance(value, list):
            raise self.fail(key, f"must be a list, not {_kind(value)}.")
        out = []
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)) or item is None:
                raise self.fail(
                    key,
                    f"item {index + 1} must be a string, not {_kind(item)}.",
                    _item_line(self.node, key, index),
                )
            out.append(str(item))
        return tuple(out)


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true/false", type(None): "empty"}.get(
        type(value), type(value).__name__
    )


def load(path: Path) -> Profile:
    """Load and validate one profile file.

    Raises:
        ProfileError: "FILE:LINE: key: what is wrong".
    """
    node, doc = read_yaml(path)
    if not isinstance(doc, Mapping):
        raise ProfileError(
            f"{path}:1: a profile is a mapping of keys (name, entrypoint, ...), not {_kind(doc)}."
        )
    check = _Checker(path, node)

    unknown = sorted(set(map(str, doc)) - _KEYS)
    if unknown:
        raise check.fail(unknown[0], f"unknown key (expected one of {', '.join(sorted(_KEYS))}).")
    entry = doc.get("entrypoint")
    if isinstance(entry, Mapping):
        module = check.string(entry.get("module"), "entrypoint.module")
        if not module:
            raise check.fail("entrypoint", "needs `module:` (or give a command string).")
        args = check.strings(entry.get("args"), "entrypoint.args")
        entrypoint = " ".join(["${python}", "-m", module, *args])
    elif isinstance(entry, str) and entry.strip():
        entrypoint = entry.strip()
    else:
        raise check.fail("entrypoint", "missing: give a command string or {module: ..., args: [...]}.")
    overrides = check.strings(doc.get("overrides"), "overrides")
    runtime_env = check.mapping(doc.get("runtime_env"), "runtime_env", "env_vars, pip, py_executable, ...")
    for key in runtime_env:
        if key not in RUNTIME_ENV_KEYS:
            raise check.fail(
                f"runtime_env.{key}", f"not a runtime_env field (known: {', '.join(RUNTIME_ENV_KEYS)})."
            )
    check.strings(runtime_env.get("excludes"), "runtime_env.excludes")
    for index, pattern in enumerate(runtime_env.get("excludes") or ()):
        if not isinstance(pattern, str):
            raise check.fail(
                "runtime_env.excludes", f"item {index + 1} must be a string, not {_kind(pattern)}."
            )
        try:
            excludes_spec([pattern])
        except ValueError:
            raise check.fail(
                "runtime_env.excludes", f"item {index + 1} is not a pattern Ray reads: {pattern!r}."
            ) from None
    env_vars = check.mapping(runtime_env.get("env_vars"), "runtime_env.env_vars", "NAME: value")
    for name, value in env_vars.items():
        if isinstance(value, (dict, list)) or value is None:
            raise check.fail(f"runtime_env.env_vars.{name}", f"must be a string, not {_kind(value)}.")
    cluster = check.mapping(doc.get("cluster"), "cluster", "nodes, gpus_per_node")
    for key in cluster:
        if key not in ("nodes", "gpus_per_node"):
            raise check.fail(f"cluster.{key}", "unknown key (expected nodes, gpus_per_node).")
    shape = ClusterShape(
        nodes=check.whole(cluster.get("nodes"), "cluster.nodes", 1),
        gpus_per_node=check.whole(cluster.get("gpus_per_node"), "cluster.gpus_per_node", 0),
    )
    resources = check.mapping(
        doc.get("entrypoint_resources"), "entrypoint_resources", "num_cpus, num_gpus, memory"
    )
    for key in resources:
        if key not in ("num_cpus", "num_gpus", "memory"):
            raise check.fail(
                f"entrypoint_resources.{key}", "unknown key (expected num_cpus, num_gpus, memory)."
            )
    metadata = check.mapping(doc.get("metadata"), "metadata", "key: string")
    files = check.mapping(doc.get("secret_files"), "secret_files", "NAME_FILE: /path/to/owner-only/file")
    # A secret anywhere but an env var value would travel in clear: in the job list, `ps` on the head.
    # Judged on every reference as the resolver reads it (`${ env:X}` too), in every value it resolves.
    for key, value, at in (
        ("entrypoint", entrypoint, None),
        ("working_dir", doc.get("working_dir"), None),
        *((f"overrides[{i + 1}]", o, _item_line(node, "overrides", i)) for i, o in enumerate(overrides)),
        *((f"metadata.{k}", v, None) for k, v in metadata.items()),
        *((f"runtime_env.{k}", v, None) for k, v in runtime_env.items() if k != "env_vars"),
        *((f"secret_files.{k}", v, None) for k, v in files.items()),
    ):
        reference = next(filter(None, map(secret_reference, _strings_in(value))), None)
        if reference is not None:
            raise check.fail(
                key,
                f"{reference}: secrets belong in {SECRET_HOME} only (elsewhere the job list shows them); "
                "refer to them as $NAME in the command, or use secret_files.",
                at,
            )
    for index, item in enumerate(overrides):
        try:
            parse_override(item)
        except OverrideError as exc:
            raise check.fail("overrides", str(exc), _item_line(node, "overrides", index)) from None
    secret_files: dict[str, str] = {}
    for name, value in files.items():
        key = f"secret_files.{name}"
        if not isinstance(name, str) or not _ENV_NAME.match(name):
            raise check.fail(key, "not an environment variable name (letters, digits, _).")
        where = os.path.expanduser(check.string(value, key))
        if not os.path.isabs(where) or "\0" in where:
            raise check.fail(key, f"must be an absolute path on the shared filesystem, not {value!r}.")
        if name in env_vars:
            raise check.fail(key, f"also set in {SECRET_HOME}: give it once.")
        secret_files[name] = where
    framework = check.string(doc.get("framework"), "framework") or "generic"
    if framework not in FRAMEWORKS:
        raise check.fail("framework", f"unknown framework {framework!r} (known: {', '.join(FRAMEWORKS)}).")
    debug = doc.get("debug")
    if debug not in (None, "post_mortem"):
        raise check.fail("debug", "the only value is `post_mortem`.")
    return Profile(
        name=check.string(doc.get("name"), "name") or path.stem,
        path=path,
        entrypoint=entrypoint,
        description=check.string(doc.get("description"), "description"),
        overrides=overrides,
        working_dir=check.string(doc.get("working_dir"), "working_dir"),
        runtime_env=dict(runtime_env),
        cluster=shape,
        entrypoint_resources={
            str(k): check.number(v, f"entrypoint_resources.{k}") for k, v in resources.items()
        },
        metadata={str(k): str(v) for k, v in metadata.items()},
        tags=check.strings(doc.get("tags"), "tags"),
        framework=framework,
        post_mortem=debug == "post_mortem",
        secret_files=secret_files,
        shape_lines={
            key: _line_of(node, f"cluster.{key}") for key in ("nodes", "gpus_per_node") if key in cluster
        },
        override_lines=tuple(_item_line(node, "overrides", index) for index in range(len(overrides))),
        progress=check.pattern(doc.get("progress"), "progress"),
        hang_after=check.duration(doc.get("hang_after"), "hang_after"),
        metrics=check.metrics_format(doc.get("metrics"), "metrics"),
    )


def _strings_in(value: Any) -> list[str]:
    """Every string in a YAML value (keys too), depth first; a number or a bool is its text."""
    if isinstance(value, Mapping):
        return [text for k, v in value.items() for text in (*_strings_in(k), *_strings_in(v))]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item)]
    return [] if value is None else [str(value)]
