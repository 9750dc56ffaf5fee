"""Provides what the Actors screen's details pane knows about one actor, its runtime env masked.

`actor_details` turns an `ActorView` and what else the screen holds (its node, its placement group, the
GPUs telemetry maps to it) into an `ActorDetails`: typed values (ids and names as the cluster sent them,
times as posix seconds, the GPUs as (index, utilization) pairs, the bundles on its node as indices) for
the UI to word, cut and show as text. The runtime env is the one value given as text: masked here, as
lines free of control characters (a newline inside one of its values must not forge a line of its own).

The runtime env is the one field that holds secrets: jobs pass API keys and tokens to their workers in
`env_vars`, and a details pane is read over shoulders, shared in screenshots and pasted into tickets.
`mask_runtime_env` shows it with every value that looks like a credential replaced by `text.MASK`: by
its name (`WANDB_API_KEY`, anything with KEY, TOKEN, SECRET ... in it, at any depth) and by its shape
(a URL's `user:password@`, known token prefixes such as `hf_`, `ghp_`, `sk-`, `name=value` where the
name looks secret, and long hex or base64 blobs in env_vars values). It errs on the side of masking: a
non-secret like `TOKENIZERS_PARALLELISM` is masked too, which costs only its value on screen. A short
secret under an innocent name in a shape it does not know is not found: masking is a guard, not a vault.
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cockpit.core.actors.listing import ActorView
from cockpit.core.snapshots import NodeSnapshot, PlacementGroupRow
from cockpit.core.text import MASK, clean, shortened

SECRET_NAME_PARTS = (
    "KEY",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "AUTH",
    "COOKIE",
    "PRIVATE",
    "SIGNATURE",
    "SESSION",
    "WEBHOOK",
)
"""A name with one of these in it (any case) holds a secret: its value is never shown."""

SECRET_NAMES = frozenset(
    {"WANDB_API_KEY", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"}
)
"""Names known to hold secrets. SECRET_NAME_PARTS catches them all today; they are listed so that a part
dropped later (to unmask a harmless name) cannot unmask them."""

MAX_INPUT_CHARS = 64 * 1024
"""A runtime env longer than this is not read (real ones are a few KB): masking a hostile one of this size
costs up to about 0.1 s, and the pane could not show more than MAX_LINES of it anyway."""
MAX_LINES = 40
MAX_LINE_CHARS = 200
MAX_DEPTH = 6
"""Deeper levels show as `{…}` / `[…]`: a real runtime env is two or three levels deep."""

# Every pattern starts only where a run of its characters starts (a lookbehind, not `\b`), so a 64 KiB
# value of `a.a.a...` or `sk-sk-sk-...` costs linear time, not a scan from every position.
_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*://)[^/?#\s]*@")
"""`scheme://user:password@` (up to the authority's last `@`): the host stays, the userinfo goes."""
_TOKEN = re.compile(
    r"(?<![\w-])(?:"
    r"hf_[A-Za-z0-9]{16,}"  # Hugging Face
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_\w{16,}"  # GitHub
    r"|glpat-[\w-]{16,}"  # GitLab
    r"|sk-[\w-]{16,}"  # OpenAI, Anthropic and others
    r"|pypi-[\w-]{16,}"  # PyPI upload tokens
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?:AKIA|ASIA)[A-Z0-9]{16}"  # AWS access key ids
    r"|AIza[\w-]{30,}"  # Google API keys
    r"|eyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]*"  # JWTs
    r")"
)
_SCHEME_CREDENTIAL = re.compile(r"(?i)(?<![\w-])(bearer|basic)\s+[\w.~+/=-]{8,}")
_ASSIGNMENT = re.compile(r"(?<![\w.-])([\w.-]+)(\s*[=:]\s*|\s+)")
"""`name=`, `name: ` or `--flag ` inside a value; the name decides whether what follows is masked."""
_ASSIGNED_VALUE = re.compile(r"[\"']?[^\s,;&\"']+")
_BLOB = re.compile(r"[\w+/=-]{32,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_SECRET_PART = re.compile("|".join(SECRET_NAME_PARTS), re.IGNORECASE)
_SHORT_WORDS = ("PASS", "PWD", "PAT", "DSN")
_SECRET_WORD = re.compile(rf"(?i)(?<![A-Za-z0-9])(?:{'|'.join(_SHORT_WORDS)})(?![A-Za-z0-9])")


def is_secret_name(name: str) -> bool:
    """Whether a variable or key NAME says its value is a secret (`HF_TOKEN`, `db_password`, `DB_PWD`)."""
    if _SECRET_PART.search(name) or name.upper() in SECRET_NAMES:
        return True
    # Short words only as whole words of a longer name: `PASS` in BYPASS, and `PWD` alone (the shell's
    # working directory), are not secrets.
    return bool(_SECRET_WORD.search(name)) and name.upper() not in _SHORT_WORDS


def _is_blob(run: str) -> bool:
    """A hex digest-like or base64-like run: an API key (W&B keys are 40 hex) rather than a word or path.
    Identifiers and model names of that length are split by `_`, `-` or `/` far more often than random
    base64 is (2 in 64 characters)."""
    if _HEX.fullmatch(run):
        return True
    has_digit = any(c.isdigit() for c in run)
    has_letter = any(c.isalpha() for c in run)
    separators = sum(run.count(c) for c in "_-/+")
    return has_digit and has_letter and separators * 8 <= len(run)


def _mask_assignments(text: str) -> str:
    """TEXT with the value after a secret-looking `name=`, `name: ` or `--flag ` masked: a container's run
    options (`-e WANDB_API_KEY=...`), a URL's query (`?api_key=...`), a command line (`--hf-token ...`)."""
    parts: list[str] = []
    pos = 0
    for match in _ASSIGNMENT.finditer(text):
        name, separator = match.groups()
        if match.start() < pos or not (separator.strip() or name.startswith("-")):
            continue
        if not is_secret_name(name):  # first: matching the value runs to the next space (`x=x=x=...`)
            continue
        value = _ASSIGNED_VALUE.match(text, match.end())
        if value is None or value.group().startswith("-"):
            continue
        parts += [text[pos : match.end()], MASK]
        pos = value.end()
    return "".join(parts) + text[pos:] if parts else text


def _scrub(text: str, blobs: bool) -> str:
    """TEXT with every credential-shaped part replaced by MASK (BLOBS: long hex/base64 runs too)."""
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _TOKEN.sub(MASK, text)
    text = _SCHEME_CREDENTIAL.sub(rf"\1 {MASK}", text)
    text = _mask_assignments(text)
    if blobs:
        text = _BLOB.sub(lambda m: MASK if _is_blob(m.group()) else m.group(), text)
    return text


def _scalar(value: Any, blobs: bool) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return _scrub(clean(text), blobs)


def _node(pad: str, label: str, value: Any, depth: int, blobs: bool) -> Iterator[str]:
    """The lines of VALUE under LABEL (`key:` or `-`): YAML-like, two spaces a level."""
    if isinstance(value, (Mapping, list)) and not value:
        yield f"{pad}{label} {'{}' if isinstance(value, Mapping) else '[]'}"
    elif isinstance(value, Mapping):
        if depth >= MAX_DEPTH:
            yield f"{pad}{label} {{…}}"
            return
        yield f"{pad}{label}"
        for key, item in value.items():
            yield from _entry(str(key), item, depth + 1, blobs)
    elif isinstance(value, list):
        if depth >= MAX_DEPTH:
            yield f"{pad}{label} […]"
            return
        yield f"{pad}{label}"
        for item in value:
            yield from _node(pad + "  ", "-", item, depth + 1, blobs)
    else:
        yield f"{pad}{label} {_scalar(value, blobs)}"


def _entry(key: str, value: Any, depth: int, blobs: bool) -> Iterator[str]:
    pad = "  " * depth
    name = _scrub(clean(key), blobs=False)
    if is_secret_name(key):
        yield f"{pad}{name}: {MASK}"
    else:
        yield from _node(pad, f"{name}:", value, depth, blobs)


def _unreadable(why: str) -> str:
    """The note shown instead of a runtime env that cannot be read. It never quotes the text, which may
    hold a secret in a shape the masking cannot see once the structure is lost."""
    return f"(runtime env not readable: {why})"


def _parse(serialized: str) -> Mapping[str, Any] | str:
    """The runtime env as a mapping, or why not (a note)."""
    if len(serialized) > MAX_INPUT_CHARS:
        return _unreadable(f"{len(serialized):,} characters, more than the {MAX_INPUT_CHARS:,} read")
    try:
        env = json.loads(serialized)
    except RecursionError:
        return _unreadable("nested too deeply")
    except ValueError:  # JSONDecodeError, and ints past Python's digit limit
        return _unreadable("not JSON")
    if not isinstance(env, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(type(env))
        return _unreadable(f"{kind or 'a number'}, not an object")
    if not isinstance(env.get("env_vars") or {}, dict):
        # Secrets live here by name; without the names there is no telling which values they are.
        return _unreadable("env_vars is not an object of names to values")
    return env


def mask_runtime_env(serialized: str) -> str:
    """SERIALIZED (Ray's `serialized_runtime_env` JSON) as YAML-like lines, secrets replaced by MASK.

    One `key: value` a line, nested objects indented two spaces, list items as `- item`; at most
    MAX_LINES lines (the last then says `... N more`) of at most MAX_LINE_CHARS characters, each free of
    control characters (a newline in a value cannot forge a line). "" reads "not reported" (the dashboard
    sends it only with `detail=true`), `{}` "none". Never raises: text that is not a JSON object, or that
    is too large or too deep to read, gives a one-line note that does not quote it.
    """
    if not serialized.strip():
        return "not reported"
    env = _parse(serialized)
    if isinstance(env, str):
        return env
    if not env:
        return "none"
    lines = [
        shortened(line, MAX_LINE_CHARS)
        for key, value in env.items()
        for line in _entry(str(key), value, 0, blobs=key == "env_vars")
    ]
    if len(lines) > MAX_LINES:
        lines[MAX_LINES - 1 :] = [f"... {len(lines) - MAX_LINES + 1} more"]
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class ActorPlace:
    """The node an actor runs on, as the node table has it."""

    node_id: str
    host: str
    """Its host name: the node table's, else the actor listing's ("" when neither knows it)."""
    ip: str
    """Its IP; "" when the node is not in the node table."""
    listed: bool
    """Whether the node table has the node (one that left the cluster may be gone from it)."""
    alive: bool
    """Whether the node is alive; True when it is not listed (nothing says it died)."""


@dataclass(frozen=True, slots=True)
class GroupPlace:
    """An actor's placement group and the bundles on the actor's node."""

    group_id: str
    group: PlacementGroupRow | None
    """None: not in the placement group list (or the list was not read)."""
    bundles_here: tuple[int, ...] | None
    """The bundles placed on the actor's node: the State API does not say which one the actor took, these
    are the ones it can be in. None when the actor is not placed or the group is not known."""


@dataclass(frozen=True, slots=True)
class ActorDetails:
    """Everything the details pane shows about one actor, typed: the UI words, styles and cuts it.

    Strings are the cluster's, as it sent them (hostile text of any length); only `runtime_env` is
    already masked, cleaned and bounded.
    """

    actor_id: str
    class_name: str
    name: str
    repr_name: str
    role: str | None
    """Its RL role; None when unknown."""
    state: str
    death_cause: str | None
    """Why it died ("" when Ray gave no reason); None when it is not dead."""
    restarts: int
    job_id: str
    node: ActorPlace | None
    """None: not placed on a node."""
    pid: int | None
    started: float | None
    """When its worker (else the actor) started, posix seconds; None when unknown or not a finite time."""
    age: float | None
    """Seconds from `started` to the time asked about; None when either is unknown."""
    resources: Mapping[str, float]
    """What it asked for (`{}`: nothing)."""
    gpus: tuple[tuple[int, float | None], ...]
    """(GPU index, utilization % or None where unknown) of the GPUs telemetry maps to its process."""
    gpus_requested: float
    """Logical GPUs it asked for."""
    placement_group: GroupPlace | None
    """None: it has no placement group."""
    runtime_env: str
    """Its runtime env as `mask_runtime_env` shows it: secrets masked, YAML-like lines, or a note."""


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def actor_details(
    view: ActorView,
    *,
    node: NodeSnapshot | None,
    placement_group: PlacementGroupRow | None,
    gpus: Sequence[tuple[int, float | None]] = (),
    now: float | None = None,
) -> ActorDetails:
    """What the details pane shows about VIEW's actor (pure, never raises).

    NODE: the node it runs on (None: not placed, or not in the node table). PLACEMENT_GROUP: its group
    (None: it has none, or the group list was not read). GPUS: (GPU index, utilization % or None) for the
    GPUs telemetry maps to its process. NOW: posix seconds for its age (default: the clock).
    """
    actor = view.actor
    started = _finite(view.started or actor.start_time)
    clock = _finite(time.time() if now is None else now)
    place = None
    if actor.node_id:
        place = (
            ActorPlace(actor.node_id, view.host, "", listed=False, alive=True)
            if node is None
            else ActorPlace(actor.node_id, node.hostname or view.host, node.ip, listed=True, alive=node.alive)
        )
    group = None
    if actor.placement_group_id:
        here = None
        if placement_group is not None and actor.node_id:
            here = bundles_on_node(placement_group, actor.node_id)
        group = GroupPlace(actor.placement_group_id, placement_group, here)
    return ActorDetails(
        actor_id=actor.actor_id,
        class_name=actor.class_name,
        name=actor.name,
        repr_name=actor.repr_name,
        role=view.role,
        state=actor.state,
        death_cause=actor.death_cause if actor.state == "DEAD" else None,
        restarts=actor.num_restarts,
        job_id=actor.job_id,
        node=place,
        pid=actor.pid or None,
        started=started,
        age=clock - started if started is not None and clock is not None else None,
        resources=actor.required_resources,
        gpus=tuple((index, _finite(util)) for index, util in gpus),
        gpus_requested=actor.gpus,
        placement_group=group,
        runtime_env=mask_runtime_env(actor.runtime_env),
    )


def bundles_on_node(group: PlacementGroupRow, node_id: str) -> tuple[int, ...]:
    """The indices of GROUP's bundles placed on NODE_ID, in order."""
    return tuple(i for i, placed in enumerate(group.bundle_nodes) if placed == node_id)
