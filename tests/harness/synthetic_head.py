"""Provides a synthetic Ray head: an HTTP server on 127.0.0.1 answering every dashboard endpoint the
cockpit calls (and those the dashboard's own web page polls), in the shapes of Ray 2.60's answers
(`../shared/ray-2.60-samples/`), scaled to N nodes x G GPUs, M actors, K jobs and D dead nodes, with a
driver log that grows at R lines a second.

For the scale tests and the head-load benchmarks, where a real 2,000-node head is out of reach. Never
imported by the product. It can stall (no answer until released), answer slowly, answer 500, refuse a
list limit above 10,000 with Ray's 400, and churn (nodes die and join, actors restart, jobs end). It
counts requests and bytes per endpoint (`SyntheticHead.stats`, and `GET /__stats` as JSON).

The State API's funnel is Ray's (`dashboard/state_aggregator.py`, `util/state/state_manager.py`):
the GCS applies the `=` filters on `state`, `job_id` and `actor_id` and returns at most 10,000 rows
(`RAY_MAX_LIMIT_FROM_DATA_SOURCE`); `total` counts every actor, `num_after_truncation` those rows plus
the ones the GCS filtered out, `num_filtered` what is left after every filter, and `limit` cuts the
list sorted by id. A filter without its predicate is dropped (Ray zips the three lists); an unknown
column is a 400; key and value counts that differ are a 500.

Payloads are cheap to serve at 5,000 nodes: each node's summary entry is rendered once, and per tick
(`tick_s`, 5 s by default: Ray's agents report every 5 s) only its changing head (time, CPU, GPUs) is
rendered again; whole answers are cached per tick.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

MAX_LIMIT = 10_000
"""`RAY_MAX_LIMIT_FROM_API_SERVER` and `RAY_MAX_LIMIT_FROM_DATA_SOURCE`."""
DEFAULT_LIMIT = 100
DEAD_NODES_CACHED = 1_000
"""`RAY_maximum_gcs_dead_node_cached_count`: older dead nodes leave the tables."""
SESSION = "session_2026-11-27_12-00-00_000000_4242"
T0 = 1_795_642_346.0
ACTOR_COLUMNS = (
    "actor_id",
    "class_name",
    "state",
    "job_id",
    "name",
    "node_id",
    "pid",
    "ray_namespace",
    "placement_group_id",
    "repr_name",
)
"""The filterable actor columns (Ray answers 400 listing them for any other)."""
WORKER_COLUMNS = (
    "worker_id",
    "is_alive",
    "worker_type",
    "exit_type",
    "node_id",
    "ip",
    "pid",
    "num_paused_threads",
)
NODE_COLUMNS = ("node_id", "node_ip", "is_head_node", "state", "node_name")
PG_COLUMNS = ("placement_group_id", "name", "creator_job_id", "state", "is_detached")
TASK_COLUMNS = (
    "task_id",
    "name",
    "state",
    "job_id",
    "actor_id",
    "type",
    "func_or_class_name",
    "node_id",
    "worker_id",
)
ROLES = ("ActorRolloutRefWorker", "CriticWorker", "RewardModelWorker", "vLLMHttpServer")
SERVER_ERROR = b"500 Internal Server Error\n\nServer got itself in trouble"


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".")[:3] if p.isdigit())


@dataclass
class HeadShape:
    """What the synthetic cluster holds."""

    nodes: int = 3
    """Alive nodes (the head is one of them)."""
    gpus: int = 8
    """Physical GPUs per worker node (the head has none)."""
    actors: int = 0
    """Actors in the GCS table (alive, a few dead)."""
    jobs: int = 1
    """Jobs in `/api/jobs/`: the newest runs, the others ended."""
    dead: int = 0
    """Dead nodes still listed (at most 1,000, as Ray caches)."""
    log_rate: float = 0.0
    """Lines a second the running job's driver log grows by."""
    log_lines: int = 0
    """Lines the driver log holds at start."""
    ray_version: str = "2.60.0"
    seed: int = 7


@dataclass
class EndpointStats:
    requests: int = 0
    bytes: int = 0
    errors: int = 0
    in_flight: int = 0
    max_in_flight: int = 0


@dataclass
class HeadStats:
    """Requests and bytes (bodies sent) per endpoint, since start or the last `reset`."""

    by_endpoint: dict[str, EndpointStats] = field(default_factory=lambda: defaultdict(EndpointStats))
    since: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    log: list[tuple[float, str, int]] = field(default_factory=list)
    """Every answer since the reset: (seconds since the reset when it ended, endpoint, bytes)."""

    def add(self, endpoint: str, sent: int) -> None:
        self.log.append((time.monotonic() - self.since, endpoint, sent))

    def reset(self) -> None:
        with self.lock:
            self.log = []
            for key, entry in list(self.by_endpoint.items()):
                self.by_endpoint[key] = EndpointStats(
                    in_flight=entry.in_flight, max_in_flight=entry.in_flight
                )
            self.since = time.monotonic()

    def snapshot(self, log: bool = False) -> dict[str, Any]:
        with self.lock:
            endpoints = {k: vars(v).copy() for k, v in self.by_endpoint.items()}
            seconds = time.monotonic() - self.since
            events = list(self.log) if log else []
        return {
            **({"log": events} if log else {}),
            "seconds": seconds,
            "requests": sum(e["requests"] for e in endpoints.values()),
            "bytes": sum(e["bytes"] for e in endpoints.values()),
            "in_flight": sum(e["in_flight"] for e in endpoints.values()),
            "endpoints": endpoints,
        }

    @property
    def requests(self) -> int:
        with self.lock:
            return sum(e.requests for e in self.by_endpoint.values())

    @property
    def bytes(self) -> int:
        with self.lock:
            return sum(e.bytes for e in self.by_endpoint.values())


# -- the cluster ------------------------------------------------------------------------------------


@dataclass
class Node:
    index: int
    node_id: str
    ip: str
    hostname: str
    head: bool
    gpus: int
    start_ms: int
    state: str = "ALIVE"
    end_ms: int = 0
    message: str | None = None
    body: str = ""
    """The entry's JSON from its first key after `gpus` on (rendered once; see `_render_static`)."""


@dataclass
class Actor:
    actor_id: str
    class_name: str
    name: str
    job_id: str
    node: int
    pid: int
    gpu: int | None
    state: str = "ALIVE"
    restarts: int = 0
    row: bytes = b""
    """Its `/api/v0/actors?detail=true` row, rendered when first asked for, dropped when it changes."""


@dataclass
class Job:
    submission_id: str
    job_id: str
    status: str
    start_ms: int
    end_ms: int | None
    driver_node: str
    own_log: bool = False
    """Started by churn: its driver log holds the lines written from its start (`log_from`) to its end
    (`log_to`), as a real new job's log starts empty. The jobs there at start share the one log, which
    never ends (tests and benchmarks read it by any of their names)."""
    log_from: int = 0
    log_to: int | None = None


def _hex(rng: random.Random, chars: int) -> str:
    return f"{rng.getrandbits(chars * 4):0{chars}x}"


class Cluster:
    """The synthetic cluster's tables and how they change each tick (all on the server's loop)."""

    def __init__(self, shape: HeadShape, clock: float) -> None:
        self.shape = shape
        self.rng = random.Random(shape.seed)
        self.t0 = clock
        self.nodes: list[Node] = []
        self._next_node = 0
        for _ in range(shape.nodes):
            self._add_node(joined=clock - 3600)
        for i in range(min(shape.dead, DEAD_NODES_CACHED)):
            node = self._add_node(joined=clock - 7200)
            self._kill(node, clock - 3600 + i)
        self.actors: list[Actor] = []
        workers = [n for n in self.nodes if not n.head and n.state == "ALIVE"] or self.nodes[:1]
        for i in range(shape.actors):
            node = workers[i % len(workers)]
            cls = ROLES[i % len(ROLES)]
            per_node = i // len(workers)
            self.actors.append(
                Actor(
                    actor_id=f"{i:08x}{_hex(self.rng, 16)}03000000",
                    class_name=cls,
                    name=f"{cls}_{i}",
                    job_id="03000000",
                    node=node.index,
                    pid=20_000 + i,
                    gpu=per_node if per_node < node.gpus else None,
                    state="DEAD" if i % 50 == 7 else "ALIVE",
                )
            )
        self.jobs: list[Job] = []
        head = self.nodes[0].node_id
        for k in range(shape.jobs):
            newest = k == shape.jobs - 1
            start = int((clock - 3600 * (shape.jobs - k)) * 1000)
            self.jobs.append(
                Job(
                    submission_id=f"raysubmit_{k:06d}{_hex(self.rng, 10)}",
                    job_id=f"{k + 2:02x}000000",
                    status="RUNNING" if newest else ("SUCCEEDED" if k % 3 else "FAILED"),
                    start_ms=start,
                    end_ms=None if newest else start + 3_000_000,
                    driver_node=head,
                )
            )
        self.tick = 0

    # -- nodes

    def _add_node(self, joined: float) -> Node:
        i = self._next_node
        self._next_node += 1
        rng = random.Random(self.shape.seed * 1_000_003 + i)
        node = Node(
            index=i,
            node_id=f"{i:06x}{_hex(rng, 50)}",
            ip=f"10.{(i // 250) % 250}.{i % 250}.{1 + i // 62_500}",
            hostname=f"gpu-{i:05d}",
            head=i == 0,
            gpus=0 if i == 0 else self.shape.gpus,
            start_ms=int(joined * 1000),
        )
        _render_static(node, self.shape)
        self.nodes.append(node)
        return node

    def _kill(self, node: Node, when: float) -> None:
        node.state = "DEAD"
        node.end_ms = int(when * 1000)
        node.message = "Unexpected termination: health check failed due to missing too many heartbeats"
        _render_static(node, self.shape)

    def advance(self, tick: int, churn: bool, now: float, log_at: int = 0) -> None:
        """Move the tables on to TICK: with churn, each tick a node dies and one joins, 1 % of the actors
        restart (RESTARTING, then ALIVE the next tick), and the running job ends while another starts
        every 12 ticks, its driver log starting at line LOG_AT (the lines written so far)."""
        while self.tick < tick:
            self.tick += 1
            if not churn:
                continue
            rng = random.Random(self.shape.seed * 7919 + self.tick)
            alive = [n for n in self.nodes if n.state == "ALIVE" and not n.head]
            if alive:
                self._kill(rng.choice(alive), now)
                self._add_node(joined=now)
            dead = [n for n in self.nodes if n.state == "DEAD"]
            for old in dead[: max(0, len(dead) - DEAD_NODES_CACHED)]:
                self.nodes.remove(old)
            for actor in self.actors:
                if actor.state == "RESTARTING":
                    actor.state, actor.row = "ALIVE", b""
            for actor in rng.sample(self.actors, min(len(self.actors), max(1, len(self.actors) // 100))):
                if actor.state == "ALIVE":
                    actor.state, actor.restarts, actor.row = "RESTARTING", actor.restarts + 1, b""
            if self.jobs and self.tick % 12 == 0:
                running = self.jobs[-1]
                running.status, running.end_ms = "SUCCEEDED", int(now * 1000)
                if running.own_log:
                    running.log_to = log_at
                k = len(self.jobs)
                self.jobs.append(
                    Job(
                        submission_id=f"raysubmit_{k:06d}{_hex(rng, 10)}",
                        job_id=f"{k + 2:02x}000000",
                        status="RUNNING",
                        start_ms=int(now * 1000),
                        end_ms=None,
                        driver_node=self.nodes[0].node_id,
                        own_log=True,
                        log_from=log_at,
                    )
                )


def _padded_cmdline(first: str, pad: int) -> list[str]:
    """A process's cmdline as psutil reads it under a proctitle: the title, then empty strings."""
    return [first] + [""] * pad


def _render_static(node: Node, shape: HeadShape) -> None:
    """Render the parts of NODE's summary entry that do not change between ticks."""
    resources: dict[str, float] = {
        "objectStoreMemory": 200_000_000_000.0,
        f"node:{node.ip}": 1.0,
        "memory": 1_600_000_000_000.0,
        "CPU": 192.0,
    }
    labels = {"ray.io/node-id": node.node_id}
    if node.gpus:
        resources["GPU"] = float(node.gpus)
        resources["acceleratorType:H100"] = 1.0
        labels["ray.io/accelerator-type"] = "H100"
    if node.head:
        resources["node:InternalHead"] = 1.0
    session = f"/tmp/ray/{SESSION}"
    raylet: dict[str, Any] = {
        "coreWorkersStats": [
            {
                "ipAddress": node.ip,
                "port": str(10_000 + g),
                "actorId": f"{node.index:08x}{g:024x}",
                "usedResources": {"GPU": {"resourceSlots": [{"allocation": 1.0, "slot": str(g)}]}},
                "numExecutedTasks": 2,
                "jobId": "03000000",
                "workerId": f"{node.index:08x}{g:048x}",
                "pid": 20_000 + node.index * 16 + g,
                "numPendingTasks": 0,
                "numObjectRefsInScope": 0,
                "numInPlasma": 0,
                "numLocalObjects": 0,
                "usedObjectStoreMemory": "0",
                "taskQueueLength": 0,
                "objectRefs": [],
                "language": "PYTHON",
                "workerType": "WORKER",
                "objectsTotal": "0",
                "numOwnedObjects": "0",
                "numOwnedActors": "0",
                "numRunningTasks": "1",
                "numInFlightArgPinningRequests": "0",
                "numOfFailedArgPinningRequests": "0",
            }
            for g in range(min(node.gpus, 2))
        ],
        "numWorkers": min(node.gpus, 2),
        "storeStats": {
            "objectStoreBytesAvail": "200000000000",
            "cumulativeCreatedObjects": "1",
            "cumulativeCreatedBytes": "8",
        },
        "objectStoreUsedMemory": 1_000_000_000,
        "objectStoreAvailableMemory": 199_000_000_000,
        "nodeId": node.node_id,
        "nodeManagerAddress": node.ip,
        "rayletSocketName": f"{session}/sockets/raylet",
        "objectStoreSocketName": f"{session}/sockets/plasma_store",
        "nodeManagerPort": 42221,
        "objectManagerPort": 35797,
        "nodeManagerHostname": node.hostname,
        "metricsExportPort": 35077,
        "resourcesTotal": resources,
        "nodeName": node.ip,
        "startTimeMs": str(node.start_ms),
        "labels": labels,
        "runtimeEnvAgentPort": 39371,
        "stateSnapshot": {"state": "ACTIVE", "idleDurationMs": "0", "nodeActivity": []},
        "metricsAgentPort": 45705,
        "dashboardAgentListenPort": 52365,
        "tempDir": "/tmp/ray",
        "sessionDir": session,
        "state": node.state,
        "instanceId": "",
        "nodeTypeName": "",
        "instanceTypeName": "",
        "endTimeMs": str(node.end_ms),
        "isHeadNode": node.head,
        "stateMessage": node.message,
    }
    rest: dict[str, Any] = {
        "tpus": [],
        "raylet": raylet,
        "agent": {
            "pid": 11_376,
            "createTime": node.start_ms / 1000,
            "cpuPercent": 0.4,
            "cpuTimes": {"user": 1.07, "system": 0.12, "childrenUser": 0.0, "childrenSystem": 0.0},
            "cmdline": _padded_cmdline("ray::DashboardAgent", 300),
            "memoryInfo": {"rss": 126197760.0, "vms": 1392398336.0, "pfaults": None, "pageins": None},
            "memoryFullInfo": None,
            "numFds": 49,
            "gpuMemoryUsage": None,
            "gpuUtilization": None,
        },
        "bootTime": node.start_ms / 1000 - 600,
        "loadAvg": [[12.5, 11.9, 11.2], [0.07, 0.06, 0.06]],
        "disk": {
            "/": {"total": 270553174016, "used": 24187330560, "free": 84756963328, "percent": 22.2},
            "/tmp/ray": {"total": 270553174016, "used": 24187330560, "free": 84756963328, "percent": 22.2},
        },
        "diskIo": [1083601920, 1178984448, 19866, 3543],
        "diskIoSpeed": [0.6, 0.65, 1.1e-05, 1.9e-06],
        "network": [250587, 158356904],
        "networkSpeed": [0.00014, 0.088],
        "cmdline": [
            "/opt/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet",
            f"--raylet_socket_name={session}/sockets/raylet",
            f"--store_socket_name={session}/sockets/plasma_store",
            "--object_manager_port=0",
            "--min_worker_port=10002",
            "--max_worker_port=19999",
            "--node_manager_port=0",
            f"--node_id={node.node_id}",
            f"--node_ip_address={node.ip}",
            "--maximum_startup_concurrency=192",
            f"--static_resource_list=node:{node.ip},1.0,CPU,192,GPU,{node.gpus},memory,1600000000000",
            f"--python_worker_command=/opt/venv/bin/python3 -u default_worker.py --node-ip-address={node.ip}",
            f"--temp_dir=/tmp/ray --session_dir={session} --log_dir={session}/logs",
        ],
        "gcs": None,
    }
    node.body = json.dumps(rest, separators=(", ", ": "))[1:]


def _gpus(node: Node, tick: int) -> list[dict[str, Any]]:
    out = []
    for g in range(node.gpus):
        util = (node.index * 37 + g * 11 + tick * 7) % 101
        used = 8_000 + (node.index * 131 + g * 977 + tick * 61) % 70_000
        out.append(
            {
                "index": g,
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-{node.index:08x}-{g:04x}-4a2b-9c1d-{node.index:06x}{g:06x}",
                "utilizationGpu": util,
                "memoryUsed": used,
                "memoryTotal": 81559,
                "processesPids": [
                    {
                        "pid": 20_000 + node.index * 16 + g,
                        "gpuMemoryUsage": used - 500,
                        "gpuUtilization": util,
                    }
                ],
                "powerMw": 90_000 + util * 6_000,
                "temperatureC": 30 + util // 2,
            }
        )
    return out


def summary_entry(node: Node, tick: int, now: float) -> str:
    """NODE's `/nodes?view=summary` entry as JSON, its time, CPU and GPUs as of TICK."""
    cpu = (node.index * 13 + tick * 5) % 100
    alive = node.state == "ALIVE"
    head = {
        "now": now,
        "hostname": node.hostname,
        "ip": node.ip,
        "cpu": float(cpu) if alive else 0.0,
        "cpus": [192, 96],
        "mem": [2_000_000_000_000, 1_400_000_000_000, 30.0, 600_000_000_000],
        "hostMem": [600_000_000_000, 2_000_000_000_000],
        "cgroupMem": [600_000_000_000, 2_000_000_000_000],
        "shm": 9105408,
        "gpus": _gpus(node, tick) if alive else [],
    }
    return json.dumps(head, separators=(", ", ": "))[:-1] + ", " + node.body


# -- the server -------------------------------------------------------------------------------------


class SyntheticHead:
    """The server; `start()` runs it on a thread of its own (usable from sync and async code alike).

    Modes (set any time, from any thread): `stall` (requests wait until it is cleared; only those of
    `stall_only`'s paths when given), `delay`
    (seconds before each answer), `fail` (500 for every path starting with one of these prefixes;
    `("/",)` for all), `churn` (the tables change each tick).
    """

    def __init__(self, shape: HeadShape | None = None, *, tick_s: float = 5.0, port: int = 0) -> None:
        self.shape = shape or HeadShape()
        self.tick_s = tick_s
        self.stats = HeadStats()
        self.stall = False
        self.stall_only: tuple[str, ...] = ()
        """While `stall`: only the paths starting with one of these wait (none given: every path)."""
        self.delay = 0.0
        self.fail: tuple[str, ...] = ()
        self.churn = False
        self.static_dir: Path | None = None
        """Serve these files at `/` (the dashboard's built web page, for the browser anchor)."""
        self._port = port
        self._started = time.time()
        self._log_since = self._started
        self.cluster = Cluster(self.shape, self._started)
        self._cache: dict[tuple[str, int], bytes] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._unstall: asyncio.Event | None = None
        self._stopping = asyncio.Event()
        self.log_lines_sent = 0

    # -- lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def start(self) -> SyntheticHead:
        self._thread = threading.Thread(target=self._serve, name="synthetic-head", daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("the synthetic head did not start")
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self.set_stall(False)
        self.delay = 0.0
        loop.call_soon_threadsafe(self._stopping.set)
        thread.join(30)
        self._loop = self._thread = None

    def __enter__(self) -> SyntheticHead:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._main())
        finally:
            loop.close()

    async def _main(self) -> None:
        self._unstall = asyncio.Event()
        self._stopping = asyncio.Event()
        app = web.Application(middlewares=[self._middleware])
        self._routes(app)
        # Streams and stalled answers are cancelled at stop instead of waited for.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self._port, backlog=1024)
        await site.start()
        server = site._server
        assert server is not None and server.sockets  # type: ignore[attr-defined]
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        self._runner = runner
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            await runner.cleanup()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in rest:
                task.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

    @contextmanager
    def stalled(self) -> Iterator[None]:
        """Every request waits while inside."""
        self.set_stall(True)
        try:
            yield
        finally:
            self.set_stall(False)

    def set_stall(self, on: bool) -> None:
        self.stall = on
        loop, event = self._loop, self._unstall
        if not on and loop is not None and event is not None:
            loop.call_soon_threadsafe(event.set)

    # -- plumbing

    def tick(self) -> int:
        return int((time.time() - self._started) / self.tick_s)

    def _now(self) -> float:
        return time.time()

    @staticmethod
    def endpoint(request: web.Request) -> str:
        """The name a request is counted under: its route with ids as placeholders, `view` for `/nodes`."""
        info = request.match_info
        route = info.route.resource.canonical if info.route.resource is not None else request.path
        if route == "/nodes":
            return f"/nodes?view={request.query.get('view', '')}"
        if route.startswith("/static") or route.startswith("/{tail"):
            return "(web page files)"
        return route

    def _stalls(self, path: str) -> bool:
        return not self.stall_only or any(path.startswith(prefix) for prefix in self.stall_only)

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path in ("/__stats", "/__control"):
            return await handler(request)
        key = self.endpoint(request)
        with self.stats.lock:
            entry = self.stats.by_endpoint[key]
            entry.requests += 1
            entry.in_flight += 1
            entry.max_in_flight = max(entry.max_in_flight, entry.in_flight)
        response: web.StreamResponse | None = None
        try:
            # A stalled or slow answer ends when its asker hangs up (as the dashboard notices a closed
            # connection), so `in_flight` counts the requests a client still holds open.
            while self.stall and self._stalls(request.path) and not _gone(request):
                assert self._unstall is not None
                self._unstall.clear()
                if not self.stall:
                    break
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._unstall.wait(), 0.2)
            waited = 0.0
            while waited < self.delay and not _gone(request):
                await asyncio.sleep(min(0.2, self.delay - waited))
                waited += 0.2
            if _gone(request):
                response = web.Response(status=499, text="the client went away")
                return response
            if any(request.path.startswith(prefix) for prefix in self.fail):
                response = web.Response(status=500, body=SERVER_ERROR, content_type="text/plain")
            else:
                self.cluster.advance(self.tick(), self.churn, self._now(), self.log_count())
                try:
                    response = await handler(request)
                except web.HTTPException as exc:  # answered as Ray would: status, text, type
                    response = web.Response(status=exc.status, text=exc.text, content_type=exc.content_type)
            return response
        finally:
            with self.stats.lock:
                entry.in_flight -= 1
                if response is not None:
                    sent = 0
                    if isinstance(response, web.Response) and response.body is not None:
                        sent = len(response.body)  # type: ignore[arg-type]
                        entry.bytes += sent
                    if response.status >= 400:
                        entry.errors += 1
                    self.stats.add(key, sent)

    def _count_stream(self, request: web.Request, sent: int) -> None:
        """Bytes a stream wrote, counted as they go (a stream may stay open for the whole measurement)."""
        key = self.endpoint(request)
        with self.stats.lock:
            self.stats.by_endpoint[key].bytes += sent
            self.stats.add(key + " (streamed)", sent)

    def _cached(self, key: str, build: Any) -> bytes:
        tick = self.tick()
        hit = self._cache.get((key, tick))
        if hit is None:
            for old in [k for k in self._cache if k[1] != tick]:
                del self._cache[old]
            hit = self._cache[(key, tick)] = build()
        return hit

    def _routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/__stats", self._stats)
        r.add_get("/__control", self._control)
        r.add_get("/api/version", self._version)
        r.add_get("/api/authentication_mode", self._auth_mode)
        r.add_get("/api/v0/cluster_metadata", self._cluster_metadata)
        r.add_get("/api/gcs_healthz", _answer(web.Response, text="success"))
        r.add_get("/api/profiling_enabled", self._profiling)
        r.add_get("/nodes", self._nodes)
        r.add_get("/api/cluster_status", self._cluster_status)
        r.add_get("/api/v0/nodes", self._state_nodes)
        r.add_get("/api/v0/actors", self._actors)
        r.add_get("/api/v0/actors/summarize", self._actor_summary)
        r.add_get("/api/v0/workers", self._workers)
        r.add_get("/api/v0/placement_groups", self._pgs)
        r.add_get("/api/v0/tasks", self._tasks)
        r.add_get("/api/v0/tasks/summarize", self._task_summary)
        r.add_get("/logical/actors", self._logical_actors)
        r.add_get("/api/jobs/", self._jobs)
        r.add_get("/api/jobs/{job_id}", self._job)
        r.add_get("/api/v0/logs", self._log_index)
        r.add_get("/api/v0/logs/file", self._log_file)
        r.add_get("/api/v0/logs/stream", self._log_stream)
        for path in ("/api/grafana_health", "/api/prometheus_health"):
            r.add_get(path, _answer(web.json_response, {"result": False, "msg": "not set up", "data": {}}))
        r.add_get("/api/serve/applications/", _answer(web.json_response, {}))
        r.add_get("/api/data/datasets/{job_id}", _answer(web.json_response, {"datasets": []}))
        r.add_get("/api/v0/platform_events", _answer(_envelope, {"result": {}}))
        r.add_get("/api/v0/runtime_env_redaction", _answer(_envelope, {"redacted": True}))
        r.add_get("/{tail:.*}", self._static)

    # -- answers

    async def _stats(self, request: web.Request) -> web.Response:
        """The counts (with `log=1` every answer's time and size); `reset=1` starts them afresh."""
        doc = self.stats.snapshot(log=request.query.get("log") == "1")
        if request.query.get("reset") == "1":
            self.stats.reset()
        return web.json_response(doc)

    async def _control(self, request: web.Request) -> web.Response:
        """Modes for a head in another process: `stall=0|1`, `delay=S`, `fail=PREFIX,...`, `churn=0|1`,
        `log_rate=R`, `add_log_lines=N` (the driver log jumps by N lines at once)."""
        q = request.query
        if "stall" in q:
            self.set_stall(q["stall"] == "1")
        if "delay" in q:
            self.delay = float(q["delay"])
        if "fail" in q:
            self.fail = tuple(p for p in q["fail"].split(",") if p)
        if "churn" in q:
            self.churn = q["churn"] == "1"
        if "log_rate" in q:
            self.set_log_rate(float(q["log_rate"]))
        if "add_log_lines" in q:
            self.shape.log_lines += int(q["add_log_lines"])
        return web.json_response({"ok": True, "log_lines": self.log_count()})

    async def _version(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "version": "4",
                "ray_version": self.shape.ray_version,
                "ray_commit": "b7f4259e",
                "session_name": SESSION,
            }
        )

    async def _auth_mode(self, _request: web.Request) -> web.Response:
        if version_tuple(self.shape.ray_version) < (2, 52):
            raise web.HTTPNotFound(text="404: Not Found")
        return web.json_response({"authentication_mode": "disabled"})

    async def _cluster_metadata(self, _request: web.Request) -> web.Response:
        return _envelope(
            {
                "rayVersion": self.shape.ray_version,
                "pythonVersion": "3.11.7",
                "rayInitCluster": False,
                "gitCommit": "b7f4259e944bf6959f721b106adc366ddfa0c356",
                "os": "linux",
                "sessionStartTimestampMs": int(self._started * 1000),
                "libcVersion": "glibc:2.36",
            }
        )

    async def _profiling(self, _request: web.Request) -> web.Response:
        return _envelope({"profilingEnabled": False})

    async def _nodes(self, request: web.Request) -> web.Response:
        view = request.query.get("view", "")
        if view == "hostNameList":
            names = [n.hostname for n in self.cluster.nodes if n.state == "ALIVE"]
            return _envelope({"hostNameList": names}, msg="Node hostname list fetched.")
        if view != "summary":
            raise web.HTTPBadRequest(text=f"Unknown view {view}")
        return _raw_json(self._cached("summary", self._build_summary))

    def _build_summary(self) -> bytes:
        tick, now = self.tick(), self._now()
        entries = ", ".join(summary_entry(n, tick, now) for n in self.cluster.nodes)
        logical = {
            n.node_id: f"0.0/192.0 CPU\n{n.gpus}.0/{n.gpus}.0 GPU\n0B/1.46TiB memory\n"
            "0B/186.26GiB object_store_memory"
            for n in self.cluster.nodes
            if n.state == "ALIVE"
        }
        tail = json.dumps({"nodeLogicalResources": logical})[1:]
        return (
            '{"result": true, "msg": "Node summary fetched.", "data": {"summary": ['
            + entries
            + "], "
            + tail
            + "}"
        ).encode()

    async def _cluster_status(self, request: web.Request) -> web.Response:
        if request.query.get("format") == "1":
            return _raw_json(self._cached("status-text", self._build_status_text))
        return _raw_json(self._cached("status", self._build_status))

    def _build_status_text(self) -> bytes:
        alive = [n for n in self.cluster.nodes if n.state == "ALIVE"]
        gpus = sum(n.gpus for n in alive)
        lines = [
            f"======== Autoscaler status: {time.strftime('%Y-%m-%d %H:%M:%S')}.000000 ========",
            "Node status",
            "-" * 63,
            "Active:",
            *(f" 1 node_{n.node_id}" for n in alive),
            "Idle:",
            " (no idle nodes)",
            "Pending:",
            " (no pending nodes)",
            "Recent failures:",
            " (no failures)",
            "",
            "Resources",
            "-" * 63,
            "Total Usage:",
            f" {len(alive) * 96}.0/{len(alive) * 192}.0 CPU",
            f" {gpus}.0/{gpus}.0 GPU",
            "",
            "Total Demands:",
            " (no resource demands)",
        ]
        return json.dumps(
            {"result": True, "msg": "Got cluster status.", "data": {"clusterStatus": "\n".join(lines)}}
        ).encode()

    def _build_status(self) -> bytes:
        alive = [n for n in self.cluster.nodes if n.state == "ALIVE"]
        camel = {f"node{n.node_id[:1].upper()}{n.node_id[1:]}": 1 for n in alive}
        usage_by_node = {
            n.node_id: {"CPU": [96.0, 192.0], "GPU": [float(n.gpus), float(n.gpus)], "memory": [0.0, 1.6e12]}
            for n in alive
        }
        gpus = float(sum(n.gpus for n in alive))
        status = {
            "gcsRequestTime": 0.0025,
            "time": self._now(),
            "monitorPid": 3561,
            "autoscalerUpdateTime": 0.0021,
            "autoscalerReport": {
                "activeNodes": camel,
                "idleNodes": None,
                "pendingNodes": [],
                "pendingLaunches": {},
                "failedNodes": [],
                "nodeAvailabilitySummary": {"nodeAvailabilities": {}},
                "nodeActivities": None,
                "pendingResources": {},
                "nodeTypeMapping": {n.node_id: f"node_{n.node_id}" for n in alive},
                "legacy": True,
            },
            "nonTerminatedNodesTime": 8.6e-06,
            "loadMetricsReport": {
                "usage": {"CPU": [96.0 * len(alive), 192.0 * len(alive)], "GPU": [gpus, gpus]},
                "resourceDemand": [],
                "pgDemand": [],
                "requestDemand": [],
                "nodeTypes": [],
                "usageByNode": usage_by_node,
                "nodeTypeMapping": {},
            },
        }
        data = {
            "autoscalingStatus": f"Cluster status: {len(alive)} nodes\n - ResourceUsage: ...",
            "autoscalingError": None,
            "clusterStatus": status,
        }
        return json.dumps({"result": True, "msg": "Got cluster status.", "data": data}).encode()

    # -- the State API

    def _options(
        self, request: web.Request, columns: Sequence[str]
    ) -> tuple[int, bool, list[tuple[str, str, str]]]:
        """Ray's `options_from_req`: the limit (400 above 10,000), detail, and the filters zipped."""
        try:
            limit = int(request.query.get("limit", DEFAULT_LIMIT))
        except ValueError:
            raise _refuse(500, "invalid literal for int()") from None
        if limit > MAX_LIMIT:
            raise _refuse(
                400,
                f"Given limit {limit} exceeds the supported limit {MAX_LIMIT}. Use a lower limit, or set the "
                "`RAY_MAX_LIMIT_FROM_API_SERVER` environment variable to a larger value.",
            )
        detail = request.query.get("detail", "false")
        if detail not in ("true", "True", "1", "false", "False", "0"):
            raise _refuse(400, f"Invalid value for detail: {detail}")
        keys = request.query.getall("filter_keys", [])
        predicates = request.query.getall("filter_predicates", [])
        values = request.query.getall("filter_values", [])
        if len(keys) != len(values):
            raise web.HTTPInternalServerError(text=SERVER_ERROR.decode(), content_type="text/plain")
        filters = list(zip(keys, predicates, values))  # noqa: B905  # Ray zips: a missing predicate drops it
        for key, predicate, _ in filters:
            if key not in columns:
                raise _refuse(
                    400,
                    f"Given filter column {key} is not supported. Enter filters with one of the following "
                    f"columns: {list(columns)}",
                )
            if predicate not in ("=", "!="):
                raise _refuse(400, f"Unsupported filter predicate {predicate} is given.")
        return limit, detail in ("true", "True", "1"), filters

    async def _actors(self, request: web.Request) -> web.Response:
        limit, detail, filters = self._options(request, ACTOR_COLUMNS)
        actors = self.cluster.actors
        gcs = [(k, v) for k, p, v in filters if p == "=" and k in ("state", "job_id", "actor_id")]
        matching = [a for a in actors if all(_actor_value(a, k).lower() == v.lower() for k, v in gcs)]
        returned = matching[:MAX_LIMIT]
        after_truncation = len(returned) + (len(actors) - len(matching))
        kept = [a for a in returned if _matches(a, filters)]
        rows = [self._actor_row(a, detail) for a in kept[:limit]]
        return _listing(rows, total=len(actors), after=after_truncation, filtered=len(kept))

    def _actor_row(self, actor: Actor, detail: bool) -> bytes:
        if detail and actor.row:
            return actor.row
        node = self.cluster.nodes[0]
        for candidate in self.cluster.nodes:
            if candidate.index == actor.node:
                node = candidate
                break
        row: dict[str, Any] = {
            "actor_id": actor.actor_id,
            "class_name": actor.class_name,
            "state": actor.state,
            "job_id": actor.job_id,
            "name": actor.name,
            "node_id": node.node_id,
            "pid": actor.pid,
            "ray_namespace": "1fcb4c8b-223a-48ca-8ccd-2b89cf94351e",
        }
        if detail:
            row.update(
                {
                    "serialized_runtime_env": '{"env_vars": {"VLLM_USE_V1": "1"}, "working_dir": "gcs://_ray_pkg_ee56dcfc36f39836.zip"}',
                    "required_resources": {"CPU": 1.0, "GPU": 1.0} if actor.gpu is not None else {"CPU": 1.0},
                    "death_cause": None
                    if actor.state != "DEAD"
                    else {
                        "actor_died_error_context": {
                            "error_message": "The actor died because its worker process exited.",
                            "actor_id": actor.actor_id,
                        }
                    },
                    "is_detached": False,
                    "placement_group_id": None,
                    "repr_name": "",
                    "num_restarts": str(actor.restarts),
                    "num_restarts_due_to_lineage_reconstruction": "0",
                    "num_restarts_due_to_node_preemption": "0",
                    "call_site": None,
                }
            )
            if version_tuple(self.shape.ray_version) >= (2, 47):
                row["label_selector"] = {}
            if version_tuple(self.shape.ray_version) >= (2, 53):
                row["fallback_strategy"] = None
        rendered = json.dumps(row).encode()
        if detail:
            actor.row = rendered
        return rendered

    async def _actor_summary(self, request: web.Request) -> web.Response:
        _, _, filters = self._options(request, ACTOR_COLUMNS)
        kept = [a for a in self.cluster.actors[:MAX_LIMIT] if _matches(a, filters)]
        summary: dict[str, dict[str, Any]] = {}
        for actor in kept:
            entry = summary.setdefault(actor.class_name, {"class_name": actor.class_name, "state_counts": {}})
            counts = entry["state_counts"]
            counts[actor.state] = counts.get(actor.state, 0) + 1
        result = {
            "node_id_to_summary": {
                "cluster": {"summary": summary, "total_actors": len(kept), "summary_by": "class"}
            }
        }
        total = len(self.cluster.actors)
        return _envelope(
            {
                "result": {
                    "total": total,
                    "num_after_truncation": min(total, MAX_LIMIT),
                    "num_filtered": len(kept),
                    "result": result,
                    "partial_failure_warning": "",
                    "warnings": None,
                }
            }
        )

    async def _state_nodes(self, request: web.Request) -> web.Response:
        limit, detail, filters = self._options(request, NODE_COLUMNS)
        key = f"state-nodes {limit} {detail} {filters}"
        return _raw_json(self._cached(key, lambda: self._build_state_nodes(limit, detail, filters)))

    def _build_state_nodes(self, limit: int, detail: bool, filters: list[tuple[str, str, str]]) -> bytes:
        rows = []
        for node in sorted(self.cluster.nodes, key=lambda n: n.node_id):
            row: dict[str, Any] = {
                "node_id": node.node_id,
                "node_ip": node.ip,
                "is_head_node": node.head,
                "state": node.state,
                "state_message": node.message,
                "node_name": node.ip,
                "resources_total": {
                    "object_store_memory": 200000000000.0,
                    "memory": 1600000000000.0,
                    f"node:{node.ip}": 1.0,
                    "CPU": 192.0,
                    **({"GPU": float(node.gpus), "accelerator_type:H100": 1.0} if node.gpus else {}),
                    **({"node:__internal_head__": 1.0} if node.head else {}),
                },
                "labels": {"ray.io/node-id": node.node_id},
            }
            if detail:
                row["start_time_ms"] = node.start_ms
                row["end_time_ms"] = node.end_ms
            if _row_matches(row, filters):
                rows.append(json.dumps(row).encode())
        n = len(self.cluster.nodes)
        return _listing_body(rows[:limit], total=n, after=n, filtered=len(rows))

    async def _workers(self, request: web.Request) -> web.Response:
        limit, _, filters = self._options(request, WORKER_COLUMNS)
        rows = []
        for node in self.cluster.nodes[: MAX_LIMIT // 2]:
            row = {
                "worker_id": f"{node.index:08x}{0:048x}",
                "is_alive": node.state == "ALIVE",
                "worker_type": "WORKER",
                "exit_type": None,
                "node_id": node.node_id,
                "ip": node.ip,
                "pid": 20_000 + node.index * 16,
                "exit_detail": None,
                "worker_launch_time_ms": node.start_ms,
                "worker_launched_time_ms": node.start_ms,
                "start_time_ms": node.start_ms,
                "end_time_ms": 0,
                "debugger_port": None,
                "num_paused_threads": None,
            }
            if _row_matches(row, filters):
                rows.append(json.dumps(row).encode())
        n = len(self.cluster.nodes)
        return _listing(rows[:limit], total=n, after=min(n, MAX_LIMIT), filtered=len(rows))

    async def _pgs(self, request: web.Request) -> web.Response:
        limit, _, filters = self._options(request, PG_COLUMNS)
        rows = []
        for k, node in enumerate(n for n in self.cluster.nodes if n.gpus and n.state == "ALIVE"):
            if k >= MAX_LIMIT:
                break
            pg_id = f"{node.index:028x}03000000"
            row = {
                "placement_group_id": pg_id,
                "name": f"rollout_pg_{k}",
                "creator_job_id": "03000000",
                "state": "CREATED",
                "bundles": [
                    {
                        "bundle_id": {"placement_group_id": pg_id, "bundle_index": 0},
                        "unit_resources": {"GPU": float(node.gpus), "CPU": 8.0},
                        "node_id": node.node_id,
                        "label_selector": {},
                    }
                ],
                "is_detached": False,
                "stats": {
                    "scheduling_state": "FINISHED",
                    "scheduling_latency_us": "2688",
                    "scheduling_attempt": 1,
                },
                "topology_strategy": {},
                "topology_assignments": {},
            }
            if _row_matches(row, filters):
                rows.append(json.dumps(row).encode())
        return _listing(rows[:limit], total=len(rows), after=len(rows), filtered=len(rows))

    async def _tasks(self, request: web.Request) -> web.Response:
        limit, _, filters = self._options(request, TASK_COLUMNS)
        rows = []
        for actor in self.cluster.actors[: min(limit, 100)]:
            row = {
                "task_id": f"{actor.actor_id[:16]}{actor.actor_id}",
                "attempt_number": 0,
                "name": f"{actor.class_name}.generate_sequences",
                "state": "RUNNING",
                "job_id": actor.job_id,
                "actor_id": actor.actor_id,
                "type": "ACTOR_TASK",
                "func_or_class_name": f"{actor.class_name}.generate_sequences",
                "node_id": self.cluster.nodes[0].node_id,
                "worker_id": f"{actor.pid:056x}",
                "worker_pid": actor.pid,
                "error_type": None,
                "language": "PYTHON",
                "required_resources": {},
                "creation_time_ms": int(self._started * 1000),
                "start_time_ms": int(self._started * 1000),
                "end_time_ms": None,
                "error_message": None,
                "is_debugger_paused": None,
            }
            if _row_matches(row, filters):
                rows.append(json.dumps(row).encode())
        return _listing(rows, total=len(rows), after=len(rows), filtered=len(rows))

    async def _task_summary(self, _request: web.Request) -> web.Response:
        summary = {
            "cluster": {"summary": {}, "total_tasks": 0, "total_actor_tasks": 0, "total_actor_scheduled": 0}
        }
        return _envelope(
            {
                "result": {
                    "total": 0,
                    "num_after_truncation": 0,
                    "num_filtered": 0,
                    "result": {"node_id_to_summary": summary},
                }
            }
        )

    async def _logical_actors(self, _request: web.Request) -> web.Response:
        return _raw_json(self._cached("logical", self._build_logical))

    def _build_logical(self) -> bytes:
        by_index = {n.index: n for n in self.cluster.nodes}
        parts = []
        for actor in self.cluster.actors:
            node = by_index.get(actor.node, self.cluster.nodes[0])
            entry = {
                "actorId": actor.actor_id,
                "jobId": actor.job_id,
                "address": {
                    "nodeId": node.node_id,
                    "ipAddress": node.ip,
                    "port": 19763,
                    "workerId": f"{actor.pid:056x}",
                },
                "name": actor.name,
                "className": actor.class_name,
                "state": actor.state,
                "numRestarts": str(actor.restarts),
                "timestamp": self._started * 1000,
                "pid": actor.pid,
                "startTime": int(self._started * 1000),
                "endTime": 0,
                "reprName": "",
                "labelSelector": {},
                "actorClass": actor.class_name,
                "exitDetail": "-",
                "requiredResources": {"CPU": 1.0, "GPU": 1.0} if actor.gpu is not None else {"CPU": 1.0},
                "gpus": [g for g in _gpus(node, self.tick()) if g["index"] == actor.gpu],
                "processStats": {
                    "pid": actor.pid,
                    "cpuPercent": 98.0,
                    "memoryInfo": {"rss": 12_000_000_000.0, "vms": 40_000_000_000.0},
                    "cmdline": _padded_cmdline(f"ray::{actor.class_name}", 40),
                },
                "mem": [2_000_000_000_000, 1_400_000_000_000, 30.0, 600_000_000_000],
                "tpus": [],
            }
            parts.append(f'"{actor.actor_id}": ' + json.dumps(entry))
        return (
            '{"result": true, "msg": "All actors fetched.", "data": {"actors": {' + ", ".join(parts) + "}}}"
        ).encode()

    # -- jobs

    def _job_doc(self, job: Job) -> dict[str, Any]:
        return {
            "type": "SUBMISSION",
            "job_id": job.job_id,
            "submission_id": job.submission_id,
            "driver_info": {"id": job.job_id, "node_ip_address": self.cluster.nodes[0].ip, "pid": "7472"},
            "status": job.status,
            "entrypoint": "python3 -m verl.trainer.main_ppo trainer.nnodes=2000 trainer.n_gpus_per_node=8",
            "message": "Job is currently running."
            if job.status == "RUNNING"
            else "Job finished successfully.",
            "error_type": None,
            "start_time": job.start_ms,
            "end_time": job.end_ms,
            "metadata": {"owner": "synthetic"},
            "runtime_env": {"env_vars": {"VLLM_USE_V1": "1"}},
            "driver_agent_http_address": f"http://{self.cluster.nodes[0].ip}:52365",
            "driver_node_id": job.driver_node,
            "driver_exit_code": None if job.status == "RUNNING" else 0,
        }

    async def _jobs(self, _request: web.Request) -> web.Response:
        return _raw_json(
            self._cached("jobs", lambda: json.dumps([self._job_doc(j) for j in self.cluster.jobs]).encode())
        )

    async def _job(self, request: web.Request) -> web.Response:
        wanted = request.match_info["job_id"]
        for job in self.cluster.jobs:
            if wanted in (job.submission_id, job.job_id):
                return web.json_response(self._job_doc(job))
        raise web.HTTPNotFound(text=f"Job {wanted} does not exist")

    # -- logs

    def log_count(self, now: float | None = None) -> int:
        """Lines the running job's driver log holds now."""
        elapsed = (now if now is not None else time.time()) - self._log_since
        return self.shape.log_lines + int(self.shape.log_rate * elapsed)

    def set_log_rate(self, rate: float) -> None:
        """The driver log grows by RATE lines a second from now (the lines already written stay)."""
        self.shape.log_lines, self._log_since = self.log_count(), time.time()
        self.shape.log_rate = rate

    @staticmethod
    def log_line(i: int) -> str:
        """Line I of the driver log (numbered, so a lost or repeated line shows)."""
        loss, score = (i % 97) / 97, (i % 13) / 13
        return f"(TaskRunner pid=4242) step:{i} - actor/pg_loss:{loss:.4f} - critic/score/mean:{score:.3f}\n"

    def _log_text(self, start: int, end: int) -> bytes:
        return "".join(self.log_line(i) for i in range(start, end)).encode()

    def _driver_file(self) -> str:
        return f"job-driver-{self.cluster.jobs[-1].submission_id}.log" if self.cluster.jobs else ""

    async def _log_index(self, request: web.Request) -> web.Response:
        files = {
            "internal": [self._driver_file(), "debug_state.txt"],
            "raylet": ["raylet.out", "raylet.err"],
            "gcs_server": ["gcs_server.out", "gcs_server.err"],
            "worker_out": [f"worker-{a.pid:056x}-03000000-{a.pid}.out" for a in self.cluster.actors[:8]],
        }
        return _envelope({"result": files})

    def _log_range(self, request: web.Request) -> tuple[int, int]:
        if not (
            request.query.get("node_id") or request.query.get("node_ip") or request.query.get("actor_id")
        ):
            raise web.HTTPInternalServerError(text=SERVER_ERROR.decode(), content_type="text/plain")
        first, end = self._log_bounds(request)
        lines = int(request.query.get("lines", 1000))
        return (first if lines < 0 else max(first, end - lines)), end

    def _log_bounds(self, request: web.Request) -> tuple[int, int]:
        """The lines the asked-for file holds now: a job started by churn has its own driver log; every
        other name reads the one shared log."""
        name = request.query.get("filename", "")
        if name.startswith("job-driver-"):
            for job in reversed(self.cluster.jobs):
                if job.own_log and name == f"job-driver-{job.submission_id}.log":
                    return job.log_from, job.log_to if job.log_to is not None else self.log_count()
        return 0, self.log_count()

    async def _log_file(self, request: web.Request) -> web.Response:
        start, end = self._log_range(request)
        return web.Response(body=self._log_text(start, end), content_type="text/plain")

    async def _log_stream(self, request: web.Request) -> web.StreamResponse:
        start, end = self._log_range(request)
        interval = float(request.query.get("interval", 1.0))
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        while True:
            while start < end:  # chunks of at most 64 KiB, as the agent sends
                stop = min(end, start + 500)
                body = self._log_text(start, stop)
                try:
                    await response.write(body)
                except ConnectionError:  # reset, or aiohttp's "Connection lost" while draining
                    return response  # the reader went away mid-write
                self._count_stream(request, len(body))
                self.log_lines_sent += stop - start
                start = stop
            await asyncio.sleep(interval)
            if _gone(request):
                return response  # the reader went away
            end = self._log_bounds(request)[1]

    async def _static(self, request: web.Request) -> web.StreamResponse:
        if self.static_dir is None:
            raise web.HTTPNotFound(text="404: Not Found")
        relative = request.match_info["tail"] or "index.html"
        path = (self.static_dir / relative).resolve()
        if not path.is_file() or self.static_dir.resolve() not in path.parents:
            path = self.static_dir / "index.html"  # the page routes itself
        return web.Response(body=path.read_bytes(), content_type=_content_type(path))


# -- helpers ------------------------------------------------------------------------------------------


def _gone(request: web.Request) -> bool:
    return request.transport is None or request.transport.is_closing()


def _answer(make: Any, *args: Any, **kwargs: Any) -> Any:
    """A handler that always answers `make(*args, **kwargs)`."""

    async def handler(_request: web.Request) -> web.StreamResponse:
        response: web.StreamResponse = make(*args, **kwargs)
        return response

    return handler


def _content_type(path: Path) -> str:
    return {
        ".html": "text/html",
        ".js": "application/javascript",
        ".css": "text/css",
        ".json": "application/json",
        ".svg": "image/svg+xml",
        ".png": "image/png",
        ".ico": "image/x-icon",
        ".woff2": "font/woff2",
    }.get(path.suffix, "application/octet-stream")


def _envelope(data: Mapping[str, Any], msg: str = "") -> web.Response:
    return web.json_response({"result": True, "msg": msg, "data": data})


def _raw_json(body: bytes) -> web.Response:
    return web.Response(body=body, content_type="application/json")


def _refuse(status: int, msg: str) -> web.HTTPException:
    text = json.dumps({"result": False, "msg": msg, "data": {"result": None}})
    cls = web.HTTPBadRequest if status == 400 else web.HTTPInternalServerError
    return cls(text=text, content_type="application/json")


def _listing(rows: Sequence[bytes], *, total: int, after: int, filtered: int) -> web.Response:
    return _raw_json(_listing_body(rows, total=total, after=after, filtered=filtered))


def _listing_body(rows: Sequence[bytes], *, total: int, after: int, filtered: int) -> bytes:
    head = (
        '{"result": true, "msg": "", "data": {"result": {'
        f'"total": {total}, "num_after_truncation": {after}, "num_filtered": {filtered}, "result": ['
    )
    return head.encode() + b", ".join(rows) + b'], "partial_failure_warning": "", "warnings": null}}}'


def _actor_value(actor: Actor, key: str) -> str:
    return str(
        getattr(
            actor, {"actor_id": "actor_id", "class_name": "class_name", "job_id": "job_id"}.get(key, key), ""
        )
    )


def _matches(actor: Actor, filters: Sequence[tuple[str, str, str]]) -> bool:
    for key, predicate, value in filters:
        if key == "node_id" or key in ("placement_group_id", "repr_name", "ray_namespace"):
            continue  # not modelled: every actor matches
        have = _actor_value(actor, key)
        equal = have.lower() == value.lower()
        if equal != (predicate == "="):
            return False
    return True


def _row_matches(row: Mapping[str, Any], filters: Sequence[tuple[str, str, str]]) -> bool:
    for key, predicate, value in filters:
        have = row.get(key)
        text = "null" if have is None else str(have).lower()
        equal = text == value.lower() or (have is None and value in ("0", ""))
        if isinstance(have, int) and not isinstance(have, bool) and value.lstrip("-").isdigit():
            equal = have == int(value)
        if equal != (predicate == "="):
            return False
    return True


def serve_forever(shape: HeadShape, port: int, churn: bool = False, static: str = "") -> None:
    """`python -m tests.harness.synthetic_head`: a head on PORT until interrupted (or SIGTERM)."""
    import signal

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    head = SyntheticHead(shape, port=port)
    head.churn = churn
    head.static_dir = Path(static) if static else None
    with head:
        print(head.url, flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="a synthetic Ray head for scale tests")
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--actors", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=3)
    parser.add_argument("--dead", type=int, default=0)
    parser.add_argument("--log-rate", type=float, default=0.0)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log-lines", type=int, default=0)
    parser.add_argument("--churn", action="store_true")
    parser.add_argument("--static", default="", help="serve these files at / (the dashboard's web page)")
    args = parser.parse_args()
    serve_forever(
        HeadShape(args.nodes, args.gpus, args.actors, args.jobs, args.dead, args.log_rate, args.log_lines),
        args.port,
        args.churn,
        args.static,
    )
