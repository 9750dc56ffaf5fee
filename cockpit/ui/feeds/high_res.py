"""Provides high-resolution GPU mode (`h` on the GPU screen): 1 Hz readings from an agent on each node.

One agent per node IP that has GPUs (raylets on one machine share its GPUs, as their reporters do), at
most `MAX_AGENTS`, run by the Python the node runs Ray with: over the SSH link on the head and, through
the head, on the other nodes (with the head's user, key and known hosts unless the SSH config says
otherwise); as a subprocess of the cockpit for a local cluster. An `http://` target has no way onto the
nodes, and the login node's own GPUs are not the cluster's, so the mode says so and starts nothing.

Readings go into the GPU board, and the GPU screen is redrawn at most once a second. Whatever fails is
said in one line; the rows of a node whose agent failed keep the dashboard's readings. Turning the mode
off ends the agents and closes the connections to the nodes.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.worker import Worker

from cockpit.core.gpu.agents import AgentReading, start_local_agent, start_ssh_agent, stream_readings
from cockpit.core.gpu.errors import AgentFailed
from cockpit.core.snapshots import NodeSnapshot
from cockpit.ui.feeds import start_worker
from cockpit.ui.state import StateChanged
from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from textual.app import App

    from cockpit.core.connect.connection import Connection
    from cockpit.core.ssh.link import SshLink
    from cockpit.ui.feeds.gpus import GpuFeed
    from cockpit.ui.state import CockpitState

MAX_AGENTS = 64
"""Agents at once: each is an SSH session (and a connection per node) held open for as long as the mode."""
FALLBACK_PYTHON = "python3"
"""When a node's raylet command line does not name its Python (older Ray, a node not yet reported)."""


class HighResFeed:
    """The agents of one app; `toggle()` starts or stops them all. Its one line of news goes into
    `state.high_res`; readings go into the GPU board and the GPU feed redraws."""

    def __init__(
        self,
        app: App[int],
        state: CockpitState,
        gpus: GpuFeed,
        connection: Callable[[], Awaitable[Connection]],
    ) -> None:
        self.app = app
        self.state = state
        self.gpus = gpus
        self.connection = connection
        self._worker: Worker[None] | None = None
        self._link: SshLink | None = None
        self._running: set[str] = set()
        self._failed: dict[str, str] = {}
        self._wanted = 0
        self._left_out = 0

    @property
    def on(self) -> bool:
        return self.state.high_res_on

    @on.setter
    def on(self, value: bool) -> None:
        self.state.high_res_on = value

    def toggle(self, preferred: set[str] | frozenset[str] = frozenset()) -> None:
        """On or off. `preferred`: node ids to cover first when there are more nodes than agents."""
        if self.on:
            self.stop()
            self._say("high-resolution mode off: back to the dashboard's readings (every 5 s)", error=False)
        else:
            self.start(preferred)

    def start(self, preferred: set[str] | frozenset[str] = frozenset()) -> None:
        if self.state.snapshot is None:
            self._say("high-resolution mode: wait for the first reading of the cluster, then press h again")
            return
        if self.state.target.kind == "http":
            self._say(
                "high-resolution mode needs SSH to the head (cockpit connect HOST): the agent runs on the "
                "nodes, and this machine's GPUs are not the cluster's"
            )
            return
        self.on = True
        self._running.clear()
        self._failed.clear()
        self._say("high-resolution mode: starting the GPU agent on the nodes…", error=False)
        self._worker = start_worker(
            self.app, functools.partial(self._run, preferred), group="gpu-agents", description="GPU agents"
        )

    def stop(self) -> None:
        self.on = False
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None
        self._running.clear()
        self.state.gpu_board.stop_agent()
        self.gpus.changed()

    def _say(self, notice: str, error: bool = True) -> None:
        self.state.high_res.text, self.state.high_res.error = notice, error
        self.app.post_message(StateChanged("gpu_notice"))

    async def _run(self, preferred: set[str] | frozenset[str]) -> None:
        try:
            connection = await self.connection()
        except Exception as exc:  # the poller reports the connection; here one line is enough
            self._give_up(f"high-resolution mode off: no connection to the cluster ({exc})")
            return
        snapshot = self.state.snapshot
        nodes = [n for n in snapshot.nodes if n.alive and (n.gpus or n.logical_gpus > 0)] if snapshot else []
        by_ip: dict[str, list[NodeSnapshot]] = {}
        for node in nodes:
            by_ip.setdefault(node.ip, []).append(node)
        if not by_ip:
            self._give_up("high-resolution mode off: no alive node has GPUs")
            return
        ranked = sorted(by_ip, key=lambda ip: not any(n.node_id in preferred for n in by_ip[ip]))
        ips = ranked[:MAX_AGENTS]
        self._wanted, self._left_out = len(ips), max(0, len(by_ip) - MAX_AGENTS)
        link = self._link = connection.link
        head_ip = next((n.ip for n in snapshot.nodes if n.is_head), "") if snapshot else ""
        tasks = [
            asyncio.create_task(self._one(ip, by_ip[ip], self._starter(link, ip == head_ip, ip, by_ip[ip])))
            for ip in ips
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if link is not None:
                await link.close_node_connections()

    def _starter(
        self, link: SshLink | None, is_head: bool, ip: str, nodes: list[NodeSnapshot]
    ) -> Callable[[], Any]:
        if link is None:  # a local cluster: its nodes are this machine (http targets never get here)
            return start_local_agent
        python = next((n.python for n in nodes if n.python), "") or FALLBACK_PYTHON
        host = None if is_head else ip
        return lambda: start_ssh_agent(lambda command: link.start_process(command, host=host), python)

    async def _one(self, ip: str, nodes: list[NodeSnapshot], start: Callable[[], Any]) -> None:
        board = self.state.gpu_board
        node_ids = [node.node_id for node in nodes]

        def on_reading(reading: AgentReading) -> None:
            if ip not in self._running:
                self._running.add(ip)
                self._describe()
            board.ingest_agent(node_ids, reading.time, reading.gpus)
            self.gpus.changed(coalesce=True)

        label = nodes[0].hostname or ip
        if len(nodes) > 1:
            label += f" ({len(nodes)} nodes)"
        try:
            await stream_readings(start, on_reading, f"{label} [{ip}]")
        except AgentFailed as exc:
            reason = str(exc)
        except Exception as exc:  # a bug must end this agent only, and say so
            reason = f"{label} [{ip}]: {exc!r}"
        else:
            reason = f"{label} [{ip}]: the agent stopped"
        self._running.discard(ip)
        self._failed[ip] = reason
        board.forget_agent(node_ids, reason)
        self.gpus.changed(coalesce=True)
        self._describe()

    def _describe(self) -> None:
        failed = list(self._failed.values())
        if not self._running and len(failed) >= self._wanted:
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            self._give_up(f"high-resolution mode off: {failed[0]}{more}; h tries again")
            return
        running = len(self._running)
        parts = [f"high-resolution mode: 1 Hz readings from {running} of {self._wanted} node IP(s)"]
        if self._left_out:
            parts.append(f"{self._left_out} more not covered (at most {MAX_AGENTS} agents)")
        if failed:
            parts.append(f"{len(failed)} failed: {failed[0]}")
        self._say("; ".join(parts), error=bool(failed))

    def _give_up(self, notice: str) -> None:
        self.on = False
        self._running.clear()
        self.state.gpu_board.stop_agent()
        self.gpus.changed()
        self._say(notice)
        # The notice quotes why the agents failed (remote error text).
        self.app.notify(clean(notice), title="GPU agent", severity="warning", timeout=12, markup=False)
