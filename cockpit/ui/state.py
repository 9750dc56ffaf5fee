"""Provides what the cockpit knows about its cluster, in one place: the state screens read and feeds fill.

Data flows one way: feeds (`cockpit.ui.feeds`) fetch, write here and post one `StateChanged` naming
what changed; screens read here and never fetch on their own, nor import the app. The state lives on
the UI thread (feeds write it from their asyncio workers, between awaits), so no lock is needed.

`CockpitHost` is what a screen may ask of the app besides the state (the connection, for the few
actions that call the cluster themselves: stop a job, open a log stream, submit). Screens reach it
with `host_of(self.app)`, typed by the protocol, so no screen imports `cockpit.ui.app`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol, cast, runtime_checkable

from textual.message import Message

from cockpit.core.actors.listing import ActorList
from cockpit.core.actors.pending import PendingReport
from cockpit.core.actors.table import ActorIndex
from cockpit.core.cluster.join import JoinProgress
from cockpit.core.config.settings import Config, defaults
from cockpit.core.debug.paused import PausedCache, PausedGroup, PausedWorker
from cockpit.core.doctor.stacks import StacksReport
from cockpit.core.gpu.board import GpuBoard, GpuFleet
from cockpit.core.memory.report import ProcessMemory
from cockpit.core.memory.watch import MemoryWatch
from cockpit.core.metrics.series import NonFinite, SeriesStore
from cockpit.core.slurm.queue import SlurmJob
from cockpit.core.snapshots import ActorRow, ClusterInfo, ClusterSnapshot, JobRow
from cockpit.core.targets import Target
from cockpit.ui.layouts import Layout

if TYPE_CHECKING:
    from textual.app import App

    from cockpit.core.cluster.dashboard import DashboardClient
    from cockpit.core.connect.connection import Connection
    from cockpit.core.debug.session import DebugSession

Need = Literal["nodes", "jobs", "gpus", "actors", "actor_list", "paused"]
"""A resource a screen (or a watcher) can declare it needs. Nodes (join progress, the status bar)
are always polled; the others are fetched at full cadence only while something shown needs them.
`actors`: the alive actors on the GPUs (GPU views); `actor_list`: the Actors screen's whole table and
the "why not running" report; `paused`: the Debugger screen's list (faster, legacy sessions too)."""

Topic = Literal[
    "connection",
    "info",
    "snapshot",
    "gpus",
    "gpu_notice",
    "actors",
    "pending",
    "paused",
    "doctor",
    "hang",
    "metrics",
    "memory",
    "slurm",
]
"""What a `StateChanged` message says changed."""

ConnectionPhase = Literal["connecting", "connected", "reconnecting", "unreachable", "queued", "ended"]
"""`queued`: a `slurm:` target's job waits in Slurm's queue; `ended`: that job is over (no retries)."""


@dataclass
class ConnectionState:
    phase: ConnectionPhase = "connecting"
    detail: str = ""
    """One line on why (retrying, reconnecting, refused ...), empty when all is well."""
    exposure: str | None = None
    """A warning when the dashboard accepts anyone (no token auth, reachable beyond loopback)."""
    without_dashboard: str = ""
    """The one line saying the head runs Ray without its dashboard (nodes come over SSH; jobs, logs and
    actors are unavailable), empty while there is a dashboard."""

    @property
    def stale(self) -> bool:
        """The data shown is older than the last poll: the cluster is not answering."""
        return self.phase != "connected"


@dataclass
class Notice:
    """One line a feed wants shown where its data is (e.g. why high-resolution mode is off)."""

    text: str = ""
    error: bool = False


@dataclass(frozen=True)
class ActorTable:
    """One fetch of the Actors screen's list: what `list_actors` said, and its rows indexed."""

    listing: ActorList
    index: ActorIndex
    fetched_at: float
    took: float
    """Seconds the fetch took (the head's cost, seen from here)."""
    by_role: dict[str, int] = field(default_factory=dict)
    """Every actor the server-side filters match, by role, from the summary's counts by class."""
    memory_read_at: float | None = None
    """When the RSS column was last read (posix seconds; it is read less often than the list)."""


@dataclass
class Stuck:
    """The "why not running" report and how long each of its items has been stuck."""

    report: PendingReport | None = None
    since: dict[str, float] = field(default_factory=dict)
    """Item key -> when it was first seen stuck (this clock)."""
    checked_at: float = 0.0
    error: str = ""

    def oldest(self, now: float) -> float:
        """Seconds the longest-stuck item has been stuck (0 when nothing is)."""
        return max((now - t for t in self.since.values()), default=0.0)


@dataclass
class Paused:
    """The workers paused in the post-mortem debugger, grouped by identical exception."""

    workers: tuple[PausedWorker, ...] = ()
    groups: tuple[PausedGroup, ...] = ()
    total: int = 0
    """How many the head counts (more than `len(workers)` only past the list limit)."""
    checked_at: float = 0.0
    error: str = ""
    attached: str = ""
    """The key of the worker a debug session of this cockpit holds ("" when none)."""
    session: DebugSession | None = None
    """That session: left paused (or closed) when the app ends."""
    cache: PausedCache = field(default_factory=PausedCache)
    """What was learnt of each paused worker (task, exception), kept between polls; sessions add to it."""
    forwards: list[tuple[str, int, Callable[[], None]]] = field(default_factory=list)
    """Loopback ports opened for VS Code (`v`): label, port, and how to close it."""


@dataclass
class JobWatch:
    """What the hang detector knows of one running job (written by the hang feed)."""

    job: JobRow
    hung: bool = False
    line: str = ""
    """The status-bar line while hung: `no progress for 12 min · 8 GPUs at 0 % (idle)`."""
    straggler: str = ""
    last_progress: str = ""
    last_progress_age: float | None = None
    hang_after: float = 600.0
    watching: str = ""
    """What counts as progress: `lines matching step=\\d+`, or `any driver-log line or GPU activity`."""
    error: str = ""


@dataclass
class Doctor:
    """The run doctor: the last grouped stacks taken, the one being taken, and the hang watch."""

    report: StacksReport | None = None
    """The last complete take."""
    partial: StacksReport | None = None
    """The take under way, as far as it got (shown while taking; a failed take keeps `report`)."""
    taking_what: str = ""
    what: str = ""
    """Whose stacks (`job raysubmit_…`, `the cluster`)."""
    job: str = ""
    """The job key they were taken for ("" for the whole cluster)."""
    taken_at: float = 0.0
    taking: bool = False
    progress: str = ""
    error: str = ""
    native: bool = False
    watches: dict[str, JobWatch] = field(default_factory=dict)
    """Job key -> its watch, for the running jobs the hang feed follows."""

    def hung(self) -> list[JobWatch]:
        return [w for w in self.watches.values() if w.hung]


@dataclass
class MetricsView:
    """The Metrics screen's data: a job's series (and another's, to compare); the metrics feed writes it."""

    job: JobRow | None = None
    """Whose series: the job the user chose, else the newest running one."""
    chosen: str = ""
    """The job key the user chose with `j` ("": follow the newest running job)."""
    store: SeriesStore | None = None
    form: str = ""
    """How its lines are read: `demo`, `verl`, `regex ...`."""
    loaded: bool = False
    """The driver log read up to its end once (later steps are timed as they come)."""
    step_times: deque[tuple[float, int]] = field(default_factory=lambda: deque(maxlen=64))
    """(monotonic arrival, step) of the newest steps seen after the history."""
    compare: JobRow | None = None
    compare_store: SeriesStore | None = None
    keys: list[str] = field(default_factory=list)
    """The keys drawn (chosen with space, or the defaults)."""
    smoothing: float = 0.0
    error: str = ""
    alarms: tuple[NonFinite, ...] = ()
    """Keys that went NaN or infinite, in the job followed."""


@dataclass
class CockpitState:
    """What the cockpit knows. Feeds write it; screens read it."""

    target: Target
    title_suffix: str = ""
    expect_nodes: int | None = None
    expect_gpus: float | None = None
    layout: Layout = field(default_factory=lambda: Layout(name="default"))
    config: Config = field(default_factory=defaults)
    """The configuration the app was given (the command line loads it once); feeds and screens read
    their settings here, never from a file of their own."""
    connection: ConnectionState = field(default_factory=ConnectionState)
    info: ClusterInfo | None = None
    snapshot: ClusterSnapshot | None = None
    """The latest nodes and jobs; kept (and shown as stale) while the cluster does not answer."""
    gpu_board: GpuBoard = field(default_factory=GpuBoard)
    """Every GPU's latest reading and 10 minutes of history (fed by the poller and the GPU agents)."""
    gpu_fleet: GpuFleet | None = None
    """The board as the GPU views show it, built off the UI thread."""
    high_res: Notice = field(default_factory=Notice)
    high_res_on: bool = False
    requested_log_job: JobRow | None = None
    """A job whose driver log the Logs screen shows next (Enter on the Jobs screen)."""
    requested_log_actor: ActorRow | None = None
    """An actor whose stdout and stderr the Logs screen shows next (`l` on the Actors screen)."""
    requested_gpu_filter: str | None = None
    """A filter the GPU screen applies next (`g` on the Actors screen: the actor's node)."""
    requested_node: str | None = None
    """A node id the Cluster screen puts its cursor on next (`n` on the Actors screen)."""
    actor_query: str = ""
    """The Actors screen's filter text (the feed pushes its server-side terms down when needed)."""
    actor_sort: tuple[str, bool] = ("state", False)
    """The Actors screen's sort (column, reversed): the feed sorts each new list so, off the UI thread."""
    actor_table: ActorTable | None = None
    stuck: Stuck = field(default_factory=Stuck)
    paused: Paused = field(default_factory=Paused)
    doctor: Doctor = field(default_factory=Doctor)
    metrics: MetricsView = field(default_factory=MetricsView)
    memory: MemoryWatch = field(default_factory=MemoryWatch)
    """Each node's host memory against Ray's kill threshold, fed by the node poll (`feeds.memory`)."""
    memory_biggest: dict[str, tuple[ProcessMemory, ...]] = field(default_factory=dict)
    """Per flagged node, its biggest processes as last read (the status bar names the first)."""
    slurm: SlurmJob | None = None
    """A `slurm:` target's job as last looked up (state, reason, hosts, walltime)."""
    shown_needs: frozenset[Need] = frozenset()
    """What the screen on view needs; the feeds read it to choose what to fetch."""

    @property
    def target_label(self) -> str:
        return self.target.raw + (f" ({self.title_suffix})" if self.title_suffix else "")

    def join_progress(self) -> JoinProgress | None:
        if self.snapshot is None:
            return None
        nodes, gpus = self.expect_nodes, self.expect_gpus
        if self.slurm is not None:  # the allocation's shape, unless the user said otherwise
            nodes = nodes or self.slurm.num_nodes or None
            gpus = gpus if gpus is not None else self.slurm.gpus
        return JoinProgress.of(self.snapshot.nodes, nodes, gpus)

    def needs(self, need: Need) -> bool:
        return need in self.shown_needs

    def offer_fleet(self, fleet: GpuFleet | None) -> bool:
        """Take `fleet` unless a newer one is already held (fleets are built on threads: order varies)."""
        if fleet is None or (self.gpu_fleet is not None and fleet.generation < self.gpu_fleet.generation):
            return False
        self.gpu_fleet = fleet
        return True


class StateChanged(Message):
    """Posted to the app by a feed after it wrote the state; `topics` says what changed."""

    def __init__(self, *topics: Topic) -> None:
        super().__init__()
        self.topics: frozenset[Topic] = frozenset(topics)


@runtime_checkable
class CockpitHost(Protocol):
    """What screens may use of the app: its state, and the connection for actions of their own."""

    state: CockpitState

    async def dashboard(self) -> DashboardClient: ...

    async def connection(self) -> Connection: ...


_HOSTS: set[type[object]] = set()
"""App classes found to be `CockpitHost`s: a runtime protocol check looks at every member each time, and
screens ask on every state change."""


def host_of(app: App[object]) -> CockpitHost:
    """The app as a `CockpitHost` (a screen's way to its state without importing the app module)."""
    if type(app) in _HOSTS:
        return cast(CockpitHost, app)
    if not isinstance(app, CockpitHost):
        raise TypeError(f"{type(app).__name__} does not host cockpit screens (no `state`)")
    _HOSTS.add(type(app))
    return app
