"""Provides the one grammar of actor and node selectors: what `--actor` and `--node` take (`cockpit logs`,
`cockpit stacks`) and what a `node:` filter term means (`cockpit actors`, the Actors screen).

- An actor selector is an actor id, the start of one, or an actor's name (exact, case as written).
- A node selector is a node id, the start of one, an IP address, or a host name (any case) or the start
  of one.

A whole id, a name, an IP or a whole host name wins over the start of one: `gpu1` is the host gpu1 even
where gpu10 exists. When several things still match and exactly one of them is alive, that one is
meant (a name that a new actor took over from a dead one, a host whose node died and came back).
Otherwise the selector is ambiguous: `SelectorError`, one line that lists the candidates. A selector that
names nothing is one line too. Selector text and cluster text are shown cleaned (never a second line,
never an escape).

The matching is pure (`actor_candidates`, `pick_actor`, `node_candidates`, `pick_node`); `find_actor`
and `find_node` ask the dashboard for as little as the selector allows, then match here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from cockpit.core.cluster.errors import SelectorError
from cockpit.core.snapshots import ActorRow, NodeSnapshot
from cockpit.core.text import clean

if TYPE_CHECKING:
    from cockpit.core.cluster.dashboard import DashboardClient

ACTOR_SELECTOR = "an actor id, the start of one, or an actor's name"
"""What an actor selector accepts, in the words of the help texts and the errors."""
NODE_SELECTOR = "a node id or the start of one, an IP, or a host name or the start of one"
"""What a node selector accepts, in the words of the help texts and the errors."""

ACTOR_ID_LENGTH = 32
"""Hex digits of a Ray actor id (16 bytes)."""
SEARCH_LIMIT = 10_000
"""Actors listed at most to find the start of an id (the dashboard refuses more)."""
SHOWN = 5
"""Candidates an ambiguous selector's error names (then "and N more")."""

_HEX = re.compile(r"[0-9a-fA-F]+")

T = TypeVar("T")


class NodeNames(Protocol):
    """What names a node: a `NodeSnapshot`, or whatever else knows a node's id, IP and host name."""

    @property
    def node_id(self) -> str: ...

    @property
    def ip(self) -> str: ...

    @property
    def hostname(self) -> str: ...


N = TypeVar("N", bound=NodeNames)


def _text(selector: str, what: str) -> str:
    """SELECTOR without surrounding space; an empty one is an error."""
    text = selector.strip()
    if not text:
        accepted = ACTOR_SELECTOR if what == "actor" else NODE_SELECTOR
        raise SelectorError(f"an empty {what} selector: give {accepted}.")
    return text


def _shown(selector: str) -> str:
    """SELECTOR as an error quotes it: one line, cleaned, at most 80 characters."""
    return repr(clean(selector)[:80])


def _tiers(exact: Sequence[T], starts: Sequence[T]) -> tuple[T, ...]:
    return tuple(exact) if exact else tuple(starts)


def _one(
    found: Sequence[T],
    alive: Callable[[T], bool],
    describe: Callable[[T], str],
    selector: str,
    what: str,
    hint: str,
) -> T:
    """The one of FOUND that is meant, or the ambiguity as one line."""
    if len(found) == 1:
        return found[0]
    living = [item for item in found if alive(item)]
    if len(living) == 1:
        return living[0]
    listed = living or found
    names = ", ".join(describe(item) for item in listed[:SHOWN])
    more = f" and {len(listed) - SHOWN} more" if len(listed) > SHOWN else ""
    raise SelectorError(f"{_shown(selector)} matches {len(listed)} {what}s: {names}{more}; {hint}.")


# -- actors ------------------------------------------------------------------------------------------------


def actor_candidates(selector: str, actors: Iterable[ActorRow]) -> tuple[ActorRow, ...]:
    """The actors SELECTOR names: those whose id or name it is, else those whose id it starts."""
    text = _text(selector, "actor")
    lower = text.lower()
    actors = tuple(actors)
    exact = [a for a in actors if a.actor_id.lower() == lower or a.name == text]
    hex_start = _HEX.fullmatch(text) is not None
    return _tiers(exact, [a for a in actors if hex_start and a.actor_id.lower().startswith(lower)])


def _describe_actor(actor: ActorRow) -> str:
    state = "" if actor.state == "ALIVE" else f", {clean(actor.state)}"
    return f"{clean(actor.actor_id[:12])} (job {clean(actor.job_id)}{state})"


def pick_actor(
    selector: str, actors: Iterable[ActorRow], alive_only: bool = False, searched_all: bool = True
) -> ActorRow:
    """The one actor SELECTOR names among ACTORS (only the alive ones with ALIVE_ONLY).

    SEARCHED_ALL: False when ACTORS is only the first of the cluster's actors (said when none matches).

    Raises:
        SelectorError: none, or several (and not exactly one of them alive), match.
    """
    if alive_only:
        actors = [a for a in actors if a.state == "ALIVE"]
    found = actor_candidates(selector, actors)
    if not found:
        alive = "alive " if alive_only else ""
        among = "" if searched_all else f" among the first {SEARCH_LIMIT} actors"
        raise SelectorError(f"no {alive}actor {_shown(selector)}{among} ({ACTOR_SELECTOR}).")
    return _one(
        found, lambda a: a.state == "ALIVE", _describe_actor, selector, "actor", "give more of its id"
    )


async def find_actor(client: DashboardClient, selector: str, alive_only: bool = False) -> ActorRow:
    """The actor SELECTOR names, asking the dashboard for as few actors as it can: by id or by name
    where the selector can only be one; the list (at most SEARCH_LIMIT) where it may be an id's start.

    Raises:
        SelectorError: none, or several, match (`pick_actor`).
        DashboardError: the dashboard did not answer.
    """
    text = _text(selector, "actor")
    alive = [("state", "=", "ALIVE")] if alive_only else []
    if len(text) == ACTOR_ID_LENGTH and _HEX.fullmatch(text):
        listing = await client.actors(filters=[("actor_id", "=", text.lower()), *alive], limit=10)
    elif _HEX.fullmatch(text):  # the start of an id, or a name made of hex digits
        listing = await client.actors(filters=alive, limit=SEARCH_LIMIT)
    else:  # only a name (the dashboard's `=` ignores case: pick_actor does not)
        listing = await client.actors(filters=[("name", "=", text), *alive], limit=SEARCH_LIMIT)
    return pick_actor(text, listing.rows, alive_only, searched_all=listing.meta.complete)


# -- nodes -------------------------------------------------------------------------------------------------


def node_candidates(selector: str, nodes: Iterable[N]) -> tuple[N, ...]:
    """The nodes SELECTOR names: those whose id, IP or host name it is, else those whose id or host name
    it starts."""
    text = _text(selector, "node")
    lower = text.lower()
    nodes = tuple(nodes)
    exact = [n for n in nodes if lower in (n.node_id.lower(), n.hostname.lower()) or n.ip == text]
    hex_start = _HEX.fullmatch(text) is not None
    starts = [
        n
        for n in nodes
        if (hex_start and n.node_id.lower().startswith(lower)) or n.hostname.lower().startswith(lower)
    ]
    return _tiers(exact, starts)


def _describe_node(node: NodeSnapshot) -> str:
    state = "" if node.alive else f", {clean(node.state)}"
    where = " ".join(clean(part) for part in dict.fromkeys((node.hostname, node.ip)) if part)
    return f"{where or '?'} ({clean(node.node_id[:8])}{state})"


def pick_node(selector: str, nodes: Iterable[NodeSnapshot], alive_only: bool = False) -> NodeSnapshot:
    """The one node SELECTOR names among NODES (only the alive ones with ALIVE_ONLY).

    Raises:
        SelectorError: none, or several (and not exactly one of them alive), match.
    """
    if alive_only:
        nodes = [n for n in nodes if n.alive]
    found = node_candidates(selector, nodes)
    if not found:
        alive = "alive " if alive_only else ""
        raise SelectorError(f"no {alive}node {_shown(selector)} ({NODE_SELECTOR}).")
    return _one(found, lambda n: n.alive, _describe_node, selector, "node", "give more of its id")


async def find_node(client: DashboardClient, selector: str, alive_only: bool = False) -> NodeSnapshot:
    """The node SELECTOR names, among the cluster's nodes (dead ones too, unless ALIVE_ONLY), by the host
    names the nodes report (Ray's node name for a node that reports none).

    Raises:
        SelectorError: none, or several, match (`pick_node`).
        DashboardError: the dashboard did not answer.
    """
    return pick_node(selector, await client.nodes(), alive_only)
