"""Provides the role table's form: a mapping of worker class name (or glob) to RL role, as `roles.yaml` in
the config directory and `roles:` in `config.yaml` hold it (`actors.roles` applies it).

`ROLE_TABLE` checks one (keys of 1 to `MAX_KEY` characters, roles a printable word of 1 to `MAX_ROLE`,
lower-cased) and gives its JSON Schema; `read_role_table` reads `roles.yaml` into a `RoleTable`, or raises
one `RolesError` line naming file, line and key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit.core.config import schema
from cockpit.core.config.schema import Spot, Type, kind_of, shown
from cockpit.core.config.yaml_file import ConfigFileError

MAX_ROLE = 40
"""The longest role name."""
MAX_KEY = 200
"""The longest class name or glob of a role mapping."""


class RolesError(ConfigFileError):
    """A role table that cannot be used; the message (always one line) names file, line and key."""

    noun = "a role table"


@dataclass(frozen=True)
class RoleMap(Type):
    """Class name or glob (`MyRolloutEngine`, `"*Judge*"`) -> role (`rollout`); roles lower-cased. A
    problem names the key in its message (`the role of 'Bad' must be ...`)."""

    says: str = "must be a mapping of class name or glob to role (e.g. MyRolloutEngine: rollout)"

    def takes(self, value: Any) -> bool:
        return isinstance(value, Mapping)

    def check(self, value: Any, spot: Spot) -> dict[str, str]:
        if not self.takes(value):
            raise spot.invalid(f"{self.says}, not {kind_of(value)}.", named=False)
        roles: dict[str, str] = {}
        for key, role, key_node, value_node in schema.entries(value, spot.node):
            at = spot.entry(str(key), key_node, value_node)
            if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY:
                raise at.invalid(f"a class name or glob of 1 to {MAX_KEY} characters is needed", named=False)
            if (
                not isinstance(role, str)
                or not role.strip()
                or len(role) > MAX_ROLE
                or not role.isprintable()
            ):
                raise at.invalid(
                    f"the role of {shown(key)} must be a word of 1 to {MAX_ROLE} characters "
                    "(e.g. rollout, policy)",
                    named=False,
                )
            roles[key.strip()] = role.strip().lower()
        return roles

    def json(self) -> dict[str, Any]:
        return {
            "type": "object",
            "propertyNames": {"type": "string", "minLength": 1, "maxLength": MAX_KEY},
            "additionalProperties": {"type": "string", "minLength": 1, "maxLength": MAX_ROLE},
        }


ROLE_TABLE = RoleMap()
"""Both homes of role mappings: the checks and the roles JSON Schema come from it."""
ROLES_FILE = RoleMap(says="expected a mapping of class name or glob to role")
"""`roles.yaml` as a whole (its own message when it is not a mapping)."""


@dataclass(frozen=True)
class RoleTable:
    """The user's role mappings read from PATH."""

    path: Path
    roles: Mapping[str, str] = field(default_factory=dict)


def read_role_table(path: Path) -> RoleTable:
    """The role table in PATH (an empty file holds no mappings).

    Raises:
        RolesError: one line, `FILE:LINE: why`.
    """
    roles, _node = schema.load(path, ROLES_FILE, RolesError, empty={})
    return RoleTable(path=path, roles=roles)
