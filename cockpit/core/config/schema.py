"""Provides the declarative schema of the cockpit's YAML files (profiles, layouts, `config.yaml`, the role
table): each file's keys declared once (name, type, required, what it does), and from that one declaration
both the checks the loader makes and the JSON Schema shipped for editors (`cockpit/schemas/`).

A type (`Text`, `Whole`, `Number`, `Duration`, `Items`, `Table`, `Record`, `OneOf`, `Anything`) checks a
value as `yaml_file.read_yaml` read it and returns it as the model wants it, or raises `Invalid` naming the
dotted key and the line (the key's own line; an item's own line in a list); `json()` says the same in JSON
Schema (draft-07, what yaml-language-server and most editors read). What JSON Schema cannot say (a regex
compiles, a path is absolute) is a type's `test`: the JSON Schema gives the shape, names and docs, and the
loader keeps the last word. `load(path, root, error)` reads one file and checks it whole; each kind's module
builds its frozen model from what it returns. Messages are templates filled by plain replacement (`{value}`,
`{choices}`, `{kind}`, `{key}`, `{keys}`, `{sorted}`), never `str.format`, so a brace in a file is text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cockpit.core.config.yaml_file import ConfigFileError, read_yaml
from cockpit.core.text import clean
from cockpit.core.units import parse_duration

JSON_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"


def kind_of(value: Any) -> str:
    """What a wrong value is, in a user's words: "a mapping", "a list", "true/false", "empty", "int"."""
    return {dict: "a mapping", list: "a list", str: "a string", bool: "true/false", type(None): "empty"}.get(
        type(value), type(value).__name__
    )


def shown(value: Any) -> str:
    """VALUE quoted for an error line, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def fill(template: str, **values: str) -> str:
    """TEMPLATE with each `{name}` replaced (plain replacement: a brace in a value stays a brace)."""
    for name, value in values.items():
        template = template.replace("{" + name + "}", value)
    return template


def _line(node: Any, default: int) -> int:
    return int(node.start_mark.line) + 1 if isinstance(node, yaml.Node) else default


@dataclass(frozen=True)
class Spot:
    """Where a value is in its file: its dotted key ("" for the whole file), the line an error names and
    its composed YAML node (None where there is none: a value from the environment)."""

    key: str = ""
    line: int = 1
    node: Any = None

    def entry(self, name: str, key_node: Any, value_node: Any) -> Spot:
        """The value under NAME of this mapping (its line: the key's)."""
        return Spot(f"{self.key}.{name}" if self.key else name, _line(key_node, self.line), value_node)

    def item(self, node: Any) -> Spot:
        """An item of this list: the same key, the item's own line."""
        return Spot(self.key, _line(node, self.line), node)

    def invalid(self, message: str, named: bool = True) -> Invalid:
        return Invalid(message, self, named)


class Invalid(ValueError):
    """A value its type does not take: MESSAGE, about the value at SPOT. `named`: the line names the key
    (False when the message names it itself)."""

    def __init__(self, message: str, spot: Spot, named: bool = True) -> None:
        super().__init__(message)
        self.message = message
        self.spot = spot
        self.named = named

    def line(self, path: Path | str) -> str:
        """`FILE:LINE: key: message` (without the key for the whole file or when the message names it)."""
        head = f"{path}:{self.spot.line}"
        if self.named and self.spot.key:
            return f"{head}: {self.spot.key}: {self.message}"
        return f"{head}: {self.message}"


def entries(value: Mapping[Any, Any], node: Any) -> list[tuple[Any, Any, Any, Any]]:
    """(key, value, key node, value node) of a mapping. Nodes pair by position: the loader refuses
    duplicate keys, so the mapping holds one entry per pair of nodes, in the file's order."""
    pairs = node.value if isinstance(node, yaml.MappingNode) and len(node.value) == len(value) else None
    return [
        (key, item, *(pairs[index] if pairs is not None else (None, None)))
        for index, (key, item) in enumerate(value.items())
    ]


def _items(value: list[Any], node: Any) -> list[tuple[Any, Any]]:
    nodes = node.value if isinstance(node, yaml.SequenceNode) and len(node.value) == len(value) else None
    return [(item, nodes[index] if nodes is not None else None) for index, item in enumerate(value)]


def or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """SCHEMA that also takes null (a key written with no value, which the loader reads as absent)."""
    kind = schema.get("type")
    if kind is None:
        return {"anyOf": [schema, {"type": "null"}]}
    nullable = {**schema, "type": [*([kind] if isinstance(kind, str) else kind), "null"]}
    if "enum" in schema:
        nullable["enum"] = [*schema["enum"], None]
    return nullable


class Type:
    """What a value may be: `check` takes one (or raises Invalid), `json` says it in JSON Schema."""

    def check(self, value: Any, spot: Spot) -> Any:
        raise NotImplementedError

    def json(self) -> dict[str, Any]:
        raise NotImplementedError

    def takes(self, value: Any) -> bool:
        """Whether VALUE is of the kind this type checks (`OneOf` picks the type by it)."""
        return True


@dataclass(frozen=True)
class Anything(Type):
    """Any value, passed on as read (a runtime_env field Ray checks itself)."""

    def check(self, value: Any, spot: Spot) -> Any:
        return value

    def json(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True)
class Text(Type):
    """A string. SAYS (with `{value}`, `{choices}`) replaces the message for a string that is not one of
    CHOICES, does not match PATTERN or has the wrong length."""

    choices: Sequence[str] = ()
    pattern: str = ""
    """A regex the whole (stripped) text must match; written into the JSON Schema as is."""
    min_length: int = 0
    max_length: int = 0
    """0: no limit."""
    printable: bool = False
    scalars: bool = False
    """A number or true/false is taken as its text (an override `- 5`, a metadata value `1`)."""
    strip: bool = False
    test: Callable[[str], str | None] | None = None
    """A further check: the problem (a message), or None."""
    says: str = ""

    def takes(self, value: Any) -> bool:
        return isinstance(value, str) or (self.scalars and isinstance(value, (int, float)))

    def check(self, value: Any, spot: Spot) -> str:
        if not self.takes(value):
            raise spot.invalid(f"must be a string, not {kind_of(value)}.")
        text = value if isinstance(value, str) else str(value)
        if self.strip:
            text = text.strip()
        problem = ""
        if self.choices and text not in self.choices:
            problem = "must be one of {choices}."
        elif self.pattern and not re.fullmatch(self.pattern, text):
            problem = f"must match {self.pattern}."
        elif len(text) < self.min_length or (self.max_length and len(text) > self.max_length):
            problem = f"must be {self.min_length} to {self.max_length or 'any number of'} characters."
        elif self.printable and not text.isprintable():
            problem = "must be printable characters."
        if problem:
            raise spot.invalid(fill(self.says or problem, value=shown(text), choices=", ".join(self.choices)))
        if self.test is not None:
            problem = self.test(text) or ""
            if problem:
                raise spot.invalid(problem)
        return text

    def json(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": ["string", "number", "boolean"] if self.scalars else "string"}
        if self.choices:
            schema["enum"] = list(self.choices)
        if self.pattern:
            schema["pattern"] = f"^(?:{self.pattern})$"
        if self.min_length:
            schema["minLength"] = self.min_length
        if self.max_length:
            schema["maxLength"] = self.max_length
        return schema


@dataclass(frozen=True)
class Whole(Type):
    """A whole number from MINIMUM to MAXIMUM; with DIGITS a string of digits too (a value from the
    environment). SAYS (with `{value}`) replaces the message."""

    minimum: int = 0
    maximum: int | None = None
    digits: bool = False
    says: str = ""

    def takes(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def check(self, value: Any, spot: Spot) -> int:
        if self.digits and isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if (
            not self.takes(value)
            or value < self.minimum
            or (self.maximum is not None and value > self.maximum)
        ):
            raise spot.invalid(fill(self.says or "must be a whole number, not {value}.", value=shown(value)))
        return int(value)

    def json(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "integer", "minimum": self.minimum}
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


@dataclass(frozen=True)
class Number(Type):
    """A number from MINIMUM to MAXIMUM; with DIGITS a string that reads as one too. SAYS (with
    `{value}`) replaces the message."""

    minimum: float = 0
    maximum: float | None = None
    digits: bool = False
    says: str = ""

    def takes(self, value: Any) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def check(self, value: Any, spot: Spot) -> float:
        number = value
        if self.digits and isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                number = None
        if (
            not self.takes(number)
            or not number >= self.minimum
            or (self.maximum is not None and not number <= self.maximum)
        ):
            raise spot.invalid(fill(self.says or "must be a number, not {value}.", value=shown(value)))
        return float(number)

    def json(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "number", "minimum": self.minimum}
        if self.maximum is not None:
            schema["maximum"] = self.maximum
        return schema


_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_DURATION_PATTERN = (
    rf"^\s*(?:{_NUMBER}|(?:{_NUMBER}\s*[hH])?\s*(?:{_NUMBER}\s*[mM])?\s*(?:{_NUMBER}\s*[sS])?)\s*$"
)
"""What `units.parse_duration` reads, for editors (it has the last word: zero, over 7 days)."""


@dataclass(frozen=True)
class Duration(Type):
    """Seconds, from `90s`, `10m`, `1h30m` or a number of seconds (`units.parse_duration`)."""

    def takes(self, value: Any) -> bool:
        return isinstance(value, (str, int, float)) and not isinstance(value, bool)

    def check(self, value: Any, spot: Spot) -> float:
        if not self.takes(value):
            raise spot.invalid(f"must be a duration such as 10m or 90s, not {kind_of(value)}.")
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            raise spot.invalid(str(exc)) from None

    def json(self) -> dict[str, Any]:
        return {
            "anyOf": [
                {"type": "string", "pattern": _DURATION_PATTERN},
                {"type": "number", "exclusiveMinimum": 0},
            ]
        }


@dataclass(frozen=True)
class Items(Type):
    """A list of ITEM. An item's own problem is numbered (`item 2 must be a string`) unless not NUMBERED.
    EMPTY: the message for an empty list, when one is not allowed."""

    item: Type
    numbered: bool = True
    empty: str = ""
    says: str = ""

    def takes(self, value: Any) -> bool:
        return isinstance(value, list)

    def check(self, value: Any, spot: Spot) -> tuple[Any, ...]:
        if not self.takes(value):
            raise spot.invalid(self.says or f"must be a list, not {kind_of(value)}.")
        if not value and self.empty:
            raise spot.invalid(self.empty)
        checked = []
        for index, (item, node) in enumerate(_items(value, spot.node)):
            try:
                checked.append(self.item.check(item, spot.item(node)))
            except Invalid as exc:
                if not self.numbered or exc.spot.key != spot.key:  # a deeper key names itself
                    raise
                raise Invalid(f"item {index + 1} {exc.message}", exc.spot, exc.named) from None
        return tuple(checked)

    def json(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "array", "items": self.item.json()}
        if self.empty:
            schema["minItems"] = 1
        return schema


@dataclass(frozen=True)
class Table(Type):
    """A mapping of free keys (KEY) to VALUEs: `metadata`, `env_vars`. SHAPE says its form in the message
    for a value that is not a mapping (`must be a mapping (NAME: value), not a list.`)."""

    value: Type
    key: Type = Text(scalars=True)
    shape: str = ""

    def takes(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def check(self, value: Any, spot: Spot) -> dict[Any, Any]:
        if not self.takes(value):
            form = f" ({self.shape})" if self.shape else ""
            raise spot.invalid(f"must be a mapping{form}, not {kind_of(value)}.")
        checked: dict[Any, Any] = {}
        for key, item, key_node, value_node in entries(value, spot.node):
            at = spot.entry(str(key), key_node, value_node)
            checked[self.key.check(key, at)] = self.value.check(item, at)
        return checked

    def json(self) -> dict[str, Any]:
        return {"type": "object", "propertyNames": self.key.json(), "additionalProperties": self.value.json()}


@dataclass(frozen=True)
class Key:
    """One key of a `Record`: its name, type and what it does (the JSON Schema's description)."""

    name: str
    type: Type
    doc: str
    required: bool = False
    missing: str = ""
    """What an absent required key says ("" : `missing.`)."""
    default: Any = None
    """The value when absent, where the model has one (written into the JSON Schema)."""
    env: str | None = None
    """The environment variable that overrides it (`config.yaml` only)."""


@dataclass(frozen=True)
class Record(Type):
    """A mapping of known KEYS. An unknown key says UNKNOWN (with `{key}`, `{keys}` in declared order,
    `{sorted}`), after the key unless not UNKNOWN_NAMED; a value that is not a mapping says SAYS (with
    `{kind}`) or `must be a mapping (SHAPE), not ...`. With NULLS, a key written without a value counts as
    absent."""

    keys: tuple[Key, ...]
    doc: str = ""
    shape: str = ""
    says: str = ""
    unknown: str = "unknown key (expected one of {keys})."
    unknown_named: bool = True
    nulls: bool = True

    def takes(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def check(self, value: Any, spot: Spot) -> dict[str, Any]:
        return self.check_each(value, spot, None)

    def check_each(self, value: Any, spot: Spot, problems: list[Invalid] | None) -> dict[str, Any]:
        """The checked values by key name. With PROBLEMS, a wrong key is left out and its problem added
        (the rest still counts, nested records too); without, the first problem raises. Unknown keys are
        looked at first: a typo is the likeliest mistake, and it explains the others."""
        if not self.takes(value):
            form = f" ({self.shape})" if self.shape else ""
            message = self.says or "must be a mapping{form}, not {kind}."
            raise spot.invalid(fill(message, form=form, kind=kind_of(value)))
        known = {key.name: key for key in self.keys}
        written = [
            (str(key), item, spot.entry(str(key), key_node, value_node))
            for key, item, key_node, value_node in entries(value, spot.node)
        ]
        for name, _item, at in written:
            if name not in known:
                names = [key.name for key in self.keys]
                message = fill(
                    self.unknown, key=shown(name), keys=", ".join(names), sorted=", ".join(sorted(names))
                )
                if problems is None:
                    raise at.invalid(message, self.unknown_named)
                problems.append(at.invalid(message, self.unknown_named))
        checked: dict[str, Any] = {}
        for name, item, at in written:
            key = known.get(name)
            if key is None or (item is None and self.nulls):
                continue
            try:
                if problems is not None and isinstance(key.type, Record):
                    checked[name] = key.type.check_each(item, at, problems)
                else:
                    checked[name] = key.type.check(item, at)
            except Invalid as exc:
                if problems is None:
                    raise
                problems.append(exc)
        spots = {name: at for name, _item, at in written}
        for key in self.keys:
            if not key.required or key.name in checked:
                continue
            if problems is not None:
                if key.name not in spots:  # a wrong value is listed already
                    problems.append(spot.entry(key.name, None, None).invalid(key.missing or "missing."))
                continue
            # Absent: the record's line; written without a value: the key's.
            raise spots.get(key.name, spot.entry(key.name, None, None)).invalid(key.missing or "missing.")
        return checked

    def json(self) -> dict[str, Any]:
        properties: dict[str, Any] = {}
        for key in self.keys:
            schema = key.type.json()
            if self.nulls and not key.required:
                schema = or_null(schema)
            described: dict[str, Any] = {"description": key.doc, **schema}
            if key.default is not None and key.default != "" and key.default != () and key.default != {}:
                described["default"] = key.default
            properties[key.name] = described
        schema = {"type": "object", "properties": properties, "additionalProperties": False}
        required = [key.name for key in self.keys if key.required]
        if required:
            schema["required"] = required
        if self.doc:
            schema = {"description": self.doc, **schema}
        return schema


@dataclass(frozen=True)
class OneOf(Type):
    """The first of OPTIONS that takes the value's kind checks it (its own messages); a value none takes
    says SAYS (with `{kind}`)."""

    options: tuple[Type, ...]
    says: str

    def takes(self, value: Any) -> bool:
        return any(option.takes(value) for option in self.options)

    def check(self, value: Any, spot: Spot) -> Any:
        for option in self.options:
            if option.takes(value):
                return option.check(value, spot)
        raise spot.invalid(fill(self.says, kind=kind_of(value)))

    def json(self) -> dict[str, Any]:
        return {"anyOf": [option.json() for option in self.options]}


def regex_problem(text: str) -> str | None:
    """Why TEXT is not a regular expression Python compiles (None: it is one)."""
    try:
        re.compile(text)
    except re.error as exc:
        where = "" if exc.pos is None else f" at position {exc.pos}"
        return f"not a regular expression: {clean(exc.msg)}{where}."
    except (OverflowError, RecursionError) as exc:  # `a{99999999999}`, thousands of nested groups
        return f"not a regular expression Python takes: {exc}."
    return None


def load(
    path: Path, root: Type, error: type[ConfigFileError], empty: Any = None
) -> tuple[Any, yaml.Node | None]:
    """PATH read (`yaml_file.read_yaml`) and checked against ROOT: the checked value and the composed
    node (for the lines of what the caller checks further). EMPTY (when not None) stands for an empty file.

    Raises:
        ConfigFileError: ERROR, one line `FILE:LINE: key: what is wrong`.
    """
    node, doc = read_yaml(path, error)
    if doc is None and empty is not None:
        return empty, node
    try:
        return root.check(doc, Spot(node=node)), node
    except Invalid as exc:
        raise error(exc.line(path)) from None


def json_schema(root: Type, title: str, description: str) -> dict[str, Any]:
    """The JSON Schema document of a file whose whole value is ROOT."""
    body = root.json()
    body.pop("description", None)
    return {"$schema": JSON_SCHEMA_DRAFT, "title": title, "description": description, **body}
