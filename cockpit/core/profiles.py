"""Provides job profiles: saved launches in YAML, loaded, validated and rendered into a job submission.

A profile names an entrypoint, Hydra-style overrides kept exactly as written, a runtime_env, the cluster
shape it expects and its metadata. Values may use `${python}` (the interpreter running the cockpit) and
`${cluster.nodes}` / `${cluster.gpus_per_node}`. A secret is `${env:NAME}`, read from the submitter's shell
at submit time, and only in a `runtime_env.env_vars` value (anywhere else it is refused: the entrypoint,
overrides and metadata are shown to everyone in the job list); it is shown masked everywhere. Safer still,
`secret_files:` sends the path of an owner-only file, never its content. Extra overrides (typed, or read
back from a job's metadata on resubmit) are never resolved. Errors name the file, the line and the key.
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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.errors import CockpitError
from cockpit.core.overrides import (
    SECRET_HOME,
    VARIABLE,
    Override,
    OverrideError,
    is_secret,
    parse_override,
    parse_overrides,
    secret_reference,
    variable_key,
    variables,
)
from cockpit.core.working_dir import ALWAYS_EXCLUDED, excludes_spec

MASK = "••••••"
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
    framework: str = "generic"
    post_mortem: bool = False
    secret_files: Mapping[str, str] = field(default_factory=dict)
    """Env var name -> absolute path of an owner-only file the job reads; the path is sent, not the file."""


def search_path() -> list[Path]:
    """Where profiles are found: ./profiles, the user's config dir, then the ones shipped with the cockpit."""
    config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config") / "ray-cockpit" / "profiles"
    shipped = Path(__file__).resolve().parents[2] / "profiles"
    seen: list[Path] = []
    for path in (Path.cwd() / "profiles", config, shipped):
        if path.is_dir() and path.resolve() not in [p.resolve() for p in seen]:
            seen.append(path)
    return seen


def _candidates() -> list[tuple[str, Path, Profile | ProfileError]]:
    """Every profile file on the search path, loaded, under the name it claims; first claim wins.

    The one precedence rule: `search_path()` order, then file name order in a directory. A file that
    fails to load claims its file name (what `name:` defaults to), so a broken `./profiles/demo.yaml`
    reports its error instead of silently handing over to the shipped `demo`.
    """
    claimed: dict[str, tuple[Path, Profile | ProfileError]] = {}
    for directory in search_path():
        for path in sorted(directory.glob("*.y*ml")):
            loaded: Profile | ProfileError
            try:
                loaded = load(path)
            except ProfileError as exc:
                loaded = exc
            name = loaded.name if isinstance(loaded, Profile) else path.stem
            claimed.setdefault(name, (path, loaded))
    return [(name, path, loaded) for name, (path, loaded) in claimed.items()]


def discover() -> tuple[list[Profile], list[str]]:
    """The profiles a name reaches (one per name, by `search_path()` precedence), and one line per file
    that failed to load."""
    found: list[Profile] = []
    problems: list[str] = []
    for _name, _path, loaded in _candidates():
        if isinstance(loaded, Profile):
            found.append(loaded)
        else:
            problems.append(str(loaded))
    return found, problems


def find(name_or_path: str) -> Path:
    """The file of a profile given by name (`demo`, as `discover` sees it) or path (`./my.yaml`).

    Raises:
        ProfileError: no such file or name; or the file that claims the name does not load.
    """
    candidate = Path(name_or_path)
    if candidate.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if candidate.is_file():
            return candidate
        raise ProfileError(f"{name_or_path}: no such profile file.")
    candidates = _candidates()
    for name, path, loaded in candidates:
        if name == name_or_path:
            if isinstance(loaded, ProfileError):
                raise loaded
            return path
    names = ", ".join(sorted(name for name, _path, _loaded in candidates)) or "none"
    raise ProfileError(f"no profile named {name_or_path!r} (known: {names}).")


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
        if not os.path.isabs(where):
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
    )


def _strings_in(value: Any) -> list[str]:
    """Every string in a YAML value (keys too), depth first; a number or a bool is its text."""
    if isinstance(value, Mapping):
        return [text for k, v in value.items() for text in (*_strings_in(k), *_strings_in(v))]
    if isinstance(value, list):
        return [text for item in value for text in _strings_in(item)]
    return [] if value is None else [str(value)]


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
        lines = path.read_text().splitlines()
    except OSError:
        return 1
    return next((n for n, line in enumerate(lines, start=1) if needle and needle in line), 1)
