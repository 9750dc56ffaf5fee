"""Provides the cluster feed: the connection to the cluster, and the poll of its nodes and jobs.

Cadence lives here, not in the core: a poll asks for nodes (and jobs), hands the nodes to the GPU feed,
writes the state and re-arms a one-shot timer when it is done, so two polls never overlap and a slow
head slows the poller instead of piling up requests (a poll asked for while one is out waits for it).
Membership comes from the GCS node table (`/api/v0/nodes`, about 1 KB a node) every 2 s while nodes are
still expected to join, every `refresh.nodes` seconds (config, default 5) after, and never faster than
ten times its last answer took. Host and GPU stats come from the dashboard's summary (`/nodes?view=summary`,
about 8.4 KB a node: 17 MB at 2,000 nodes), fetched with the table when due: at most
`STATS_NODES_PER_SECOND` nodes' worth a second (`GPU_STATS_NODES_PER_SECOND` while a screen shows GPUs),
so its cadence is the table's up to 100 nodes (500 on GPU screens) and slows in proportion beyond, and the
load on the head stops growing with the cluster. Between two summaries the nodes are the fresh table
with the last stats. Jobs on every poll while a shown screen needs them, else every third.
Failures are sorted by the one rule `cockpit wait` follows too, `cockpit.core.errors.is_permanent`: a
transient one (the dashboard not answering, a dropped link, the request limit) is retried with a growing
delay (an SSH link that reconnects wakes the poller sooner); a permanent one (a refused token, key or host
key, a bad target) stops the retries until the user presses `r`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from cockpit.core.cluster import parse
from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.errors import DashboardOff
from cockpit.core.cluster.liveness import NodeSilence
from cockpit.core.cluster.versions import range_warning
from cockpit.core.connect.connection import Connection, ConnectOptions, exposure_warning, open_connection
from cockpit.core.errors import CockpitError, is_permanent
from cockpit.core.slurm import queue as slurm
from cockpit.core.slurm.queue import SlurmJob, SlurmNotRunning
from cockpit.core.snapshots import ClusterSnapshot, JobRow, NodeSnapshot
from cockpit.core.ssh.errors import UnknownHostKey
from cockpit.core.units import duration
from cockpit.ui.feeds import NOT_RETRYING, start_worker
from cockpit.ui.feeds.gpus import GpuFeed
from cockpit.ui.feeds.memory import MemoryFeed
from cockpit.ui.messages import HostKeyUnknown
from cockpit.ui.state import CockpitState, Need, StateChanged, Topic
from cockpit.ui.widgets.safe_text import clean

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

    from cockpit.core.ssh.link import SshLink

NODE_POLL_SECONDS = 2.0
"""Node cadence while nodes are still expected to join: join progress is what the user watches."""
JOB_POLL_EVERY = 3
"""Jobs on every third node poll unless a shown screen needs them (they change rarely; the list grows
with history)."""
RETRY_SECONDS = (1.0, 2.0, 3.0, 5.0)
"""Waits between polls while the dashboard does not answer."""
STATS_NODES_PER_SECOND = 20.0
"""The summary's pace on screens that show only its host fields (the node table's CPU, memory, store):
about 170 KB/s of the head's answers at most (every 100 s at 2,000 nodes)."""
GPU_STATS_NODES_PER_SECOND = 100.0
"""Its pace while a shown screen needs GPUs: about 840 KB/s at most (every 20 s at 2,000 nodes; the
GPU agents, `h`, read each node once a second without the dashboard)."""
HEAD_SHARE = 10.0
"""A request waits at least this many times as long as its last answer took (a slow head is asked less)."""
SLOWEST_SECONDS = 60.0
"""The longest the node table waits for a slow head."""

Nodes = tuple[NodeSnapshot, ...]
"""A poll's nodes, head first, then by join time."""


class ClusterFeed:
    def __init__(self, app: App[int], state: CockpitState, options: ConnectOptions, gpus: GpuFeed) -> None:
        self.app = app
        self.state = state
        self.options = options
        self.gpus = gpus
        self.memory = MemoryFeed(state)
        self._connection: Connection | None = None
        self._connecting = asyncio.Lock()
        self._stack = AsyncExitStack()
        """Owns the open connection alone, so a dead one can be closed and opened afresh (`r`)."""
        self._polls = 0
        """Polls that finished."""
        self._poll_number = 0
        """Polls that started (numbers them, so a late one is recognised)."""
        self._failures = 0
        self._jobs: tuple[JobRow, ...] = ()
        self._timer: Timer | None = None
        """The one armed poll timer: re-arming replaces it, so polls never multiply."""
        self._slurm_due = 0.0
        """When (monotonic) a `slurm:` target's job is next looked up."""
        self.steady_seconds: float = state.config.refresh.nodes
        """Node cadence once the cluster has its shape (`refresh.nodes` in config, default 5 s)."""
        self._walltime_warned = False
        self._polling = False
        """A poll is out: another one asked for now waits for it (`_again`) instead of joining it."""
        self._again = False
        self._stats: tuple[NodeSnapshot, ...] = ()
        """The last summary's nodes (host and GPU stats), merged into every poll's table until the next."""
        self._stats_at = -float("inf")
        """When (monotonic) that summary arrived."""
        self._stats_took = 0.0
        self._table_took = 0.0
        self._silence = NodeSilence()
        """Which alive nodes stopped reporting (a partitioned host, before Ray declares it dead)."""
        self._silent: Mapping[str, float] = {}
        """Those nodes as of the last summary (seconds since their last new reading)."""
        self._merged: tuple[Nodes, Nodes, bool, Nodes] | None = None
        """The last merge: its table, its summary, whether only listed nodes were kept, and its nodes. The
        same table (`node_table` gives the very same listing while its answer is the same) and the same
        summary merge into the same nodes: kept, so the node table and the GPU board see them unchanged."""

    # -- the connection ------------------------------------------------------------------------

    async def connection(self) -> Connection:
        """The open connection (connecting on first use): the dashboard client and the SSH link. One
        at a time: two workers asking together (the poll and a screen's action) share one connection."""
        async with self._connecting:
            return await self._connect()

    async def _connect(self) -> Connection:
        if self._connection is None:
            self._connection = await self._stack.enter_async_context(
                open_connection(self.state.target, self.options)
            )
            link = self._connection.link
            if link is not None and link.expose_url:
                self.app.notify(
                    f"The dashboard is also at {link.expose_url} (anyone on this machine can reach it).",
                    timeout=15,
                )
            start_worker(
                self.app,
                functools.partial(self._check_exposure, self._connection),
                group="exposure",
                description="Checking who can reach the dashboard",
                exclusive=False,
            )
        return self._connection

    async def dashboard(self) -> DashboardClient:
        return (await self.connection()).client

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self.memory.cancel()
        await self._stack.aclose()

    def abandon(self) -> None:
        """Remove what must not outlive a process that ends without closing its connection (a forced
        exit): the SSH link's tunnel socket. Safe from any thread; the connections end with the process."""
        connection = self._connection
        if connection is not None and connection.link is not None:
            connection.link.remove_socket()

    async def _check_exposure(self, connection: Connection) -> None:
        warning = await exposure_warning(connection)
        if warning:
            self.state.connection.exposure = warning
            self.app.post_message(StateChanged("connection"))

    async def _drop_connection(self) -> None:
        """Close a connection that cannot recover (auth refused, host key changed); `r` opens a new one
        and reads the token file again."""
        connection, self._connection = self._connection, None
        self.state.connection.without_dashboard = ""  # the next connection finds out again
        if connection is not None:
            await self._stack.aclose()
            self._stack = AsyncExitStack()

    # -- polling -------------------------------------------------------------------------------

    def start(self) -> None:
        self.poll_now()

    def poll_now(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._polling:  # one poll at a time: this one follows the poll that is out
            self._again = True
            return
        self._polling = True
        start_worker(self.app, self._poll, group="cluster-poll", description="Polling nodes")

    def refresh_now(self) -> None:
        """`r`: poll at once, retries counted afresh."""
        self._failures = 0
        self.poll_now()

    def needs_changed(self, before: frozenset[Need]) -> None:
        """A screen came into view: poll now if it needs jobs that the last poll did not fetch."""
        if self.state.connection.phase != "connected":
            return
        jobs = self.state.needs("jobs") and "jobs" not in before
        gpus = self.state.needs("gpus") and "gpus" not in before and self._stats_due()
        if jobs or gpus:
            self.poll_now()

    def stats_period(self, nodes: int) -> float:
        """Seconds between two summaries for a cluster of NODES, for the screen shown now."""
        rate = GPU_STATS_NODES_PER_SECOND if self.state.needs("gpus") else STATS_NODES_PER_SECOND
        return max(self.steady_seconds, nodes / rate, HEAD_SHARE * self._stats_took)

    def _stats_due(self) -> bool:
        snapshot = self.state.snapshot
        if snapshot is None:
            return True
        # The slack keeps a summary due on the poll one period later, give or take a timer's jitter.
        return time.monotonic() - self._stats_at >= self.stats_period(len(snapshot.nodes)) - 1.0

    async def _nodes(
        self, client: DashboardClient, jobs_due: bool, info_due: bool = False
    ) -> tuple[tuple[NodeSnapshot, ...], bool]:
        """The nodes: the table, with a new summary when one is due; and whether one came. The jobs and the
        cluster's info (the first poll's) when due are asked beside them: one round trip to a distant head."""
        stats_due = self._stats_due()

        async def table() -> tuple[NodeSnapshot, ...]:
            started = time.monotonic()
            listing = await client.node_table()
            self._table_took = time.monotonic() - started
            return listing.rows

        async def stats() -> None:
            started = time.monotonic()
            self._stats = await client.node_stats(fresh=self._polls == 0)
            self._stats_at = time.monotonic()
            self._stats_took = self._stats_at - started

        async def jobs() -> None:
            self._jobs = await client.jobs()

        async def info() -> None:
            self.state.info = await client.cluster_info()

        asking = asyncio.ensure_future(table())
        due = (
            *([stats()] if stats_due else []),
            *([jobs()] if jobs_due else []),
            *([info()] if info_due else []),
        )
        others = [asyncio.ensure_future(c) for c in due]
        try:
            rows = await asking
            await asyncio.gather(*others)
        finally:  # one failed (or the poll was cancelled): the others are not left asking a struggling head
            for task in (asking, *others):
                task.cancel()
            await asyncio.gather(asking, *others, return_exceptions=True)
        last, inputs = self._merged, (rows, self._stats, not stats_due)
        if last is not None and last[0] is rows and last[1] is self._stats and last[2] == inputs[2]:
            return last[3], stats_due
        merged = await asyncio.to_thread(parse.merge_nodes, *inputs)
        self._merged = (*inputs, merged)
        return merged, stats_due

    def _schedule(self, delay: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.app.set_timer(delay, self.poll_now, name="cluster-poll")

    async def _poll(self) -> None:
        self._polling = True
        try:
            await self._poll_once()
        finally:
            self._polling = False
            if self._again:
                self._again = False
                self.poll_now()

    async def _poll_once(self) -> None:
        self._poll_number += 1
        poll = self._poll_number
        state = self.state
        try:
            if state.target.kind == "slurm" and not await self._slurm_job_alive():
                return
            client = await self.dashboard()
            try:
                nodes, fresh = await self._from_dashboard(client)
            except DashboardOff:
                nodes, fresh = await self._from_head(client), False
            else:
                if await self._new_session(client, nodes):
                    self._jobs = await client.jobs()  # not the old session's jobs with the new nodes
            running = any(job.status == "RUNNING" for job in self._jobs)
            fleet = await self.gpus.after_poll(client, nodes, poll, running, fresh)
            memory = await self.memory.after_poll(client, nodes, fresh)
        except UnknownHostKey as unknown:
            self.app.post_message(HostKeyUnknown(unknown))
            self._unreachable("unknown host key: waiting for your answer")
            return
        except SlurmNotRunning as exc:
            self._slurm_seen(exc.job)
            if exc.ended:
                self._slurm_ended(exc.job)
            else:
                self._queued(exc.job)
            return
        except CockpitError as exc:
            self.failed(str(exc), permanent=is_permanent(exc))
            return
        self._polls += 1
        if fresh:  # readings move only with a new summary: between two, a node is as silent as it was
            self._silent = self._silence.update(nodes, time.monotonic())
        silent = self._silent
        state.snapshot = ClusterSnapshot(nodes=nodes, jobs=self._jobs, fetched_at=time.time(), silent=silent)
        topics: list[Topic] = ["snapshot", "connection"]
        if state.offer_fleet(fleet):
            topics.append("gpus")
        if memory:
            topics.append("memory")
        state.connection.phase = "connected"
        state.connection.detail = ""
        self._failures = 0
        self.app.post_message(StateChanged(*topics))
        progress = state.join_progress()
        joining = progress is not None and not progress.ready
        slow_head = min(SLOWEST_SECONDS, HEAD_SHARE * self._table_took)
        self._schedule(
            NODE_POLL_SECONDS if joining else max(NODE_POLL_SECONDS, self.steady_seconds, slow_head)
        )

    async def _from_dashboard(self, client: DashboardClient) -> tuple[tuple[NodeSnapshot, ...], bool]:
        """Nodes (and jobs, when due) from the dashboard, and whether a new summary came; the cluster's
        info on the first poll."""
        state = self.state
        if client.without_dashboard is not None:
            raise DashboardOff(client.without_dashboard)
        first = state.info is None
        nodes = await self._nodes(client, self._polls % JOB_POLL_EVERY == 0 or state.needs("jobs"), first)
        if first and state.info is not None:
            self.app.post_message(StateChanged("info"))
            warning = range_warning(state.info.ray_version)
            if warning:
                self.app.notify(clean(warning), severity="warning", timeout=12, markup=False)
        return nodes

    async def _from_head(self, client: DashboardClient) -> tuple[NodeSnapshot, ...]:
        """The head runs Ray without its dashboard: its nodes from its own Ray over SSH, no jobs, and the
        one line that says so (the status bar on every screen; Jobs, Logs and Actors in their body)."""
        connection = await self.connection()
        if connection.head is None or client.without_dashboard is None:
            raise DashboardOff(client.without_dashboard or "the head runs Ray without its dashboard.")
        self._jobs = ()
        self.state.connection.without_dashboard = client.without_dashboard
        return await connection.head.nodes()

    async def _new_session(self, client: DashboardClient, nodes: tuple[NodeSnapshot, ...]) -> bool:
        """Whether the head was restarted (a new Ray session) since the last poll: looked up after the
        dashboard did not answer, or when no node of the last poll is listed any more. Said once; what
        was kept of the old session (its jobs, which nodes were silent) is dropped."""
        state, before = self.state, self.state.snapshot
        known = {node.node_id for node in before.nodes} if before is not None else set()
        if state.info is None or not (self._failures or (known and not known & {n.node_id for n in nodes})):
            return False
        info = await client.cluster_info()
        old, state.info = state.info.session_name, info
        self.app.post_message(StateChanged("info"))
        if not old or not info.session_name or old == info.session_name:
            return False
        self._silence = NodeSilence()
        self._silent = {}
        self.app.notify(
            clean(f"the cluster was restarted: new Ray session {info.session_name} (was {old}); "
                  "the old session's jobs are gone from the lists"),
            title="New cluster session",
            severity="warning",
            timeout=30,
            markup=False,
        )  # fmt: skip
        return True

    # -- a cluster inside a Slurm job ------------------------------------------------------------

    async def _slurm_job_alive(self) -> bool:
        """Look the Slurm job up when due (every 30 s while connected; at once after a failure): False
        when it ended (said so; polling stops)."""
        if time.monotonic() < self._slurm_due:
            return True
        assert self.state.target.slurm_job is not None
        job = await slurm.lookup(self.state.target.slurm_job)
        self._slurm_seen(job)
        if job.ended or job.ending:
            self._slurm_ended(job)
            return False
        opened = self._connection.slurm if self._connection is not None else None
        if opened is not None and (
            job.waiting or job.head != opened.head or job.dashboard_port != opened.dashboard_port
        ):
            # Requeued (back in the queue, or restarted on other nodes): that head is gone.
            await self._drop_connection()
            self._walltime_warned = False
        return True

    def _slurm_seen(self, job: SlurmJob) -> None:
        self.state.slurm = job
        self._slurm_due = time.monotonic() + slurm.RUNNING_POLL_SECONDS
        left = job.seconds_left(time.time())
        if left is not None and left <= slurm.WALLTIME_WARN_SECONDS and not self._walltime_warned:
            self._walltime_warned = True
            self.app.bell()
            self.app.notify(
                clean(f"slurm job {job.job_id} reaches its time limit in {duration(left)}: checkpoint now"),
                title="Walltime",
                severity="warning",
                timeout=30,
                markup=False,
            )
        self.app.post_message(StateChanged("slurm"))

    def _queued(self, job: SlurmJob) -> None:
        """The job waits in the queue: its reason and estimate; asked again in 10 s."""
        self.state.connection.phase = "queued"
        self.state.connection.detail = job.queue_line()
        self._slurm_due = 0.0
        self.app.post_message(StateChanged("connection"))
        self._schedule(slurm.PENDING_POLL_SECONDS)

    def _slurm_ended(self, job: SlurmJob) -> None:
        """The job is over (or on its way out): said once, with Slurm's state and reason; nothing is
        retried but the lookup of a job still ending, until Slurm gives its final state."""
        connection = self.state.connection
        first = connection.phase != "ended"
        connection.phase = "ended"
        if job.ending:
            connection.detail = job.describe()
            self._slurm_due = 0.0
            self._schedule(slurm.ENDING_POLL_SECONDS)
        else:
            where = f" · its output: {job.stdout}" if job.stdout else ""
            connection.detail = f"{job.describe()}{where} (not retrying)"
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
        if first:
            self.app.bell()
            self.app.notify(
                clean(job.describe()), title="Slurm job ended", severity="error", timeout=30, markup=False
            )
            start_worker(
                self.app, self._drop_connection, group="reconnect", description="Closing the connection"
            )
        self.app.post_message(StateChanged("connection"))

    def _unreachable(self, detail: str) -> None:
        self.state.connection.phase = "unreachable"
        self.state.connection.detail = detail
        self.app.post_message(StateChanged("connection"))

    def host_key_answered(self, unknown: UnknownHostKey, trust: bool) -> None:
        if trust:
            start_worker(
                self.app,
                functools.partial(self._trust, unknown),
                group="host-key",
                description="Trusting a host key",
            )
        else:
            self.failed(str(unknown), permanent=True)

    async def _trust(self, unknown: UnknownHostKey) -> None:
        """Record the key (file work, off the event loop), then connect again."""
        from cockpit.core.ssh.host_keys import record_host_key  # asyncssh: loaded by the link already

        try:
            await asyncio.to_thread(record_host_key, unknown)
        except CockpitError as exc:
            self.failed(str(exc), permanent=True)
            return
        self._unreachable("host key trusted; connecting")
        self.poll_now()

    def failed(self, reason: str, permanent: bool = False) -> None:
        """The cluster did not answer: retry later, or (permanent) stop until the user presses `r`."""
        self._slurm_due = 0.0  # a Slurm job's head that stops answering: did the job end?
        connection = self.state.connection
        connection.phase = "unreachable"
        link = self._connection.link if self._connection is not None else None
        if link is not None and link.status.state == "failed":
            reason, permanent = link.status.describe(), True
        if permanent:
            connection.detail = reason + NOT_RETRYING
            if self._timer is not None:
                self._timer.stop()
            start_worker(
                self.app, self._drop_connection, group="reconnect", description="Closing a dead connection"
            )
        else:
            delay = RETRY_SECONDS[min(self._failures, len(RETRY_SECONDS) - 1)]
            self._failures += 1
            if link is not None and link.status.state == "reconnecting":
                connection.phase = "reconnecting"
                connection.detail = link.status.describe()
                start_worker(
                    self.app,
                    functools.partial(self._poll_when_link_is_back, link, delay),
                    group="link-wait",
                    description="Waiting for the SSH link",
                )
            else:
                connection.detail = f"{reason} · retry {self._failures} in {delay:.0f} s"
                self._schedule(delay)
        self.app.post_message(StateChanged("connection"))

    def crashed(self, error: BaseException) -> None:
        """A bug in a poll: said once, then polling goes on."""
        self.state.connection.phase = "unreachable"
        self.state.connection.detail = f"internal error: {error!r}; retrying"
        self.app.post_message(StateChanged("connection"))
        self._schedule(RETRY_SECONDS[-1])

    async def _poll_when_link_is_back(self, link: SshLink, timeout: float) -> None:
        """Poll as soon as the SSH link is back instead of waiting out the retry delay."""
        await link.wait_connected(timeout)
        self.poll_now()
