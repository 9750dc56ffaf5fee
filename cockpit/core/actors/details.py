"""Provides what the Actors screen's details pane says about one actor, its runtime env masked.

`actor_details` turns an `ActorView` and what else the screen holds (its node, its placement group, the
GPUs telemetry maps to it) into (label, value) pairs in reading order. Values are plain text for the UI
to show as text, not markup; each is cut at a few hundred characters, as any cluster string may be huge.
Only the runtime env, the one value of several lines, is cleaned of control characters here: a newline
inside one of its values must not forge a line of its own.

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
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from cockpit.core.actors.listing import ActorView
from cockpit.core.actors.pending import format_bundle
from cockpit.core.snapshots import NodeSnapshot, PlacementGroupRow
from cockpit.core.text import MASK, clean
from cockpit.core.units import duration

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
MAX_VALUE_CHARS = 300
"""Any other value is cut here (a 10 MB class name from the cluster must not freeze the pane)."""
MAX_PART_CHARS = 80
"""A name inside a value of several parts (a node's host, a group's name) is cut here, so that a long one
does not push the rest of the value past MAX_VALUE_CHARS."""

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
        cut(line, MAX_LINE_CHARS)
        for key, value in env.items()
        for line in _entry(str(key), value, 0, blobs=key == "env_vars")
    ]
    if len(lines) > MAX_LINES:
        lines[MAX_LINES - 1 :] = [f"... {len(lines) - MAX_LINES + 1} more"]
    return "\n".join(lines)


def cut(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """TEXT, or its first LIMIT - 1 characters and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def actor_details(
    view: ActorView,
    *,
    node: NodeSnapshot | None,
    placement_group: PlacementGroupRow | None,
    gpus: Sequence[tuple[int, float | None]] = (),
    now: float | None = None,
) -> tuple[tuple[str, str], ...]:
    """(label, value) pairs for the details pane of VIEW's actor, in reading order (pure, never raises).

    NODE: the node it runs on (None: not placed, or not in the node table). PLACEMENT_GROUP: its group
    (None: it has none, or the group list was not read). GPUS: (GPU index, utilization % or None) for the
    GPUs telemetry maps to its process. NOW: posix seconds for its age (default: the clock).
    """
    actor = view.actor
    pairs: list[tuple[str, str]] = [
        ("Actor id", cut(actor.actor_id) or "unknown"),
        ("Class", cut(actor.class_name) or "unknown"),
        ("Name", cut(actor.name) or "none"),
    ]
    if actor.repr_name:
        pairs.append(("Repr name", cut(actor.repr_name)))
    pairs += [
        ("Role", cut(view.role) if view.role else "unknown (class shown)"),
        ("State", cut(actor.state) or "unknown"),
    ]
    if actor.state == "DEAD":
        pairs.append(("Death cause", cut(actor.death_cause) or "none given"))
    pairs += [
        ("Restarts", str(actor.num_restarts)),
        ("Job", cut(actor.job_id) or "unknown"),
        ("Node", node_text(actor.node_id, view.host, node)),
        ("PID", str(actor.pid) if actor.pid else "none"),
        ("Started", started_text(view.started or actor.start_time, time.time() if now is None else now)),
        ("Resources", cut(format_bundle(actor.required_resources)) if actor.required_resources else "none"),
        ("GPUs", cut(gpus_text(gpus, actor.gpus))),
        ("Placement group", placement_group_text(actor.placement_group_id, actor.node_id, placement_group)),
        ("Runtime env", mask_runtime_env(actor.runtime_env)),
    ]
    return tuple(pairs)


def short_id(ident: str) -> str:
    """The first 8 characters: Ray's actor, node and group ids differ there (the tail is the job id)."""
    return ident[:8]


def node_text(node_id: str, host: str, node: NodeSnapshot | None) -> str:
    """ "host · IP · short id", "(dead)" after a dead node; "not placed" without a node id."""
    if not node_id:
        return "not placed"
    if node is None:
        parts = [cut(host, MAX_PART_CHARS), short_id(node_id), "(not in the node table)"]
        return " · ".join(part for part in parts if part)
    name = node.hostname or host
    parts = [
        cut(name, MAX_PART_CHARS),
        cut(node.ip, MAX_PART_CHARS) if node.ip != name else "",
        short_id(node_id),
    ]
    text = " · ".join(part for part in parts if part)
    return text if node.alive else f"{text} (dead)"


def started_text(started: float | None, now: float) -> str:
    """ "12m05s ago (2026-11-26 14:03:21)", in local time; "unknown" without a readable time."""
    if started is None or not math.isfinite(started) or not math.isfinite(now):
        return "unknown"
    try:
        clock = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started))
    except (OverflowError, OSError, ValueError):
        return "unknown"
    return f"{duration(now - started)} ago ({clock})"


def gpus_text(gpus: Sequence[tuple[int, float | None]], requested: float) -> str:
    """ "0: 87%, 1: N/A" from telemetry; "logical only" when the actor asks for GPUs no telemetry maps
    to it (`ray start --num-gpus` without hardware, or the reporter has not seen its process yet)."""
    if gpus:
        return ", ".join(f"{index}: {_percent(util)}" for index, util in gpus)
    return f"logical only ({requested:g} requested)" if requested > 0 else "none"


def _percent(util: float | None) -> str:
    return f"{util:.0f}%" if util is not None and math.isfinite(util) else "N/A"


def placement_group_text(group_id: str, node_id: str, group: PlacementGroupRow | None) -> str:
    """ "my_pg (5b7a2df6) · CREATED · 2 x {CPU: 0.1} · bundles #0, #1 on this node".

    The State API does not say which bundle an actor took; the bundles placed on its node are the ones
    it can be in.
    """
    if not group_id:
        return "none"
    if group is None:
        return f"{short_id(group_id)} (not in the placement group list)"
    label = f"{cut(group.name, MAX_PART_CHARS)} ({short_id(group_id)})" if group.name else short_id(group_id)
    shapes = Counter(format_bundle(bundle) for bundle in group.bundles)
    shown = ", ".join(f"{n} x {shape}" for shape, n in shapes.items())
    parts = [label, cut(group.state, MAX_PART_CHARS) or "unknown", cut(shown, MAX_PART_CHARS)]
    if node_id:
        parts.append(bundles_on_node(group, node_id))
    return cut(" · ".join(part for part in parts if part))


def bundles_on_node(group: PlacementGroupRow, node_id: str) -> str:
    """ "bundles #0, #2 on this node", runs of three or more shortened ("#0-#7"); "no bundle on this node"."""
    indices = [i for i, placed in enumerate(group.bundle_nodes) if placed == node_id]
    if not indices:
        return "no bundle on this node"
    runs: list[list[int]] = []
    for index in indices:
        if runs and index == runs[-1][-1] + 1:
            runs[-1].append(index)
        else:
            runs.append([index])
    text = ", ".join(
        f"#{run[0]}-#{run[-1]}" if len(run) > 2 else ", ".join(f"#{i}" for i in run) for run in runs
    )
    return f"{'bundle' if len(indices) == 1 else 'bundles'} {cut(text)} on this node"
