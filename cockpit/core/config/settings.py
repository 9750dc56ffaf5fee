"""Provides the user's configuration: `config.yaml` in the config directory, `COCKPIT_*` variables over it.

The file is `$XDG_CONFIG_HOME/ray-cockpit/config.yaml` (else `~/.config/ray-cockpit/config.yaml`;
`COCKPIT_CONFIG` names another). YAML, like profiles, layouts and the role table: one format for
everything a user writes, read by the same guarded loader (`profile_file.read_yaml`), which gives the line
of every key (Python's `tomllib` reports no positions for a value that parses but is wrong).

Every field is in `FIELDS` with its default, its variable and what it does; `cockpit config show` prints
the effective value of each and where it came from (`default`, `FILE:LINE`, `env COCKPIT_X`). A problem is
one line naming file, line and key; the key it is about keeps its default and the rest of the file still
counts (a file that is not YAML at all counts for nothing). A configuration is never a reason not to
start.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CONFIG_ENV = "COCKPIT_CONFIG"

THEMES: Mapping[str, str] = {
    "dark": "textual-dark",
    "light": "textual-light",
    **{
        name: name
        for name in (
            "textual-dark",
            "textual-light",
            "ansi-dark",
            "ansi-light",
            "nord",
            "gruvbox",
            "dracula",
            "tokyo-night",
            "monokai",
            "flexoki",
            "solarized-light",
            "solarized-dark",
            "catppuccin-mocha",
            "catppuccin-latte",
            "rose-pine",
            "rose-pine-dawn",
            "atom-one-dark",
            "atom-one-light",
        )
    },
}
"""The `theme` names accepted and the Textual theme each stands for (`dark` and `light` are ours)."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_KEY = re.compile(r"[^\s,]+(,[^\s,]+)*")


class Invalid(ValueError):
    """A value a field does not take; the message says what it takes."""


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise Invalid("must be a string")
    return value.strip()


def _name(value: object) -> str:
    text = _text(value)
    if not _NAME.fullmatch(text):
        raise Invalid("must be a name of letters, digits, '-', '_' and '.'")
    return text


def _port(value: object) -> int:
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise Invalid("must be a port number from 1 to 65535")
    return value


def _seconds(value: object) -> float:
    try:
        seconds = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else -1
    except ValueError:
        seconds = -1
    if not 0.5 <= seconds <= 3600:
        raise Invalid("must be a number of seconds from 0.5 to 3600")
    return seconds


def _duration(value: object) -> float:
    from cockpit.core.units import parse_duration

    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    try:
        return parse_duration(_text(value))
    except ValueError as exc:
        raise Invalid(str(exc).rstrip(".")) from None


def _theme(value: object) -> str:
    text = _text(value)
    if text not in THEMES:
        raise Invalid(f"must be one of {', '.join(THEMES)}")
    return text


MAX_ROLE = 40
"""The longest role name (the role table's too)."""
MAX_KEY = 200
"""The longest class name or glob of a role mapping."""


def _roles(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid("must be a mapping of class name or glob to role (e.g. MyRolloutEngine: rollout)")
    roles: dict[str, str] = {}
    for key, role in value.items():
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY:
            raise Invalid(f"a class name or glob of 1 to {MAX_KEY} characters is needed")
        if not isinstance(role, str) or not role.strip() or len(role) > MAX_ROLE or not role.isprintable():
            raise Invalid(f"the role of {key!r} must be a word of 1 to {MAX_ROLE} characters")
        roles[key.strip()] = role.strip().lower()
    return roles


def _paths(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [part for part in value.split(os.pathsep) if part]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise Invalid("must be a list of directories")
    return tuple(v.strip() for v in value)


def _keys(value: object) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise Invalid(
            "must be a mapping of binding id to key (e.g. app.help: f1); `cockpit config keys` lists them"
        )
    keys: dict[str, str] = {}
    for binding, key in value.items():
        if not isinstance(binding, str) or not _NAME.fullmatch(binding):
            raise Invalid(f"{binding!r} is not a binding id (e.g. jobs.stop)")
        if isinstance(key, int) and not isinstance(key, bool):
            key = str(key)
        if not isinstance(key, str) or not _KEY.fullmatch(key.strip()):
            raise Invalid(
                f"the key of {binding} must be key names joined by commas (e.g. 'x' or 'f2,ctrl+s')"
            )
        keys[binding] = key.strip()
    return keys


@dataclass(frozen=True)
class Field:
    name: str
    """Dotted for a nested key: `refresh.actors` is `actors:` under `refresh:`."""
    default: Any
    read: Callable[[object], Any]
    doc: str
    env: str | None = None


FIELDS: tuple[Field, ...] = (
    Field("target", "", _text, "the TARGET of `cockpit connect` when none is given", "COCKPIT_TARGET"),
    Field(
        "ssh_config", "", _text, "OpenSSH client config (like ssh -F); empty: ssh's own", "COCKPIT_SSH_CONFIG"
    ),
    Field("dashboard_port", 8265, _port, "the dashboard's port on the head", "COCKPIT_DASHBOARD_PORT"),
    Field(
        "refresh.nodes",
        5.0,
        _seconds,
        "seconds between node polls once the cluster has its shape (every 2 s while nodes join)",
        "COCKPIT_REFRESH_NODES",
    ),
    Field(
        "refresh.actors",
        5.0,
        _seconds,
        "seconds between actor lists while the Actors screen is shown",
        "COCKPIT_REFRESH_ACTORS",
    ),
    Field(
        "refresh.paused",
        10.0,
        _seconds,
        "seconds between checks for paused workers (half that while the Debugger is shown)",
        "COCKPIT_REFRESH_PAUSED",
    ),
    Field(
        "refresh.hang_check",
        5.0,
        _seconds,
        "seconds between the hang detector's looks at the running jobs",
        "COCKPIT_REFRESH_HANG_CHECK",
    ),
    Field("theme", "dark", _theme, "dark, light, or a Textual theme (ctrl+p lists them)", "COCKPIT_THEME"),
    Field(
        "layout",
        "default",
        _name,
        "the layout of the cockpit screen (key 0): layouts/NAME.yaml",
        "COCKPIT_LAYOUT",
    ),
    Field(
        "hang_after",
        600.0,
        _duration,
        "no progress for this long is a hang (90s, 10m, 1h)",
        "COCKPIT_HANG_AFTER",
    ),
    Field(
        "profile_dirs",
        (),
        _paths,
        "more directories of profiles, searched after ./profiles and the config dir's",
        "COCKPIT_PROFILE_DIRS",
    ),
    Field("roles", {}, _roles, "role-table additions: class name or glob -> role (win over roles.yaml)"),
    Field("keys", {}, _keys, "key map: binding id -> key(s) (`cockpit config keys` lists the ids)"),
)
BY_NAME = {f.name: f for f in FIELDS}


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "ray-cockpit"


def config_path() -> Path:
    chosen = os.environ.get(CONFIG_ENV)
    return Path(chosen).expanduser() if chosen else config_dir() / "config.yaml"


@dataclass(frozen=True)
class Config:
    """The effective configuration: each field's value and where it came from."""

    path: Path
    values: Mapping[str, Any]
    origins: Mapping[str, str]
    """Field name -> `default`, `FILE:LINE` or `env COCKPIT_X`."""
    problems: tuple[str, ...] = ()
    """One line each: `FILE:LINE: key: what is wrong (default used)`."""
    lines: Mapping[str, int] = field(default_factory=dict)
    """Dotted key -> its line in the file (`keys.jobs.stop` too: the app names the line of a key it
    does not know)."""

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    @property
    def target(self) -> str:
        return str(self.values["target"])

    @property
    def ssh_config(self) -> str:
        return str(self.values["ssh_config"])

    @property
    def dashboard_port(self) -> int:
        return int(self.values["dashboard_port"])

    @property
    def theme(self) -> str:
        return THEMES[self.values["theme"]]

    @property
    def layout(self) -> str:
        return str(self.values["layout"])

    @property
    def hang_after(self) -> float:
        return float(self.values["hang_after"])

    @property
    def profile_dirs(self) -> tuple[Path, ...]:
        return tuple(Path(p).expanduser() for p in self.values["profile_dirs"])

    @property
    def roles(self) -> dict[str, str]:
        return dict(self.values["roles"])

    @property
    def keys(self) -> dict[str, str]:
        return dict(self.values["keys"])

    def where(self, key: str) -> str:
        """`FILE:LINE` of a dotted key of the file (the file alone when it is not there)."""
        line = self.lines.get(key)
        return f"{self.path}:{line}" if line else str(self.path)


def key_lines(node: Any, prefix: str = "") -> dict[str, int]:
    """Dotted key -> 1-based line, for the mappings of a composed YAML node (nested ones too)."""
    import yaml

    lines: dict[str, int] = {}
    if not isinstance(node, yaml.MappingNode):
        return lines
    for key_node, value_node in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        name = f"{prefix}{key_node.value}"
        lines[name] = key_node.start_mark.line + 1
        lines.update(key_lines(value_node, f"{name}."))
    return lines


def _flatten(doc: Mapping[Any, Any]) -> dict[str, Any]:
    """The file's keys as dotted names: a nested mapping is flattened unless its field takes a mapping."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        name = str(key)
        if isinstance(value, Mapping) and name not in BY_NAME:
            for sub, sub_value in value.items():
                flat[f"{name}.{sub}"] = sub_value
        else:
            flat[name] = value
    return flat


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The configuration from PATH (default `config_path()`) and ENV (default `os.environ`); never raises
    for what a user wrote: each problem is a line in `problems` and its field keeps its default."""
    from cockpit.core.config.yaml_file import ProfileError, read_yaml

    path = path or config_path()
    env = os.environ if env is None else env
    values = {f.name: f.default for f in FIELDS}
    origins = dict.fromkeys(values, "default")
    problems: list[str] = []
    lines: dict[str, int] = {}
    doc: object = None
    if path.exists():
        try:
            node, doc = read_yaml(path)
        except ProfileError as exc:
            problems.append(f"{str(exc).rstrip('.')} (the whole file ignored: defaults used)")
        else:
            lines = key_lines(node)
    if doc is not None and not isinstance(doc, Mapping):
        problems.append(f"{path}:1: expected a mapping of settings (the whole file ignored: defaults used)")
    elif isinstance(doc, Mapping):
        for name, raw in _flatten(doc).items():
            at = f"{path}:{lines.get(name, 1)}"
            spec = BY_NAME.get(name)
            if spec is None:
                known = ", ".join(f.name for f in FIELDS)
                problems.append(f"{at}: {name}: not a setting (ignored; settings: {known})")
                continue
            try:
                values[name] = spec.read(raw)
            except Invalid as exc:
                problems.append(f"{at}: {name}: {exc} (default {show(spec.default)} used)")
                continue
            origins[name] = at
    for spec in FIELDS:
        text = env.get(spec.env) if spec.env else None
        if text is None or spec.env is None:
            continue
        try:
            values[spec.name] = spec.read(text)
        except Invalid as exc:
            problems.append(f"{spec.env}={text!r}: {spec.name}: {exc} (ignored)")
            continue
        origins[spec.name] = f"env {spec.env}"
    return Config(path=path, values=values, origins=origins, problems=tuple(problems), lines=lines)


@functools.lru_cache(maxsize=1)
def settings() -> Config:
    """The configuration of this process, read once (the file and `COCKPIT_*` at first use)."""
    return load()


def show(value: Any) -> str:
    """A value as `config show` prints it (YAML-like, one line)."""
    if isinstance(value, str):
        return repr(value) if value == "" else value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return str(value)
