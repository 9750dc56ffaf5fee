"""Provides `load`: one profile file validated into a `Profile`, every key typed and checked.

The keys are declared once in `PROFILE` (`config.schema`: name, type, required, what it does), which gives
both the checks and the JSON Schema editors read (`cockpit config schema profile`). The file is read by
`yaml_file.read_yaml` (limits: size, UTF-8, no aliases, no duplicate keys, depth) and checked against
`PROFILE`: `progress:` must compile, `hang_after:` be a duration that `units.parse_duration` reads,
`metrics:` a format name or a regex with a `step` group, as `metrics.parse_format` reads them. Then what a
schema cannot say: a `${env:NAME}` secret anywhere but a `runtime_env.env_vars` value is refused, judged on
each reference as the resolver reads it; each override must be KEY=VALUE; a secret file's name must not be
an env var too. Errors are one `ProfileError` line naming the file, the line and the key. Nothing here
resolves a variable or touches the cluster.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.config import schema
from cockpit.core.config.schema import (
    Anything,
    Duration,
    Items,
    Key,
    Number,
    OneOf,
    Record,
    Table,
    Text,
    Whole,
    regex_problem,
)
from cockpit.core.config.yaml_file import ConfigFileError
from cockpit.core.jobs.errors import OverrideError
from cockpit.core.jobs.overrides import SECRET_HOME, parse_override, secret_reference
from cockpit.core.jobs.working_dir import excludes_spec
from cockpit.core.metrics.lines import parse_format
from cockpit.core.text import clean


class ProfileError(ConfigFileError):
    """A profile that cannot be used (or rendered); the message (always one line) names file, line and
    key."""

    noun = "a profile"


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
ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def _ray_pattern(text: str) -> str | None:
    try:
        excludes_spec([text])
    except ValueError:
        return f"is not a pattern Ray reads: {text!r}."
    return None


def _absolute(text: str) -> str | None:
    where = os.path.expanduser(text)
    if not os.path.isabs(where) or "\0" in where:
        return f"must be an absolute path on the shared filesystem, not {text!r}."
    return None


def _metrics_format(text: str) -> str | None:
    if not text:
        return None
    try:
        parse_format(text)
    except ValueError as exc:
        return clean(str(exc))
    return None


_RAY_DOC = "passed to Ray as written (Ray checks it)"
RUNTIME_ENV = Record(
    keys=tuple(
        Key(
            name,
            {
                "excludes": Items(Text(test=_ray_pattern)),
                "env_vars": Table(Text(scalars=True), shape="NAME: value"),
                "working_dir": Text(),
            }.get(name, Anything()),
            {
                "excludes": "gitignore-style patterns left out of an uploaded working_dir (.git always is)",
                "env_vars": "environment variables of the job; the only place a ${env:NAME} secret may be",
                "working_dir": "the job's working directory as Ray reads it (prefer the profile's own "
                "working_dir)",
            }.get(name, _RAY_DOC),
        )
        for name in RUNTIME_ENV_KEYS
    ),
    shape="env_vars, pip, py_executable, ...",
    unknown="not a runtime_env field (known: {keys}).",
)
ENTRYPOINT = OneOf(
    (
        Text(strip=True, min_length=1, says="missing: give a command string or {module: ..., args: [...]}."),
        Record(
            keys=(
                Key(
                    "module",
                    Text(strip=True, min_length=1, says="must name a module (python -m MODULE)."),
                    "the module `${python} -m` runs",
                    required=True,
                    missing="missing: give the module to run, or a command string for entrypoint.",
                ),
                Key("args", Items(Text(scalars=True)), "its arguments, in order"),
            ),
            unknown="unknown key (expected module, args).",
        ),
    ),
    says="must be a command string or {module: ..., args: [...]}, not {kind}.",
)
PROFILE = Record(
    doc="A ray-cockpit job profile: a saved, checked launch of a Ray job (profiles/README.md).",
    says="a profile is a mapping of keys (name, entrypoint, ...), not {kind}.",
    unknown="unknown key (expected one of {sorted}).",
    keys=(
        Key("name", Text(), "the name `cockpit submit TARGET NAME` finds it by (default: the file's name)"),
        Key("description", Text(), "one line, shown by `cockpit profiles list` and the launcher"),
        Key(
            "framework",
            Text(choices=FRAMEWORKS, says="unknown framework {value} (known: {choices})."),
            "whose overrides the pre-flight checks read (default: generic)",
        ),
        Key(
            "entrypoint",
            ENTRYPOINT,
            "the command the job runs (through a shell), or {module: pkg.mod, args: [...]} for "
            "`${python} -m pkg.mod ...`",
            required=True,
            missing="missing: give a command string or {module: ..., args: [...]}.",
        ),
        Key(
            "overrides",
            Items(Text(scalars=True)),
            "Hydra-style KEY=VALUE items appended to the entrypoint exactly as written",
        ),
        Key(
            "working_dir",
            Text(),
            "a directory here (zipped and uploaded) or on the cluster's shared filesystem (the job runs "
            "there)",
        ),
        Key("runtime_env", RUNTIME_ENV, "Ray's runtime_env: env_vars, pip, uv, py_executable, excludes, ..."),
        Key(
            "secret_files",
            Table(
                Text(test=_absolute),
                key=Text(pattern=ENV_NAME, says="not an environment variable name (letters, digits, _)."),
                shape="NAME_FILE: /path/to/owner-only/file",
            ),
            "env var -> absolute path of an owner-only file on the shared filesystem; the path is sent, "
            "never the file",
        ),
        Key(
            "cluster",
            Record(
                keys=(
                    Key("nodes", Whole(), "nodes the job expects (default 1)", default=1),
                    Key("gpus_per_node", Whole(), "GPUs per node the job expects (default 0)", default=0),
                ),
                shape="nodes, gpus_per_node",
                unknown="unknown key (expected nodes, gpus_per_node).",
            ),
            "the shape the job expects; ${cluster.nodes} and ${cluster.gpus_per_node} read it",
        ),
        Key(
            "entrypoint_resources",
            Record(
                keys=(
                    Key("num_cpus", Number(), "CPUs reserved for the driver"),
                    Key("num_gpus", Number(), "GPUs reserved for the driver"),
                    Key("memory", Number(), "memory reserved for the driver, in bytes"),
                ),
                shape="num_cpus, num_gpus, memory",
                unknown="unknown key (expected num_cpus, num_gpus, memory).",
            ),
            "what the driver reserves on its node",
        ),
        Key(
            "debug",
            Text(choices=("post_mortem",), says="the only value is `post_mortem`."),
            "post_mortem: the job's workers pause in Ray's debugger on an uncaught error",
        ),
        Key(
            "progress",
            Text(test=regex_problem),
            "a regex: only driver-log lines it finds count as progress (default: any line, or GPU activity)",
        ),
        Key("hang_after", Duration(), "no progress for this long is a hang: 90s, 10m, 1h30m (default 10m)"),
        Key(
            "metrics",
            Text(test=_metrics_format),
            "how the driver log prints metrics: a format name (auto, verl, nemo_rl, rlinf, demo, generic) "
            "or a regex with a (?P<step>...) group (default: the framework's)",
        ),
        Key(
            "phases",
            Record(
                keys=(
                    Key(
                        "prefix",
                        Text(),
                        "the timing keys' prefix, e.g. timing_s/ (each key after it: a phase)",
                    ),
                    Key("total", Text(), "the name (after the prefix) of the step's total, e.g. step"),
                    Key("checkpoint", Text(), "the name (after the prefix) of the checkpoint save's time"),
                ),
                shape="prefix, total, checkpoint",
                unknown="unknown key (expected prefix, total, checkpoint).",
            ),
            "where the driver log's step timings are, for `cockpit metrics --phases` (default: verl's "
            "timing_s/*, NeMo RL's Timing section, RLinf's time/*)",
        ),
        Key(
            "metadata", Table(Text(scalars=True), shape="key: string"), "job metadata, shown in the job list"
        ),
        Key("tags", Items(Text(scalars=True)), "words `cockpit profiles list` and the launcher show"),
    ),
)
"""What a profile file holds: the checks `load` makes and the profile JSON Schema come from it."""


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
    phases: Mapping[str, str] = field(default_factory=dict)
    """`prefix`, `total`, `checkpoint`: the step timings' keys (`metrics.phases.profile_keys`); empty: the
    framework's."""
    metrics: str = ""
    """How the driver log prints metrics: a format name (`metrics.FORMATS`) or a regex with a `step` group
    and a group per key (checked at load); empty: what `framework` prints
    (`doctor.progress.job_metrics_format`)."""


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


def load(path: Path) -> Profile:
    """Load and validate one profile file.

    Raises:
        ProfileError: "FILE:LINE: key: what is wrong".
    """
    values, node = schema.load(path, PROFILE, ProfileError)

    def fail(key: str, message: str, line: int | None = None) -> ProfileError:
        return ProfileError(f"{path}:{line or _line_of(node, key)}: {key}: {message}")

    entry = values["entrypoint"]
    if isinstance(entry, Mapping):
        entrypoint = " ".join(["${python}", "-m", entry["module"], *entry.get("args", ())])
    else:
        entrypoint = entry
    overrides: tuple[str, ...] = values.get("overrides", ())
    runtime_env: dict[str, Any] = {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in values.get("runtime_env", {}).items()
    }
    env_vars: Mapping[str, str] = runtime_env.get("env_vars", {})
    metadata: Mapping[str, str] = values.get("metadata", {})
    files: Mapping[str, str] = values.get("secret_files", {})
    working_dir: str = values.get("working_dir", "")
    # A secret anywhere but an env var value would travel in clear: in the job list, `ps` on the head.
    # Judged on every reference as the resolver reads it (`${ env:X}` too), in every value it resolves.
    for key, value, at in (
        ("entrypoint", entrypoint, None),
        ("working_dir", working_dir, None),
        *((f"overrides[{i + 1}]", o, _item_line(node, "overrides", i)) for i, o in enumerate(overrides)),
        *((f"metadata.{k}", v, None) for k, v in metadata.items()),
        *((f"runtime_env.{k}", v, None) for k, v in runtime_env.items() if k != "env_vars"),
        *((f"secret_files.{k}", v, None) for k, v in files.items()),
    ):
        reference = next(filter(None, map(secret_reference, _strings_in(value))), None)
        if reference is not None:
            raise fail(
                key,
                f"{reference}: secrets belong in {SECRET_HOME} only (elsewhere the job list shows them); "
                "refer to them as $NAME in the command, or use secret_files.",
                at,
            )
    for index, item in enumerate(overrides):
        try:
            parse_override(item)
        except OverrideError as exc:
            raise fail("overrides", str(exc), _item_line(node, "overrides", index)) from None
    for name in files:
        if name in env_vars:
            raise fail(f"secret_files.{name}", f"also set in {SECRET_HOME}: give it once.")
    cluster: Mapping[str, int] = values.get("cluster", {})
    return Profile(
        name=values.get("name") or path.stem,
        path=path,
        entrypoint=entrypoint,
        description=values.get("description", ""),
        overrides=overrides,
        working_dir=working_dir,
        runtime_env=runtime_env,
        cluster=ClusterShape(nodes=cluster.get("nodes", 1), gpus_per_node=cluster.get("gpus_per_node", 0)),
        entrypoint_resources=dict(values.get("entrypoint_resources", {})),
        metadata=dict(metadata),
        tags=values.get("tags", ()),
        framework=values.get("framework") or "generic",
        post_mortem=values.get("debug") == "post_mortem",
        secret_files={name: os.path.expanduser(where) for name, where in files.items()},
        shape_lines={
            key: _line_of(node, f"cluster.{key}") for key in ("nodes", "gpus_per_node") if key in cluster
        },
        override_lines=tuple(_item_line(node, "overrides", index) for index in range(len(overrides))),
        progress=values.get("progress", ""),
        hang_after=values.get("hang_after"),
        metrics=values.get("metrics", ""),
        phases={k: v for k, v in dict(values.get("phases") or {}).items() if v},
    )


def _strings_in(value: Any) -> list[str]:
    """Every string in a YAML value (keys too), depth first; a number or a bool is its text."""
    if isinstance(value, Mapping):
        return [text for k, v in value.items() for text in (*_strings_in(k), *_strings_in(v))]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item)]
    return [] if value is None else [str(value)]
