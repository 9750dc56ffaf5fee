"""Provides the cockpit's YAML files read safely (profiles, layouts, `config.yaml`, the role table): bytes to
a composed YAML node and its plain value, or one line; and `ConfigFileError`, the base of each kind's error.

Profiles are shared files (`./profiles` of whatever directory you stand in, a colleague's checkout), so
reading one costs little whatever it holds: at most `MAX_FILE_BYTES`, read only from a regular file;
UTF-8 only; one YAML document; no aliases (`*name`: a few hundred bytes of nested aliases expand to
gigabytes in anything that walks the value); no duplicate keys (YAML would keep the last one silently);
at most `MAX_DEPTH` levels of nesting; only plain types (strings, numbers, booleans, null, lists,
mappings: a date-like `2024-01-01` stays a string). The other kinds are read the same way. Every refusal
is one line, `FILE:LINE: what is wrong`, raised as the error of the file's kind (`ProfileError`,
`LayoutError`, `ConfigError`, `RolesError`: each a `ConfigFileError`). `unsafe_reason` says why a file or
directory found by search must not be trusted: another user can write it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.errors import CockpitError

MAX_FILE_BYTES = 256 * 1024
"""The largest file read (the shipped profiles are under 4 KiB)."""
MAX_DEPTH = 32
"""Levels of nested lists and mappings allowed (a profile needs about 5)."""
_PLAIN = {
    "tag:yaml.org,2002:null",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
}


def one_line(text: str) -> str:
    """`text` with every character a terminal would act on (newlines, escapes, separators) written as
    its Python escape, so a message built from file content stays one line."""
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


class ConfigFileError(CockpitError):
    """A file of the user's that cannot be used; the message (always one line) names file, line and key.
    Each kind of file has its own subclass; `noun` names the kind in the reader's messages."""

    noun = "a cockpit file"

    def __init__(self, message: str) -> None:
        super().__init__(one_line(message))


class _Refused(yaml.MarkedYAMLError):
    """Valid YAML that a cockpit file may not be (an alias, a duplicate key, deep nesting, an odd value)."""

    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem=problem, problem_mark=mark)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the limits above; the pure-Python one, so each limit is checked as the
    document is read, before anything is built from it."""

    yaml_constructors = {
        tag: constructor for tag, constructor in yaml.SafeLoader.yaml_constructors.items() if tag in _PLAIN
    }
    yaml_constructors[None] = yaml.SafeLoader.construct_undefined
    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag in _PLAIN]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: str, noun: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._noun = noun

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = event.start_mark
        if isinstance(event, yaml.AliasEvent):
            raise _Refused(
                f"YAML aliases (*{event.anchor}) are not allowed in {self._noun}: write the value out",
                mark,
            )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise _Refused(f"nested deeper than {MAX_DEPTH} levels", mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # e.g. `!!int x`, an integer of 5,000 digits
            reason = str(exc).split(";")[0]
            raise _Refused(f"cannot read this value ({reason})", node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        first: dict[Any, int] = {}
        for key_node, _value in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                seen = first.get(key)
            except TypeError:
                raise _Refused(
                    "a key must be a plain value, not a list or mapping", key_node.start_mark
                ) from None
            if seen is not None:
                shown = repr(key) if len(repr(key)) <= 60 else repr(key)[:57] + "..."
                raise _Refused(
                    f"duplicate key {shown} (first on line {seen}): give each key once", key_node.start_mark
                )
            first[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


def read_bytes(path: Path, error: type[ConfigFileError] = ConfigFileError) -> bytes:
    """At most MAX_FILE_BYTES of a regular file (never blocks on a FIFO or a device).

    Raises:
        ConfigFileError: ERROR (the kind's own): not a regular file, too big, unreadable.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise error(f"{path}:1: not a regular file.") from None
        raise error(f"{path}: cannot read ({exc.strerror}).") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{path}:1: not a regular file.")
        data = os.read(fd, MAX_FILE_BYTES + 1) if info.st_size <= MAX_FILE_BYTES else b""
        while data and len(data) <= MAX_FILE_BYTES and (more := os.read(fd, MAX_FILE_BYTES + 1 - len(data))):
            data += more
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror}).") from None
    finally:
        os.close(fd)
    if info.st_size > MAX_FILE_BYTES or len(data) > MAX_FILE_BYTES:
        raise error(
            f"{path}:1: over {MAX_FILE_BYTES // 1024} KiB: {error.noun} is a short YAML file, not this."
        )
    return data


def read_yaml(path: Path, error: type[ConfigFileError] = ConfigFileError) -> tuple[yaml.Node | None, Any]:
    """The file's composed YAML node (for line numbers) and its value.

    Raises:
        ConfigFileError: ERROR (the kind's own): "FILE:LINE: ..." for every limit in the module docstring
            and any YAML error.
    """
    data = read_bytes(path, error)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise error(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x}); save the file as UTF-8."
        ) from None
    loader: _StrictLoader | None = None
    try:
        loader = _StrictLoader(text.removeprefix("\ufeff"), error.noun)
        node = loader.get_single_node()
        value = loader.construct_document(node) if node is not None else None
    except _Refused as exc:
        at = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
        raise error(f"{path}:{at}: {exc.problem}.") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        at = mark.line + 1 if mark is not None else 1
        what = " ".join(str(part) for part in (exc.context, exc.problem) if part)
        raise error(f"{path}:{at}: not valid YAML ({' '.join(what.split())}).") from None
    except yaml.reader.ReaderError as exc:
        at = text[: exc.position].count("\n") + 1
        shown = repr(chr(exc.character)) if isinstance(exc.character, int) else repr(exc.character)
        raise error(f"{path}:{at}: not valid YAML (character {shown} is not allowed in YAML).") from None
    except yaml.YAMLError as exc:
        raise error(f"{path}:1: not valid YAML ({' '.join(str(exc).split())}).") from None
    finally:
        if loader is not None:
            loader.dispose()
    return node, value


def unsafe_reason(path: Path) -> str | None:
    """Why a profile file or directory found by search must be skipped: another user owns it, or group
    or others may write it (so anyone could change what a profile name launches). None: it is yours."""
    try:
        info = path.stat()
    except OSError as exc:
        return f"cannot check who may write it ({exc.strerror})"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    writers = [who for who, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if info.st_mode & bit]
    if writers:
        return f"writable by {' and '.join(writers)} (chmod go-w it if it is yours)"
    return None
