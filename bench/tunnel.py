"""Provides the SSH-tunnel benchmark: dashboard requests through the cockpit's tunnel vs direct HTTP vs an
OpenSSH `ssh -L` forward.

A real OpenSSH server on 127.0.0.1 (the test suite's `tests.harness.sshd`) plays the head node: the
cluster's dashboard is on its loopback, and a private client config names it `head-node`. Three ways to
the same dashboard, each a `DashboardClient` keeping its connections for the next request:

- direct: `DashboardClient(cluster.dashboard_url)`, HTTP over loopback TCP: the baseline;
- cockpit: `open_connection(head-node)`: asyncssh in this process, HTTP over the private UNIX socket it
  forwards to the dashboard (what `cockpit connect` and `cockpit status` use for an SSH target);
- openssh: `ssh -N -L 127.0.0.1:PORT:127.0.0.1:DASHBOARD head-node` (BatchMode, ExitOnForwardFailure) as
  a subprocess, HTTP to PORT.

Series, each interleaved over the three ways in blocks of sequential requests, the order of the ways
rotated every round so that the machine's changing load hits them equally, after a warm-up:

- version: `version()` (GET /api/version, one small answer written at once);
- nodes: `nodes()` back to back: 2 concurrent GETs (the node table and `/nodes?view=summary`);
- poll: `nodes()` again, but each way's connection idles 1 s before each request, like the TUI's poll;
- log: a 400 KB log file through `log_file()` (the dashboard streams it from the head's agent);
- static: the dashboard's own `main.*.js` (about 1 MB, a static file: the dashboard does almost nothing,
  so this is the transport's throughput), on the client's bare HTTP (`wire.Wire`) over the same way.

Latency per request (perf_counter) p50/p95, and CPU time per request of this process plus, for openssh, of
the `ssh` client (POSIX CPU clocks; the sshd side is not counted). Set-up: `open_connection` until its first
answer vs starting `ssh -L` until its first answer, alternated. Diagnosis: the nodes and log series again,
direct vs cockpit, after opening a pty session on the cockpit's SSH connection (which makes sshd set
TCP_NODELAY on its socket). Every answer is checked (the same version document, the same byte count), so
a fast failure cannot pass for a fast answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import asyncssh
from common import (
    Row,
    Stats,
    cluster_token,
    cpu_clock_seconds,
    harness_sshd,
    ratio,
    stop_sshd,
)

from cockpit.core.cluster.dashboard import DashboardClient
from cockpit.core.cluster.wire import Wire
from cockpit.core.connect.connection import Connection, ConnectOptions, open_connection
from cockpit.core.local.record import LocalCluster
from cockpit.core.targets import parse_target

if TYPE_CHECKING:
    from tests.harness.sshd import SshServer

NAME = "tunnel"
ALIAS = "head-node"
WAYS = ("direct", "cockpit", "openssh")
LABEL = {"direct": "direct HTTP", "cockpit": "cockpit tunnel (asyncssh)", "openssh": "ssh -L (OpenSSH)"}
LOG_NAME = "cockpit-bench-tunnel.log"
LOG_LINES, LOG_LINE = 4000, 100
"""4000 lines of 100 bytes, newline included: 400 KB."""
MAIN_JS = re.compile(r'src="\.?(/static/js/main\.[0-9a-f]+\.js)"')
OPENSSH_KEX = re.compile(r"kex: algorithm: (\S+)")
OPENSSH_CIPHER = re.compile(r"kex: client->server cipher: (\S+) MAC: (\S+) compression: (\S+)")
TARGET_EXTRA_MS = 2.0
"""G9 in shared/reference/textual-style-and-performance.md B.10: extra p50 latency per small request."""
STALL_S = 0.035
"""A request this much slower than the direct median counts as stalled: a Nagle x delayed-ACK stall adds
about 40 ms (Linux's minimum delayed ACK), far more than anything else measured here."""


@dataclass(frozen=True)
class Series:
    """One kind of request: how many per way (full, quick) and how many in a row before the next way."""

    what: str
    count: int
    quick_count: int
    block: int
    gap_s: float = 0.0
    """Idle time before each request (not timed): with 3 ways, each connection idles 3 gaps."""


SERIES = {
    "version": Series("GET /api/version", 200, 50, 10),
    "nodes": Series("nodes() back to back (2 concurrent GETs)", 50, 20, 5),
    "poll": Series("nodes() after 1 s idle, as a poll", 15, 5, 1, gap_s=1 / 3),
    "log": Series("400 KB log_file()", 15, 5, 1),
    "static": Series("static main.js", 15, 5, 1),
}
SETUP_ROUNDS = (7, 3)
"""Set-ups of each way (full, quick)."""


@dataclass
class Way:
    """One way to the dashboard: its client, a raw session for static files, and a helper process."""

    key: str
    client: DashboardClient
    base_url: str
    token: str | None = None
    unix_socket: str | None = None
    helper: subprocess.Popen[bytes] | None = None
    """The `ssh -L` process for openssh: its CPU time counts towards this way."""
    _raw: Wire | None = None

    def raw(self) -> Wire:
        if self._raw is None:
            headers = [("Authorization", f"Bearer {self.token}")] if self.token else []
            self._raw = Wire(self.base_url, unix_socket=self.unix_socket, headers=headers)
        return self._raw

    def helper_cpu(self) -> float:
        return cpu_clock_seconds(self.helper.pid) if self.helper is not None else 0.0

    async def close(self) -> None:
        await self.client.close()
        if self._raw is not None:
            await self._raw.close()


# -- the head node: sshd, the client config, ssh -L ------------------------------------------------------


def _free_port() -> int:
    from tests.harness.sshd import find_free_port

    return find_free_port()


def _ssh_argv(config: Path, port: int, dashboard_port: int, log: Path, verbose: bool = False) -> list[str]:
    return [
        shutil.which("ssh") or "ssh",
        *("-F", str(config), "-N", "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes"),
        *(["-v"] if verbose else []),
        *("-E", str(log), "-L", f"127.0.0.1:{port}:127.0.0.1:{dashboard_port}", ALIAS),
    ]


class Helpers:
    """Every `ssh -L` started, so that a `finally` can stop any left running (also on SIGTERM)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, argv: list[str]) -> subprocess.Popen[bytes]:
        devnull = subprocess.DEVNULL
        proc = subprocess.Popen(argv, stdin=devnull, stdout=devnull, stderr=devnull, start_new_session=True)
        self.procs.append(proc)
        return proc

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)

    def stop_all(self) -> None:
        for proc in self.procs:
            self.stop(proc)


def _tail(path: Path, lines: int = 10) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


async def _until_accepting(
    port: int, proc: subprocess.Popen[bytes], log: Path, timeout: float = 15.0
) -> None:
    """Wait until `ssh -L` listens on PORT (it binds once authenticated); raise if it exits."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"ssh -L exited {proc.returncode}:\n{_tail(log)}")
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"ssh -L did not listen on {port} within {timeout:.0f} s") from None
            await asyncio.sleep(0.002)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return


def _openssh_algorithms(log: Path) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    kex, cipher = OPENSSH_KEX.search(text), OPENSSH_CIPHER.search(text)
    if kex is None or cipher is None:
        return "?"
    return f"kex {kex[1]}, {cipher[1]}, compression {cipher[3]}"


def _cockpit_algorithms(conn: Connection) -> str:
    """The cipher asyncssh negotiated, read from the link's connection (not public API: bench only)."""
    ssh = (getattr(conn.link, "_conns", None) or [None])[-1]
    if ssh is None:
        return "?"
    return f"{ssh.get_extra_info('send_cipher')}, compression {ssh.get_extra_info('send_compression')}"


@contextlib.asynccontextmanager
async def _pty_session(conn: Connection) -> AsyncIterator[None]:
    """A pty session on the cockpit's SSH connection: sshd then sets TCP_NODELAY (diagnosis only)."""
    ssh = (getattr(conn.link, "_conns", None) or [None])[-1]
    if ssh is None:
        raise RuntimeError("the cockpit's link has no SSH connection")
    channel, _session = await ssh.create_session(asyncssh.SSHClientSession, "sleep 600", term_type="dumb")
    try:
        yield
    finally:
        channel.close()
        await channel.wait_closed()


# -- requests and measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Requests:
    """The requests measured, and what each must answer."""

    token: str | None
    version: dict[str, str]
    nodes: int
    head_id: str
    log_bytes: int
    static_path: str
    static_bytes: int

    def call(self, series: str) -> Callable[[Way], Awaitable[None]]:
        calls: dict[str, Callable[[Way], Awaitable[None]]] = {
            "version": self._version,
            "nodes": self._nodes,
            "poll": self._nodes,
            "log": self._log,
            "static": self._static,
        }
        return calls[series]

    async def _version(self, way: Way) -> None:
        answer = await way.client.version()
        if answer != self.version:
            raise RuntimeError(f"{way.key}: /api/version answered {answer}, expected {self.version}")

    async def _nodes(self, way: Way) -> None:
        alive = sum(1 for n in await way.client.nodes() if n.alive)
        if alive != self.nodes:
            raise RuntimeError(f"{way.key}: nodes() listed {alive} alive nodes, expected {self.nodes}")

    async def _log(self, way: Way) -> None:
        text = await way.client.log_file(node_id=self.head_id, filename=LOG_NAME, lines=LOG_LINES)
        if len(text.encode()) != self.log_bytes:
            raise RuntimeError(
                f"{way.key}: the log came back as {len(text.encode())} of {self.log_bytes} bytes"
            )

    async def _static(self, way: Way) -> None:
        async with way.raw().request("GET", self.static_path) as resp:
            size = len(await resp.read())
        if resp.status != 200 or size != self.static_bytes:
            raise RuntimeError(f"{way.key}: {self.static_path} came back {resp.status}, {size} bytes")


async def _prepare(cluster: LocalCluster, direct: Way) -> Requests:
    """Write the log file on the head, find the dashboard's main.js, and note the expected answers."""
    version = await direct.client.version()
    head = next(n for n in (await direct.client.node_table()).rows if n.is_head and n.alive)
    log_file = Path(cluster.nodes[0].temp_dir) / "session_latest" / "logs" / LOG_NAME
    log_file.write_text("".join(f"{i:07d} {'x' * (LOG_LINE - 9)}\n" for i in range(LOG_LINES)))
    async with direct.raw().request("GET", "/") as resp:
        found = MAIN_JS.search((await resp.read()).decode("utf-8", "replace"))
    if found is None:
        raise RuntimeError("the dashboard's index.html names no /static/js/main.*.js")
    async with direct.raw().request("GET", found[1]) as resp:
        static_bytes = len(await resp.read())
    nodes = len(cluster.nodes)
    size = log_file.stat().st_size
    return Requests(direct.token, version, nodes, head.node_id, size, found[1], static_bytes)


def _rotations(ways: Sequence[Way], rounds: int) -> Iterator[Way]:
    for index in range(rounds):
        shift = index % len(ways)
        yield from [*ways[shift:], *ways[:shift]]


async def _interleaved(
    ways: Sequence[Way], call: Callable[[Way], Awaitable[None]], series: Series, quick: bool
) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Seconds per request per way, and CPU seconds per way (this process plus its helper)."""
    count, block = series.quick_count if quick else series.count, series.block
    latencies: dict[str, list[float]] = {w.key: [] for w in ways}
    cpu = {w.key: 0.0 for w in ways}
    for way in _rotations(ways, count // block):
        for _ in range(block):
            if series.gap_s:
                await asyncio.sleep(series.gap_s)
            cpu_before, helper_before = time.process_time(), way.helper_cpu()
            started = time.perf_counter()
            await call(way)
            latencies[way.key].append(time.perf_counter() - started)
            cpu[way.key] += time.process_time() - cpu_before + way.helper_cpu() - helper_before
    return latencies, cpu


async def _series(
    ways: Sequence[Way], requests: Requests, names: Sequence[str], quick: bool
) -> tuple[dict[str, dict[str, list[float]]], dict[str, dict[str, float]]]:
    samples, cpu = {}, {}
    for name in names:
        samples[name], cpu[name] = await _interleaved(ways, requests.call(name), SERIES[name], quick)
    return samples, cpu


async def _setups(
    options: ConnectOptions, config: Path, requests: Requests, rounds: int, helpers: Helpers, work: Path
) -> dict[str, list[float]]:
    """Seconds from nothing to the first answer: `open_connection` vs a fresh `ssh -L`, alternated."""

    async def cockpit() -> float:
        started = time.perf_counter()
        async with open_connection(parse_target(ALIAS), options) as conn:
            answer = await conn.client.version()
            took = time.perf_counter() - started
        if answer != requests.version:
            raise RuntimeError(f"cockpit set-up: /api/version answered {answer}")
        return took

    async def openssh() -> float:
        port, log = _free_port(), work / "ssh-setup.log"
        started = time.perf_counter()
        proc = helpers.start(_ssh_argv(config, port, options.dashboard_port, log))
        try:
            await _until_accepting(port, proc, log)
            async with DashboardClient(f"http://127.0.0.1:{port}", token=requests.token) as client:
                answer = await client.version()
                took = time.perf_counter() - started
        finally:
            helpers.stop(proc)
        if answer != requests.version:
            raise RuntimeError(f"ssh -L set-up: /api/version answered {answer}")
        return took

    ways: dict[str, Callable[[], Awaitable[float]]] = {"cockpit": cockpit, "openssh": openssh}
    samples: dict[str, list[float]] = {key: [] for key in ways}
    for way in ways.values():  # warm-up: imports (asyncssh), the ssh binary in the page cache
        await way()
    keys = list(ways)
    for index in range(rounds):
        for key in keys[index % 2 :] + keys[: index % 2]:
            samples[key].append(await ways[key]())
    return samples


async def _measure(
    cluster: LocalCluster, config: Path, token_file: Path | None, quick: bool, helpers: Helpers
) -> dict[str, Any]:
    token = token_file.read_text().strip() if token_file is not None else None
    options = ConnectOptions(
        ssh_config=str(config),
        dashboard_port=cluster.dashboard_port,
        token_file=str(token_file) if token_file is not None else None,
    )
    direct = Way("direct", DashboardClient(cluster.dashboard_url, token=token), cluster.dashboard_url, token)
    openssh: Way | None = None
    doc: dict[str, Any] = {}
    try:
        requests = await _prepare(cluster, direct)
        local, ssh_log = _free_port(), config.parent / "ssh-forward.log"
        ssh = helpers.start(_ssh_argv(config, local, options.dashboard_port, ssh_log, verbose=True))
        url = f"http://127.0.0.1:{local}"
        openssh = Way("openssh", DashboardClient(url, token=token), url, token, helper=ssh)
        await _until_accepting(local, ssh, ssh_log)
        async with open_connection(parse_target(ALIAS), options) as conn:
            assert conn.link is not None
            socket = conn.link.socket_path
            cockpit = Way("cockpit", conn.client, "http://dashboard", token, unix_socket=socket)
            try:
                ways = [direct, cockpit, openssh]
                for way in ways:  # warm-up: connections, the dashboard's first answers, SSH windows
                    for name in SERIES:
                        for _ in range(SERIES[name].block):
                            await requests.call(name)(way)
                doc["samples_s"], doc["cpu_s"] = await _series(ways, requests, list(SERIES), quick)
                async with _pty_session(conn):
                    await asyncio.sleep(0.2)
                    doc["pty_samples_s"], _ = await _series(
                        [direct, cockpit], requests, ["nodes", "log"], quick
                    )
                doc["algorithms"] = {
                    "cockpit": _cockpit_algorithms(conn),
                    "openssh": _openssh_algorithms(ssh_log),
                }
            finally:
                await cockpit.close()
    finally:
        await direct.close()
        if openssh is not None:
            await openssh.close()
            if openssh.helper is not None:
                helpers.stop(openssh.helper)
    rounds = SETUP_ROUNDS[1] if quick else SETUP_ROUNDS[0]
    doc["setup_s"] = await _setups(options, config, requests, rounds, helpers, config.parent)
    doc["requests"] = {
        "log_bytes": requests.log_bytes,
        "static_path": requests.static_path,
        "static_bytes": requests.static_bytes,
        "nodes": requests.nodes,
    }
    return doc


# -- summary ---------------------------------------------------------------------------------------------


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


def _paired_extra(samples: dict[str, list[float]], key: str, block: int) -> float:
    """Median over rounds of (median of KEY's block - median of direct's block): load drift cancels out."""
    a, b = samples[key], samples["direct"]
    return statistics.median(
        statistics.median(a[i : i + block]) - statistics.median(b[i : i + block])
        for i in range(0, len(a), block)
    )


def _summarise(
    samples: dict[str, list[float]], cpu: dict[str, float] | None = None
) -> dict[str, dict[str, float]]:
    return {
        key: {
            "p50": statistics.median(values),
            "p95": _p95(values),
            **Stats.of(values).as_dict(),
            **({"cpu_per_request": cpu[key] / len(values)} if cpu is not None else {}),
        }
        for key, values in samples.items()
    }


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.01 else f"{seconds * 1000:.1f} ms"


def run(cluster: LocalCluster, state_dir: Path, quick: bool) -> tuple[dict[str, Any], list[Row]]:
    """Measure; return the JSON document and the table rows."""
    work = Path(tempfile.mkdtemp(prefix="cockpit-bench-tunnel-"))
    helpers = Helpers()
    server: SshServer | None = None
    try:
        server = harness_sshd(work / "sshd")
        config = work / "ssh_config"
        config.write_text(server.ssh_config_entry(ALIAS))
        token, token_file = cluster_token(state_dir), None
        if token is not None:
            token_file = work / "token"
            token_file.touch(mode=0o600)
            token_file.write_text(token + "\n")
        raw = asyncio.run(_measure(cluster, config, token_file, quick, helpers))
    finally:
        helpers.stop_all()
        left = stop_sshd(server, work, NAME)
    samples, cpu, pty = raw["samples_s"], raw["cpu_s"], raw["pty_samples_s"]
    stats = {name: _summarise(samples[name], cpu[name]) for name in samples}
    pty_stats = {name: _summarise(values) for name, values in pty.items()}
    stalled = {
        label: {
            name: {
                k: sum(v > stats_[name]["direct"]["p50"] + STALL_S for v in vs) for k, vs in series.items()
            }
            for name, series in table.items()
        }
        for label, table, stats_ in (("steady", samples, stats), ("pty", pty, pty_stats))
    }
    setup = {key: Stats.of(values) for key, values in raw["setup_s"].items()}
    version = stats["version"]
    extra_ms = {k: 1000 * (version[k]["p50"] - version["direct"]["p50"]) for k in ("cockpit", "openssh")}
    paired_ms = {k: 1000 * _paired_extra(samples["version"], k, SERIES["version"].block) for k in extra_ms}
    sizes = {"log": raw["requests"]["log_bytes"], "static": raw["requests"]["static_bytes"]}

    def over(name: str, num: str, den: str, field: str = "p50", table: Any = stats) -> float:
        return ratio(table[name][num][field], table[name][den][field])

    ratios = {
        f"{name}_{field}_{num}_over_{den}": over(name, num, den, field)
        for name in SERIES
        for field in ("p50", "p95", "cpu_per_request")
        for num, den in (("cockpit", "direct"), ("cockpit", "openssh"), ("openssh", "direct"))
    }
    ratios |= {
        f"pty_{name}_p50_cockpit_over_direct": over(name, "cockpit", "direct", table=pty_stats)
        for name in pty
    }
    ratios["setup_cockpit_over_openssh"] = ratio(setup["cockpit"].median, setup["openssh"].median)
    doc = {
        "nodes": len(cluster.nodes),
        "series": {name: {**vars(s), "count": len(samples[name]["direct"])} for name, s in SERIES.items()},
        "requests": raw["requests"],
        "algorithms": raw["algorithms"],
        "stats_s": stats,
        "pty_stats_s": pty_stats,
        "setup_stats_s": {key: s.as_dict() for key, s in setup.items()},
        "version_extra_ms_p50_over_direct": extra_ms,
        "version_extra_ms_paired_over_direct": paired_ms,
        "target_extra_ms_p50": TARGET_EXTRA_MS,
        "target_met": extra_ms["cockpit"] <= TARGET_EXTRA_MS,
        "stall_s": STALL_S,
        "stalled_requests": stalled,
        "mb_per_s": {
            name: {k: size / v["p50"] / 1e6 for k, v in stats[name].items()} for name, size in sizes.items()
        },
        "ratios": ratios,
        "samples_s": samples,
        "pty_samples_s": pty,
        "setup_samples_s": raw["setup_s"],
        "cpu_s": cpu,
        "sshd_running_after": server is not None and server.running,
        "processes_left": left,
    }
    return doc, _rows(doc)


def _pair(ratios: dict[str, float], name: str) -> Callable[..., str]:
    """Formats NAME's ratios of cockpit over direct and over ssh -L for one field."""

    def pair(field: str, digits: int = 2) -> str:
        over = [ratios[f"{name}_{field}_cockpit_over_{den}"] for den in ("direct", "openssh")]
        return "; ".join(f"{value:.{digits}f}x" for value in over)

    return pair


def _rows(doc: dict[str, Any]) -> list[Row]:
    stats, ratios, mbs = doc["stats_s"], doc["ratios"], doc["mb_per_s"]
    rows = []
    for name in SERIES:
        what, n = SERIES[name].what, doc["series"][name]["count"]
        if name == "static":
            what = f"{doc['requests']['static_bytes'] / 1e6:.1f} MB {what}"
        for key in WAYS:
            s = stats[name][key]
            cpu = f"CPU {s['cpu_per_request'] * 1e6:.0f} us/request" + (
                " incl. ssh" if key == "openssh" else ""
            )
            rate = f"{mbs[name][key]:.0f} MB/s; " if name in mbs else ""
            count = doc["stalled_requests"]["steady"][name][key]
            stalls = f"{count} stalled; " if key != "direct" else ""
            rows.append(
                Row(
                    NAME,
                    f"{what}, {LABEL[key]}",
                    f"p50 {_ms(s['p50'])}, p95 {_ms(s['p95'])}",
                    f"{rate}{cpu}; {stalls}n={n}",
                )
            )
        if name == "version":
            extra, paired = (
                doc["version_extra_ms_p50_over_direct"],
                doc["version_extra_ms_paired_over_direct"],
            )
            met = "met" if doc["target_met"] else "NOT met"
            rows.append(
                Row(
                    NAME,
                    "extra per small request over direct: cockpit; ssh -L",
                    f"+{extra['cockpit']:.2f} ms; +{extra['openssh']:.2f} ms",
                    f"p50; paired per round {paired['cockpit']:+.2f}; {paired['openssh']:+.2f} ms; "
                    f"target <= {TARGET_EXTRA_MS:.0f} ms p50: {met}",
                )
            )
        pair = _pair(ratios, name)
        rows.append(
            Row(
                NAME,
                f"ratio {name}: cockpit / direct; cockpit / ssh -L",
                pair("p50"),
                f"p95 {pair('p95')}; CPU {pair('cpu_per_request', 1)}",
            )
        )
    for key, what in (
        ("cockpit", "open_connection() to first answer"),
        ("openssh", "ssh -L start to first answer"),
    ):
        s = doc["setup_stats_s"][key]
        rows.append(
            Row(
                NAME,
                what,
                f"{_ms(s['median'])} ({s['min'] * 1000:.0f}-{s['max'] * 1000:.0f})",
                doc["algorithms"][key],
            )
        )
    rows.append(Row(NAME, "ratio set-up cockpit / ssh -L", f"{ratios['setup_cockpit_over_openssh']:.2f}x"))
    for name in doc["pty_stats_s"]:
        s = doc["pty_stats_s"][name]
        rows.append(
            Row(
                NAME,
                f"with a pty session open: {SERIES[name].what}",
                f"{ratios[f'pty_{name}_p50_cockpit_over_direct']:.2f}x",
                f"cockpit / direct p50: {_ms(s['cockpit']['p50'])} / {_ms(s['direct']['p50'])}, "
                f"p95 {_ms(s['cockpit']['p95'])}; {doc['stalled_requests']['pty'][name]['cockpit']} stalled "
                "(sshd sets TCP_NODELAY for a pty)",
            )
        )
    return rows
