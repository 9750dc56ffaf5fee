"""Provides `cockpit alerts TARGET...`: the alert rules, headless, over one or several targets at once, for
`nohup`, tmux or a systemd user unit on the login node.

Each alert is printed on stdout (a line, or JSON with `--json`), written to the terminal as a desktop
notification when stdout is one (`alerts.notify`), and given to the user's command (`--command`, else
`alerts.command`) as JSON on its stdin. What the watch itself has to say (a target reached, lost, a
command that failed) goes to stderr. SIGTERM, SIGINT and SIGHUP end it cleanly: every watch, SSH link
and alert command still running is stopped first, and it exits 0; under `nohup` (SIGHUP ignored when it
started) a closed terminal does not end it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

from cockpit.cli.common import (
    EXIT_OK,
    add_connection_flags,
    connect_options,
    err,
    say,
    user_config,
)

if TYPE_CHECKING:
    from cockpit.core.alerts.book import Alert
    from cockpit.core.alerts.watch import WatchSettings
    from cockpit.core.targets import Target


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "alerts",
        help="watch targets headless and tell each alert (a failed job, a NaN, a hang, a dead node ...)",
        description="Watch one or several targets and tell each alert once: on stdout, as a desktop "
        "notification through the terminal, and to your own command (JSON on its stdin). "
        "Rules: job_failed, job_succeeded, oom, nan, node_dead, slurm_ended, hang, straggler, stuck, "
        "walltime, unreachable (turn some off with `alerts.off` in the config).",
    )
    p.add_argument(
        "targets",
        metavar="TARGET",
        nargs="+",
        help="local | http://HOST:PORT | slurm:JOBID | SSH destination (several at once)",
    )
    add_connection_flags(p, expose=False)
    p.add_argument("--json", action="store_true", help="one JSON object per alert on stdout")
    p.add_argument(
        "--command",
        dest="alert_command",  # not `command`: the subcommand's own name lives there
        metavar="CMD",
        help="run CMD once per alert with the alert's JSON on stdin (split like a shell would; "
        "default: `alerts.command` in config)",
    )
    p.add_argument(
        "--hang-after", metavar="DURATION", help="a hang after this long without progress (all jobs)"
    )
    p.add_argument(
        "--notify",
        choices=("osc9", "osc777", "bell", "off"),
        help="desktop notification through the terminal when stdout is one (default: `alerts.notify`)",
    )
    p.set_defaults(handler=alerts)


def alerts(args: argparse.Namespace) -> int:
    import shlex

    from cockpit.core.actors.roles import load_role_rules
    from cockpit.core.alerts.rules import Thresholds
    from cockpit.core.alerts.watch import WatchSettings
    from cockpit.core.errors import CockpitError
    from cockpit.core.runs.recent import remember
    from cockpit.core.targets import parse_target
    from cockpit.core.units import parse_duration

    config = user_config()
    settings = config.alerts
    targets = [parse_target(raw) for raw in dict.fromkeys(args.targets)]
    for raw in args.targets:
        remember(raw)  # for `cockpit runs`
    command = tuple(settings.command)
    if args.alert_command is not None:
        try:
            command = tuple(shlex.split(args.alert_command))
        except ValueError as exc:
            raise CockpitError(f"--command: {exc}") from None
        if not command:
            raise CockpitError(
                "--command is empty: give the program to run, e.g. --command 'notify-send ray'."
            )
    override = None
    if args.hang_after:
        try:
            override = parse_duration(args.hang_after)
        except ValueError as exc:
            raise CockpitError(f"--hang-after: {exc}") from None
    rules, problem = load_role_rules(configured=config.roles)
    if problem:
        err(problem)
    watch_settings = WatchSettings(
        interval=settings.interval,
        remind_every=settings.remind_every,
        thresholds=Thresholds.of(settings),
        hang_after=config.hang_after,
        hang_override=override,
        profile_dirs=config.profile_dirs,
        roles=rules,
    )
    notify = args.notify or settings.notify
    from cockpit.core import heap

    heap.for_a_long_run()
    asyncio.run(_run(args, targets, watch_settings, command, settings.command_timeout, notify))
    return EXIT_OK


async def _give_back_heap() -> None:
    """Free heap left by a burst goes back to the system, once a minute (`core.heap`), for as long as the
    watch runs."""
    from cockpit.core import heap

    while True:
        await asyncio.sleep(heap.GIVE_BACK_EVERY_S)
        heap.give_back()


async def _run(
    args: argparse.Namespace,
    targets: list[Target],
    settings: WatchSettings,
    command: tuple[str, ...],
    command_timeout: float,
    notify: str,
) -> None:
    from cockpit.core.alerts.send import CommandSink, json_line, notification, tmux_passthrough
    from cockpit.core.alerts.watch import TargetWatch
    from cockpit.core.text import clean

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    caught = [
        s for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP) if signal.getsignal(s) is not signal.SIG_IGN
    ]
    for sig in caught:  # one ignored at the start stays so: `nohup cockpit alerts ...` outlives its terminal
        loop.add_signal_handler(sig, stop.set)
    sink = CommandSink(command, report=lambda line: err(line), timeout=command_timeout) if command else None
    terminal = sys.stdout.isatty() and notify != "off"
    tmux = tmux_passthrough() if terminal else None

    def emit(alert: Alert) -> None:
        if args.json:
            say(json_line(alert))
        else:
            say(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(alert.at))} {clean(alert.line)}")
        if terminal:
            with contextlib.suppress(OSError, ValueError):  # a terminal gone (EIO) stops nothing
                sys.stdout.write(notification(alert, notify, tmux))  # type: ignore[arg-type]
                sys.stdout.flush()
        if sink is not None:
            sink.send(alert)

    options = connect_options(args)
    watches = [TargetWatch(target, options, settings, emit, say=lambda line: err(line)) for target in targets]
    tasks: list[asyncio.Task[Any]] = [
        asyncio.create_task(w.run(), name=f"alerts {w.target}") for w in watches
    ]
    err(f"watching {', '.join(str(t) for t in targets)} for alerts (Ctrl+C or SIGTERM ends it)")
    waiter: asyncio.Task[Any] = asyncio.create_task(stop.wait())
    heap_task = asyncio.create_task(_give_back_heap(), name="heap")
    try:
        pending: set[asyncio.Task[Any]] = set(tasks)
        while pending and not stop.is_set():
            done, pending = await asyncio.wait(pending | {waiter}, return_when=asyncio.FIRST_COMPLETED)
            pending.discard(waiter)
            for task in done - {waiter}:
                failure = None if task.cancelled() else task.exception()
                if failure is not None:
                    raise failure
        if not stop.is_set() and sink is not None:
            await sink.idle()  # every target ended (its Slurm job is over): its last alerts run first
    finally:
        for task in [*tasks, waiter, heap_task]:
            task.cancel()
        await asyncio.gather(*tasks, waiter, heap_task, return_exceptions=True)
        if sink is not None:
            await sink.close()
        for sig in caught:
            loop.remove_signal_handler(sig)
    if stop.is_set():
        err("stopped")
