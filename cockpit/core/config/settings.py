"""Provides the user's configuration: `config.yaml` in the config directory, `COCKPIT_*` variables over it.

The file is `$XDG_CONFIG_HOME/ray-cockpit/config.yaml` (else `~/.config/ray-cockpit/config.yaml`;
`COCKPIT_CONFIG` names another). YAML, like profiles, layouts and the role table: one format for
everything a user writes, read by the same guarded loader (`yaml_file.read_yaml`), which gives the line
of every key (Python's `tomllib` reports no positions for a value that parses but is wrong).

Every setting is a `Key` of `FIELDS` (`config.schema`) with its type, default, variable and what it does;
`CONFIG` arranges them as the file does (`refresh.actors` is `actors:` under `refresh:`), and gives the
checks and the JSON Schema (`cockpit config schema config`). `cockpit config show` prints the effective
value of each and where it came from (`default`, `FILE:LINE`, `env COCKPIT_X`). A problem is one line
naming file, line and key; the key it is about keeps its default and the rest of the file still counts (a
file that is not YAML at all counts for nothing). A configuration is never a reason not to start.

`load` reads it; nothing in the core reads it by itself: the command line and the app load it once and
pass what the core needs (profile directories, the hang default, role additions) down as arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.core.config.role_table import ROLE_TABLE
from cockpit.core.config.schema import Duration, Invalid, Items, Key, Number, Record, Spot, Table, Text, Whole
from cockpit.core.config.yaml_file import ConfigFileError, read_yaml

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

ALERT_RULES = (
    "job_failed",
    "job_succeeded",
    "oom",
    "nan",
    "node_dead",
    "slurm_ended",
    "hang",
    "straggler",
    "stuck",
    "walltime",
    "unreachable",
)
"""The alert rules' ids (`cockpit.core.alerts.rules.RULES` holds the rules; a test keeps the two equal)."""
NOTIFY_STYLES = ("osc9", "osc777", "bell", "off")

NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_KEY = r"[^\s,]+(,[^\s,]+)*"


class ConfigError(ConfigFileError):
    """A `config.yaml` that cannot be read at all (each of its problems is a line in `Config.problems`)."""

    noun = "the config file"


@dataclass(frozen=True)
class Directories(Items):
    """A list of directories; from the environment, one string split on `os.pathsep` (like PATH)."""

    def takes(self, value: Any) -> bool:
        return isinstance(value, (list, str))

    def check(self, value: Any, spot: Spot) -> tuple[Any, ...]:
        if isinstance(value, str):
            value = [part for part in value.split(os.pathsep) if part]
        return super().check(value, spot)


_SECONDS = Number(0.5, 3600, digits=True, says="must be a number of seconds from 0.5 to 3600")
FIELDS: tuple[Key, ...] = (
    Key(
        "target",
        Text(strip=True),
        "the TARGET of `cockpit connect` when none is given",
        default="",
        env="COCKPIT_TARGET",
    ),
    Key(
        "ssh_config",
        Text(strip=True),
        "OpenSSH client config (like ssh -F); empty: ssh's own",
        default="",
        env="COCKPIT_SSH_CONFIG",
    ),
    Key(
        "dashboard_port",
        Whole(1, 65535, digits=True, says="must be a port number from 1 to 65535"),
        "the dashboard's port on the head",
        default=8265,
        env="COCKPIT_DASHBOARD_PORT",
    ),
    Key(
        "refresh.nodes",
        _SECONDS,
        "seconds between node polls once the cluster has its shape (every 2 s while nodes join)",
        default=5.0,
        env="COCKPIT_REFRESH_NODES",
    ),
    Key(
        "refresh.actors",
        _SECONDS,
        "seconds between actor lists while the Actors screen is shown",
        default=5.0,
        env="COCKPIT_REFRESH_ACTORS",
    ),
    Key(
        "refresh.paused",
        _SECONDS,
        "seconds between checks for paused workers (half that while the Debugger is shown)",
        default=10.0,
        env="COCKPIT_REFRESH_PAUSED",
    ),
    Key(
        "refresh.hang_check",
        _SECONDS,
        "seconds between the hang detector's looks at the running jobs",
        default=5.0,
        env="COCKPIT_REFRESH_HANG_CHECK",
    ),
    Key(
        "theme",
        Text(strip=True, choices=tuple(THEMES), says="must be one of {choices}"),
        "dark, light, or a Textual theme (ctrl+p lists them)",
        default="dark",
        env="COCKPIT_THEME",
    ),
    Key(
        "layout",
        Text(strip=True, pattern=NAME, says="must be a name of letters, digits, '-', '_' and '.'"),
        "the layout of the cockpit screen (key 0): layouts/NAME.yaml",
        default="default",
        env="COCKPIT_LAYOUT",
    ),
    Key(
        "hang_after",
        Duration(),
        "no progress for this long is a hang (90s, 10m, 1h)",
        default=600.0,
        env="COCKPIT_HANG_AFTER",
    ),
    Key(
        "alerts.command",
        Items(
            Text(min_length=1), says="must be a list: the program and its arguments, e.g. [notify-send, ray]"
        ),
        "a program run once per alert with the alert as JSON on its stdin (a list: program, arguments)",
        default=(),
    ),
    Key(
        "alerts.command_timeout",
        Number(1, 600, digits=True, says="must be a number of seconds from 1 to 600"),
        "seconds the alert command may take before it is ended",
        default=30.0,
        env="COCKPIT_ALERTS_COMMAND_TIMEOUT",
    ),
    Key(
        "alerts.notify",
        Text(strip=True, choices=NOTIFY_STYLES, says="must be one of {choices}"),
        "desktop notifications through the terminal: osc9, osc777, bell, off",
        default="osc9",
        env="COCKPIT_ALERTS_NOTIFY",
    ),
    Key(
        "alerts.remind_every",
        Duration(),
        "a lasting alert (a hang, work stuck) is told again this often while it lasts",
        default=1800.0,
        env="COCKPIT_ALERTS_REMIND_EVERY",
    ),
    Key(
        "alerts.pending_after",
        Duration(),
        "actors or placement groups pending this long make an alert (`stuck`)",
        default=600.0,
        env="COCKPIT_ALERTS_PENDING_AFTER",
    ),
    Key(
        "alerts.walltime_under",
        Duration(),
        "a Slurm job's walltime left under this makes an alert (`walltime`)",
        default=1800.0,
        env="COCKPIT_ALERTS_WALLTIME_UNDER",
    ),
    Key(
        "alerts.unreachable_after",
        Duration(),
        "`cockpit alerts` says a cluster cannot be seen once it lasted this long (`unreachable`)",
        default=120.0,
        env="COCKPIT_ALERTS_UNREACHABLE_AFTER",
    ),
    Key(
        "alerts.off",
        Items(Text(strip=True, choices=ALERT_RULES, says="{value} is not an alert rule ({choices})")),
        "alert rules turned off, by id (e.g. [job_succeeded, straggler])",
        default=(),
    ),
    Key(
        "alerts.interval",
        _SECONDS,
        "seconds between `cockpit alerts`' looks at each target's jobs",
        default=10.0,
        env="COCKPIT_ALERTS_INTERVAL",
    ),
    Key(
        "runs.hosts",
        Items(Text(strip=True, min_length=1), says="must be a list of targets, e.g. [head-node, slurm:grpo]"),
        "targets `cockpit runs` always lists (Host entries of ~/.ssh/config, slurm:NAME, http://...)",
        default=(),
    ),
    Key(
        "profile_dirs",
        Directories(Text(strip=True, min_length=1), says="must be a list of directories"),
        "more directories of profiles, searched after ./profiles and the config dir's",
        default=(),
        env="COCKPIT_PROFILE_DIRS",
    ),
    Key(
        "roles",
        ROLE_TABLE,
        "role-table additions: class name or glob -> role (win over roles.yaml)",
        default={},
    ),
    Key(
        "keys",
        Table(
            Text(
                scalars=True,
                strip=True,
                pattern=_KEY,
                says="must be key names joined by commas (e.g. 'x' or 'f2,ctrl+s')",
            ),
            key=Text(pattern=NAME, says="{value} is not a binding id (e.g. jobs.stop)"),
            shape="binding id: key, e.g. app.help: f1; `cockpit config keys` lists them",
        ),
        "key map: binding id -> key(s) (`cockpit config keys` lists the ids)",
        default={},
    ),
)
"""Every setting, by its dotted name (`refresh.actors`), in the order `cockpit config show` prints them."""
BY_NAME = {f.name: f for f in FIELDS}


GROUP_DOCS = {
    "refresh": "how often the cockpit looks again, in seconds",
    "alerts": "what makes an alert and where alerts go (the TUI and `cockpit alerts`)",
    "runs": "what `cockpit runs` lists besides the local cluster, your Slurm clusters and recent targets",
}


def _arranged(fields: tuple[Key, ...]) -> Record:
    """FIELDS as the file holds them: a dotted name is a key of a nested record."""
    top: list[Key] = []
    groups: dict[str, list[Key]] = {}
    for spec in fields:
        group, _, name = spec.name.rpartition(".")
        if not group:
            top.append(spec)
            continue
        if group not in groups:
            groups[group] = []
            top.append(Key(group, Record(()), ""))  # a placeholder, filled below
        groups[group].append(Key(name, spec.type, spec.doc, default=spec.default, env=spec.env))
    unknown = "not a setting (ignored; settings: " + ", ".join(f.name for f in fields) + ")"
    return Record(
        tuple(
            Key(
                key.name,
                Record(
                    tuple(groups[key.name]),
                    shape=", ".join(k.name for k in groups[key.name]),
                    unknown=unknown,
                    nulls=False,
                ),
                GROUP_DOCS.get(key.name, ""),
            )
            if key.name in groups
            else key
            for key in top
        ),
        doc="The ray-cockpit configuration file (config.yaml); `cockpit config show` prints it in effect.",
        says="expected a mapping of settings, not {kind}",
        unknown=unknown,
        nulls=False,
    )


CONFIG = _arranged(FIELDS)
"""The file's form: the checks `load` makes and the config JSON Schema come from it."""


def config_dir() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "ray-cockpit"


def config_path() -> Path:
    chosen = os.environ.get(CONFIG_ENV)
    return Path(chosen).expanduser() if chosen else config_dir() / "config.yaml"


@dataclass(frozen=True)
class Refresh:
    """The cadences under `refresh:`, in seconds."""

    nodes: float = 5.0
    actors: float = 5.0
    paused: float = 10.0
    hang_check: float = 5.0


@dataclass(frozen=True)
class AlertSettings:
    """The settings under `alerts:` (seconds for the durations)."""

    command: tuple[str, ...] = ()
    command_timeout: float = 30.0
    notify: str = "osc9"
    remind_every: float = 1800.0
    pending_after: float = 600.0
    walltime_under: float = 1800.0
    unreachable_after: float = 120.0
    off: frozenset[str] = frozenset()
    interval: float = 10.0


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
    def refresh(self) -> Refresh:
        return Refresh(
            **{
                name: float(self.values[f"refresh.{name}"])
                for name in ("nodes", "actors", "paused", "hang_check")
            }
        )

    @property
    def theme(self) -> str:
        """The Textual theme (`dark` in the file is `textual-dark`)."""
        return THEMES[self.values["theme"]]

    @property
    def layout(self) -> str:
        return str(self.values["layout"])

    @property
    def hang_after(self) -> float:
        return float(self.values["hang_after"])

    @property
    def alerts(self) -> AlertSettings:
        v = self.values
        return AlertSettings(
            command=tuple(v["alerts.command"]),
            command_timeout=float(v["alerts.command_timeout"]),
            notify=str(v["alerts.notify"]),
            remind_every=float(v["alerts.remind_every"]),
            pending_after=float(v["alerts.pending_after"]),
            walltime_under=float(v["alerts.walltime_under"]),
            unreachable_after=float(v["alerts.unreachable_after"]),
            off=frozenset(v["alerts.off"]),
            interval=float(v["alerts.interval"]),
        )

    @property
    def run_hosts(self) -> tuple[str, ...]:
        return tuple(self.values["runs.hosts"])

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


def defaults(path: Path | None = None) -> Config:
    """The configuration with every default and no file read (a fixture state, a test)."""
    values = {f.name: f.default for f in FIELDS}
    return Config(path=path or config_path(), values=values, origins=dict.fromkeys(values, "default"))


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


def _field_of(key: str) -> Key | None:
    """The setting a dotted key is (`refresh.actors`) or is inside of (`keys.jobs.stop`)."""
    return next((f for f in FIELDS if key == f.name or key.startswith(f"{f.name}.")), None)


def _problem(path: Path, exc: Invalid) -> str:
    spec = _field_of(exc.spot.key)
    if spec is None:  # not a setting, or the mapping of a group (`refresh: 5`)
        line = exc.line(path).rstrip(".")
        return line if "(ignored" in line else f"{line} (ignored)"
    named = exc.spot.key if exc.named else spec.name
    return f"{path}:{exc.spot.line}: {named}: {exc.message.rstrip('.')} (default {show(spec.default)} used)"


def _flatten(checked: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in checked.items():
        dotted = f"{prefix}{name}"
        if dotted in BY_NAME:
            flat[dotted] = value
        elif isinstance(value, Mapping):
            flat.update(_flatten(value, f"{dotted}."))
    return flat


def load(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """The configuration from PATH (default `config_path()`) and ENV (default `os.environ`); never raises
    for what a user wrote: each problem is a line in `problems` and its field keeps its default."""
    path = path or config_path()
    env = os.environ if env is None else env
    values = {f.name: f.default for f in FIELDS}
    origins = dict.fromkeys(values, "default")
    problems: list[str] = []
    lines: dict[str, int] = {}
    if path.exists():
        try:
            node, doc = read_yaml(path, ConfigError)
        except ConfigError as exc:
            problems.append(f"{str(exc).rstrip('.')} (the whole file ignored: defaults used)")
        else:
            lines = key_lines(node)
            found: list[Invalid] = []
            try:
                checked = CONFIG.check_each({} if doc is None else doc, Spot(node=node), found)
            except Invalid as exc:  # not a mapping at all
                problems.append(f"{exc.line(path)} (the whole file ignored: defaults used)")
                checked = {}
            problems += [_problem(path, exc) for exc in found]
            for name, value in _flatten(checked).items():
                values[name] = value
                origins[name] = f"{path}:{lines.get(name, 1)}"
    for spec in FIELDS:
        text = env.get(spec.env) if spec.env else None
        if text is None:
            continue
        try:
            values[spec.name] = spec.type.check(text, Spot(spec.name))
        except Invalid as exc:
            problems.append(f"{spec.env}={text!r}: {spec.name}: {exc.message.rstrip('.')} (ignored)")
            continue
        origins[spec.name] = f"env {spec.env}"
    return Config(path=path, values=values, origins=origins, problems=tuple(problems), lines=lines)


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
