"""Provides the join gate: how far a cluster is from the shape a job expects (nodes, GPUs, deaths)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cockpit.core.snapshots import NodeSnapshot
from cockpit.core.text import clean, cut


@dataclass(frozen=True)
class JoinProgress:
    """Expected vs joined nodes and GPUs; `expected_*` of None means "no expectation given"."""

    alive_nodes: int
    alive_gpus: float
    expected_nodes: int | None
    expected_gpus: float | None
    dead: tuple[NodeSnapshot, ...]

    @classmethod
    def of(
        cls,
        nodes: Sequence[NodeSnapshot],
        expected_nodes: int | None = None,
        expected_gpus: float | None = None,
    ) -> JoinProgress:
        alive = [n for n in nodes if n.alive]
        return cls(
            alive_nodes=len(alive),
            alive_gpus=sum(n.logical_gpus for n in alive),
            expected_nodes=expected_nodes,
            expected_gpus=expected_gpus,
            dead=tuple(n for n in nodes if not n.alive),
        )

    @property
    def missing_nodes(self) -> int:
        return max(0, (self.expected_nodes or 0) - self.alive_nodes)

    @property
    def missing_gpus(self) -> float:
        return max(0.0, (self.expected_gpus or 0.0) - self.alive_gpus)

    @property
    def ready(self) -> bool:
        return self.missing_nodes == 0 and self.missing_gpus == 0

    def summary(self) -> str:
        """One line: "2/3 nodes, 4/6 GPUs — waiting: 1 node, 2 GPUs missing; 1 dead"."""
        nodes = f"{self.alive_nodes}/{self.expected_nodes}" if self.expected_nodes else f"{self.alive_nodes}"
        gpus = f"{self.alive_gpus:g}/{self.expected_gpus:g}" if self.expected_gpus else f"{self.alive_gpus:g}"
        text = f"{nodes} nodes, {gpus} GPUs"
        if self.ready:
            text += " — ready"
        else:
            missing = []
            if self.missing_nodes:
                missing.append(f"{self.missing_nodes} node{'s' if self.missing_nodes != 1 else ''}")
            if self.missing_gpus:
                missing.append(f"{self.missing_gpus:g} GPU{'s' if self.missing_gpus != 1 else ''}")
            text += f" — waiting: {', '.join(missing)} missing"
        if self.dead:
            text += f"; {len(self.dead)} dead"
        return text

    def death_lines(self) -> list[str]:
        """A line a dead node, its host, id and death reason (the cluster's text) cleaned and cut."""
        return [
            f"{cut(n.hostname or n.ip, 64)} ({clean(n.node_id)[:8]}) died: "
            f"{cut(n.state_message, 300) or 'no reason given'}"
            for n in self.dead
        ]
