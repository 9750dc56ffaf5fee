"""Provides an actor's runtime env as text to read, its secrets masked, for the Actors screen's details pane.

The runtime env is the one field that holds secrets: jobs pass API keys and tokens to their workers in
`env_vars`, and a details pane is read over shoulders, shared in screenshots and pasted into tickets.
`mask_runtime_env` shows it with every value that looks like a credential replaced by `profiles.MASK`: by
its name (`WANDB_API_KEY`, anything with KEY, TOKEN, SECRET ... in it, at any depth) and by its shape
(a URL's `user:password@`, known token prefixes such as `hf_`, `ghp_`, `sk-`, `name=value` where the
name looks secret, and long hex or base64 blobs in env_vars values). It errs on the side of masking: a
non-secret like `TOKENIZERS_PARALLELISM` is masked too, which costs only its value on screen. A short
secret under an innocent name in a shape it does not know is not found: masking is a guard, not a vault.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from cockpit.core.profiles import MASK
from cockpit.core.text import clean

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
        cut(line, MAX_LINE_CHARS)
        for key, value in env.items()
        for line in _entry(str(key), value, 0, blobs=key == "env_vars")
    ]
    if len(lines) > MAX_LINES:
        lines[MAX_LINES - 1 :] = [f"... {len(lines) - MAX_LINES + 1} more"]
    return "\n".join(lines)


def cut(text: str, limit: int) -> str:
    """TEXT, or its first LIMIT - 1 characters and "…"."""
    return text if len(text) <= limit else text[: limit - 1] + "…"
