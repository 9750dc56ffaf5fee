"""Provides the implementation of each `cockpit` command (the parser lives in `cockpit.cli`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from cockpit.core.connection import ConnectOptions, open_dashboard
from cockpit.core.errors import CockpitError
from cockpit.core.join import JoinProgress
from cockpit.core.local import processes, record
from cockpit.core.preflight import Check
from cockpit.core.ray_api import DashboardError
from cockpit.core.snapshots import NA, NodeSnapshot
from cockpit.core.targets import Target, parse_target
from cockpit.core.units import ago, duration, human_bytes, percent

if TYPE_CHECKING:
    from cockpit.core.ssh.errors import UnknownHostKey

EXIT_OK, EXIT_FAIL, EXIT_TIMEOUT = 0, 1, 3


def _options(args: argparse.Namespace, interactive: bool | None = None) -> ConnectOptions:
    """Connect options from the common flags; prompts only when a person is at the terminal."""
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    return ConnectOptions(
        token_file=args.token_file,
        dashboard_port=args.dashboard_port,
        ssh_config=args.ssh_config,
        accept_new=args.accept_new,
        expose_port=args.expose_port,
        confirm_host_key=_confirm_host_key_on_terminal if interactive else None,
        ask_passphrase=_ask_passphrase_on_terminal if interactive else None,
    )


async def _confirm_host_key_on_terminal(unknown: UnknownHostKey) -> bool:
    print(
        f"The host key of {unknown.host} (port {unknown.port}) is not known:\n"
        f"  {unknown.key.get_algorithm()} {unknown.fingerprint}\n"
        f"Check it with the cluster's admins. Trust it and add it to {unknown.known_hosts}? [y/N] ",
        end="",
        file=sys.stderr,
        flush=True,
    )
    answer = await asyncio.to_thread(sys.stdin.readline)
    return answer.strip().lower() in ("y", "yes")


async def _ask_passphrase_on_terminal(prompt: str) -> str | None:
    import getpass

    return await asyncio.to_thread(getpass.getpass, f"{prompt}: ") or None


def _err(message: str) -> None:
    print(f"cockpit: {message}", file=sys.stderr)


def _node_json(node: NodeSnapshot) -> dict[str, Any]:
    def num(value: object) -> object:
        return None if value is NA else value

    return {
        "node_id": node.node_id,
        "hostname": node.hostname,
        "ip": node.ip,
        "is_head": node.is_head,
        "state": node.state,
        "state_message": node.state_message,
        "gpus": node.logical_gpus,
        "gpu_telemetry": len(node.gpus),
        "cpus": node.logical_cpus,
        "cpu_percent": num(node.cpu_percent),
        "mem_used_bytes": num(node.mem_used_bytes),
        "mem_total_bytes": num(node.mem_total_bytes),
        "start_time": node.start_time,
        "end_time": node.end_time,
    }


# -- local ---------------------------------------------------------------------------------------


def cmd_local(args: argparse.Namespace) -> int:
    if args.local_command == "up":
        cluster = processes.up(
            args.nodes,
            args.gpus_per_node,
            args.cpus_per_node,
            auth=not args.no_auth,
            progress=lambda m: print(m, file=sys.stderr),
        )
        print(f"local cluster up: {len(cluster.nodes)} nodes, dashboard {cluster.dashboard_url}")
        if cluster.auth_token:
            print(f"token auth on: the cockpit reads the token from {record.token_file()}")
        else:
            print("token auth OFF: anyone on this machine can submit jobs to it")
        print("use it as TARGET `local`, e.g. `cockpit connect local`; stop it with `cockpit local down`")
        return EXIT_OK
    if args.local_command == "down":
        if processes.down():
            print("local cluster stopped")
        else:
            print("no local cluster was running")
        return EXIT_OK
    running = record.load()
    if running is None or not processes.is_running(running):
        _err("no local cluster is running: start one with `cockpit local up`.")
        return EXIT_FAIL
    print(f"dashboard: {running.dashboard_url}")
    print(f"gcs:       {running.gcs_address}")
    nodes = asyncio.run(_fetch_nodes(Target(kind="local", raw="local"), ConnectOptions()))
    _print_nodes(nodes)
    return EXIT_OK


# -- status / wait -------------------------------------------------------------------------------


async def _fetch_nodes(target: Target, options: ConnectOptions) -> tuple[NodeSnapshot, ...]:
    async with open_dashboard(target, options) as client:
        return await client.nodes(fresh=True)


def _print_nodes(nodes: tuple[NodeSnapshot, ...]) -> None:
    now = time.time()
    header = f"{'NODE':10} {'HOST':16} {'IP':15} {'STATE':6} {'CPU':>5} {'MEMORY':>21} {'GPUS':>4}  JOINED"
    print(header)
    for node in nodes:
        mem = f"{human_bytes(node.mem_used_bytes)}/{human_bytes(node.mem_total_bytes)}"
        joined = ago(now - node.start_time) if node.start_time else "?"
        head = "*" if node.is_head else " "
        line = (
            f"{node.node_id[:8]}{head} {node.hostname[:16]:16} {node.ip:15} {node.state:6} "
            f"{percent(node.cpu_percent):>5} {mem:>21} {node.logical_gpus:>4g}  {joined}"
        )
        if not node.alive:
            line += f"  ({node.state_message or 'no reason given'})"
        print(line)


def cmd_status(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    return asyncio.run(_status(target, _options(args), args.json))


async def _status(target: Target, options: ConnectOptions, as_json: bool) -> int:
    async with open_dashboard(target, options) as client:
        info, nodes, jobs = await asyncio.gather(
            client.cluster_info(), client.nodes(fresh=True), client.jobs()
        )
        url = client.display_url
    progress = JoinProgress.of(nodes)
    job_counts = Counter(job.status for job in jobs)
    if as_json:
        doc = {
            "target": target.raw,
            "dashboard": url,
            "ray_version": info.ray_version,
            "python_version": None if info.python_version is NA else info.python_version,
            "session_name": info.session_name,
            "alive_nodes": progress.alive_nodes,
            "dead_nodes": len(progress.dead),
            "gpus": progress.alive_gpus,
            "nodes": [_node_json(n) for n in nodes],
            "jobs": dict(job_counts),
        }
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(f"{target.raw}  Ray {info.ray_version}  Python {info.python_version}  dashboard {url}")
    print(progress.summary())
    for line in progress.death_lines():
        print(f"  {line}")
    _print_nodes(nodes)
    if jobs:
        print("jobs: " + ", ".join(f"{count} {status}" for status, count in sorted(job_counts.items())))
    return EXIT_OK


def cmd_wait(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    return asyncio.run(_wait(target, _options(args), args.nodes, args.gpus, args.timeout, args.interval))


async def _wait(
    target: Target, options: ConnectOptions, nodes: int, gpus: float | None, timeout: float, interval: float
) -> int:
    from cockpit.core.ssh.errors import SshError

    started = time.monotonic()
    live = sys.stderr.isatty()
    last_line = ""
    progress: JoinProgress | None = None
    problem = ""
    async with AsyncExitStack() as stack:
        client = None
        while True:
            try:
                if client is None:
                    # Over SSH the head's sshd may not be up yet either (the sbatch join gate): retry.
                    client = await stack.enter_async_context(open_dashboard(target, options))
                progress = JoinProgress.of(await client.nodes(), nodes, gpus)
                problem = ""
            except SshError as exc:
                if exc.permanent:
                    raise
                problem = str(exc)
            except DashboardError as exc:
                # The head may still be starting: keep waiting, but say why nothing is counted.
                problem = str(exc)
            waited = time.monotonic() - started
            line = f"[{duration(waited)}] " + (problem or (progress.summary() if progress else ""))
            if live:
                print(f"\r\x1b[K{line}", end="", file=sys.stderr, flush=True)
            elif line.split("] ", 1)[1] != last_line.split("] ", 1)[-1]:
                print(line, file=sys.stderr, flush=True)
            last_line = line
            if progress is not None and progress.ready and not problem:
                if live:
                    print(file=sys.stderr)
                print(f"ready: {progress.summary()}")
                return EXIT_OK
            if waited >= timeout:
                break
            await asyncio.sleep(min(interval, max(0.1, timeout - waited)))
    if live:
        print(file=sys.stderr)
    if progress is None:
        _err(f"timed out after {duration(timeout)}: {problem}")
        return EXIT_TIMEOUT
    missing = []
    if progress.missing_nodes:
        missing.append(f"{progress.missing_nodes} node{'s' if progress.missing_nodes != 1 else ''} missing")
    if progress.missing_gpus:
        missing.append(f"{progress.missing_gpus:g} GPU{'s' if progress.missing_gpus != 1 else ''} missing")
    gpus_text = f", {progress.alive_gpus:g}/{gpus:g} GPUs" if gpus else ""
    _err(
        f"timed out after {duration(timeout)}: {' and '.join(missing)} "
        f"({progress.alive_nodes}/{nodes} nodes joined{gpus_text})"
    )
    for line in progress.death_lines():
        print(f"  {line}", file=sys.stderr)
    return EXIT_TIMEOUT


# -- jobs ----------------------------------------------------------------------------------------


def cmd_jobs(args: argparse.Namespace) -> int:
    target = parse_target(args.target)

    async def run() -> int:
        async with open_dashboard(target, _options(args)) as client:
            jobs = await client.jobs()
        if args.json:
            print(json.dumps([asdict(job) for job in jobs], indent=2, default=dict))
            return EXIT_OK
        now = time.time()
        print(f"{'JOB':32} {'STATUS':10} {'STARTED':>12}  ENTRYPOINT")
        for job in jobs:
            started = ago(now - job.start_time) if job.start_time else "-"
            print(f"{job.key[:32]:32} {job.status:10} {started:>12}  {job.entrypoint[:80]}")
        return EXIT_OK

    return asyncio.run(run())


def cmd_stop(args: argparse.Namespace) -> int:
    target = parse_target(args.target)

    async def run() -> int:
        async with open_dashboard(target, _options(args)) as client:
            stopped = await client.stop_job(args.job)
        print(f"{args.job}: {'stop requested' if stopped else 'already finished'}")
        return EXIT_OK

    return asyncio.run(run())


def _print_checklist(checks: list[Check]) -> None:
    marks = {"ok": "✔", "fail": "✘", "warn": "!", "info": "·"}
    for check in checks:
        print(f"  {marks[check.status]} {check.name}: {check.detail}", file=sys.stderr)


def cmd_submit(args: argparse.Namespace) -> int:
    from cockpit.core import profiles
    from cockpit.core.preflight import preflight

    profile = profiles.load(profiles.find(args.profile))
    for item in args.overrides:
        if "=" not in item:
            raise CockpitError(f"{item!r} is not KEY=VALUE.")
    overrides = tuple(args.overrides)
    shown = profiles.render(profile, overrides, mask=True, check_secrets=False)
    if args.dry_run:
        _print_checklist(preflight(profile, overrides, None, at_submit=False))
        print(json.dumps(shown, indent=2, ensure_ascii=False))
        return EXIT_OK
    target = parse_target(args.target)

    async def run() -> int:
        from cockpit.core.jobs import submit_request

        async with open_dashboard(target, _options(args)) as client:
            checks = preflight(profile, overrides, await client.nodes())
            print(f"pre-flight for {profile.name}:", file=sys.stderr)
            _print_checklist(checks)
            failed = [c for c in checks if c.blocking]
            if failed and not args.force:
                where = f"{profile.path}:{profiles.line_of_text(profile.path, failed[0].key)}"
                _err(
                    f"not submitted: {where}: {failed[0].name}: {failed[0].detail} (fix it, or pass --force)"
                )
                return EXIT_FAIL
            request = profiles.render(profile, overrides, submission_id=shown["submission_id"])
            submission_id = await submit_request(client, request)
            print(f"submitted {submission_id}")
            if not args.follow:
                return EXIT_OK
            return await _follow(client, submission_id)

    return asyncio.run(run())


async def _follow(client: Any, submission_id: str, lines: int = -1) -> int:
    """Stream the driver log until the job ends; exit 0 only if it SUCCEEDED.

    One log stream is held (it counts against the dashboard's request limit); when it drops it resumes
    with no line lost or repeated (LogTail). The end is read from the file once the job is over.
    """
    from cockpit.core.log_sources import LogSource, LogTail

    out = sys.stdout.buffer
    job = await _job_when_driver_starts(client, submission_id)
    if job.driver_node_id:
        tail = LogTail(client, LogSource.driver(job), lines=lines, on_event=lambda m: _err(m))
        done = asyncio.Event()

        async def watch_status() -> None:
            nonlocal job
            while not job.terminal:
                await asyncio.sleep(2.0)
                with contextlib.suppress(DashboardError):
                    job = await client.job(submission_id)
            done.set()

        async def stream() -> None:
            async for chunk in tail.chunks():
                out.write(chunk)
                out.flush()

        streamer = asyncio.ensure_future(stream())
        watcher = asyncio.ensure_future(watch_status())
        await asyncio.wait({streamer, watcher}, return_when=asyncio.FIRST_COMPLETED)
        streamer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await streamer
        if streamer.done() and not streamer.cancelled() and streamer.exception() is not None:
            watcher.cancel()
            raise streamer.exception()  # type: ignore[misc]
        await watcher
        # The stream polls the file about once a second: deliver what it had not sent yet.
        out.write(await tail.remainder())
        out.flush()
    if job.status == "SUCCEEDED":
        print(f"{submission_id}: SUCCEEDED")
        return EXIT_OK
    message = " ".join(job.message.split())[:500] or "no message"
    _err(f"job {submission_id} {job.status}: {message}")
    return EXIT_FAIL


async def _job_when_driver_starts(client: Any, submission_id: str) -> Any:
    while True:
        job = await client.job(submission_id)
        if job.driver_node_id or job.terminal:
            return job
        await asyncio.sleep(1.0)


def cmd_logs(args: argparse.Namespace) -> int:
    chosen = [bool(args.job), bool(args.actor), bool(args.node or args.file)]
    if sum(chosen) != 1:
        raise CockpitError("give exactly one of JOB, --actor ID, or --node ID --file NAME.")
    if (args.node is None) != (args.file is None):
        raise CockpitError("--node and --file go together (e.g. --node 3f2a --file raylet.out).")
    target = parse_target(args.target)

    async def run() -> int:
        from cockpit.core.log_sources import LogSource, LogTail

        async with open_dashboard(target, _options(args)) as client:
            if args.job:
                job = await client.job(args.job)
                if args.follow:
                    return await _follow(client, job.key, lines=args.lines)
                if not job.driver_node_id:
                    raise CockpitError(f"{job.key} has no driver log yet ({job.status}).")
                source = LogSource.driver(job)
            elif args.actor:
                source = LogSource.actor(await _find_actor(client, args.actor), "err" if args.err else "out")
            else:
                source = LogSource.file(await _find_node(client, args.node), args.file)
            if not args.follow:
                sys.stdout.buffer.write(await client.log_bytes(source.params(), lines=args.lines))
                sys.stdout.flush()
                return EXIT_OK
            async for chunk in LogTail(client, source, lines=args.lines, on_event=_err).chunks():
                sys.stdout.buffer.write(chunk)
                sys.stdout.flush()
        return EXIT_OK

    return asyncio.run(run())


async def _find_actor(client: Any, wanted: str) -> Any:
    column = "actor_id" if len(wanted) == 32 and all(c in "0123456789abcdef" for c in wanted) else "name"
    rows = (await client.actors(filters=[(column, "=", wanted)], limit=10)).rows
    if not rows:
        raise CockpitError(f"no actor with {'id' if column == 'actor_id' else 'name'} {wanted!r}.")
    alive = [a for a in rows if a.state == "ALIVE"]
    return (alive or list(rows))[0]


async def _find_node(client: Any, wanted: str) -> str:
    rows = (await client.node_table()).rows
    matches = [n.node_id for n in rows if n.node_id.startswith(wanted)]
    if len(matches) != 1:
        known = ", ".join(n.node_id[:8] for n in rows)
        raise CockpitError(f"{wanted!r} matches {len(matches)} nodes (known: {known}).")
    return str(matches[0])


def cmd_gpu_agent(args: argparse.Namespace) -> int:
    from cockpit.core.gpu import detect
    from cockpit.core.gpu.agent import run

    if args.interval <= 0:
        raise CockpitError("--interval must be more than 0 seconds.")
    run(detect(), sys.stdout, interval=args.interval, count=args.count)
    return EXIT_OK


# -- profiles ------------------------------------------------------------------------------------


def cmd_profiles(args: argparse.Namespace) -> int:
    from cockpit.core import profiles
    from cockpit.core.preflight import preflight

    if args.profiles_command == "list":
        for directory in profiles.search_path():
            for path in sorted(directory.glob("*.y*ml")):
                try:
                    profile = profiles.load(path)
                except profiles.ProfileError as exc:
                    print(f"{path.stem:36} (invalid: {exc})")
                    continue
                shape = f"{profile.cluster.nodes}x{profile.cluster.gpus_per_node}"
                print(f"{profile.name:36} {shape:>6}  {profile.description[:70]}")
        return EXIT_OK
    if args.profiles_command == "check":
        paths = [profiles.find(p) for p in args.files] or [
            path for directory in profiles.search_path() for path in sorted(directory.glob("*.y*ml"))
        ]
        bad = 0
        for path in paths:
            try:
                profile = profiles.load(path)
            except profiles.ProfileError as exc:
                print(f"✘ {exc}")
                bad += 1
                continue
            failed = [c for c in preflight(profile, (), None, at_submit=False) if c.blocking]
            if failed:
                line = profiles.line_of_text(path, failed[0].key)
                print(f"✘ {path}:{line}: {failed[0].name}: {failed[0].detail}")
                bad += 1
            else:
                print(f"✔ {profile.name} ({path})")
        if bad:
            _err(f"{bad} of {len(paths)} profile(s) have problems")
        return EXIT_FAIL if bad else EXIT_OK
    profile = profiles.load(profiles.find(args.name))
    print(json.dumps(profiles.render(profile, mask=True, check_secrets=False), indent=2, ensure_ascii=False))
    return EXIT_OK


# -- the TUI -------------------------------------------------------------------------------------


def cmd_connect(args: argparse.Namespace) -> int:
    target = parse_target(args.target)
    from cockpit.ui.app import CockpitApp

    # The TUI asks its own questions (host key, passphrase) in dialogs, not on the terminal.
    app = CockpitApp(
        target,
        _options(args, interactive=False),
        expect_nodes=args.expect_nodes,
        expect_gpus=args.expect_gpus,
        layout=args.layout,
    )
    app.run()
    return app.return_code or EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from cockpit.core import profiles

    profile = profiles.load(profiles.find(args.profile))
    existing = record.load()
    started_here = existing is None or not processes.is_running(existing)
    if started_here:
        print(f"starting a local Ray cluster: {args.nodes} nodes x {args.gpus_per_node} logical GPUs ...")
        processes.up(args.nodes, args.gpus_per_node, progress=lambda m: print(f"  {m}"))
    else:
        print("using the local cluster that is already running (it is left running on exit)")
    try:
        target = Target(kind="local", raw="local")

        async def submit() -> str:
            async with open_dashboard(target) as client:
                return await client.submit_job(profiles.render(profile))

        submission_id = asyncio.run(submit())
        print(f"submitted the {profile.name} job: {submission_id}")
        from cockpit.ui.app import CockpitApp

        app = CockpitApp(
            target,
            ConnectOptions(),
            expect_nodes=args.nodes,
            expect_gpus=args.nodes * args.gpus_per_node,
            title_suffix="demo",
        )
        app.run()
    finally:
        if started_here and not args.keep:
            print("stopping the local Ray cluster ...")
            processes.down()
    return EXIT_OK
