"""Provides what every command shares: the exit codes, the connect options, terminal prompts, `err`.

Imports stay light (argparse only at module level) so that building the parser for `cockpit status
--help` loads neither the HTTP client, asyncssh, Ray nor Textual.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from collections.abc import Callable

    from cockpit.core.config.settings import Config
    from cockpit.core.connect.connection import ConnectOptions
    from cockpit.core.jobs.preflight import Check
    from cockpit.core.ssh.errors import UnknownHostKey

EXIT_OK = 0
EXIT_FAIL = 1
"""A failure, with a one-line reason on stderr."""
EXIT_USAGE = 2
"""A usage error (argparse's own code)."""
EXIT_TIMEOUT = 3
EXIT_STUCK = 4
"""Something is stuck (`actors --pending`)."""
EXIT_HANG = 5
"""A hang was seen (`watch`)."""
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


@functools.lru_cache(maxsize=1)
def user_config() -> Config:
    """The configuration of this command (`config.yaml` and `COCKPIT_*`), read once, at first use. The
    core never reads it: handlers pass what it needs (profile directories, the hang default, role
    additions, the dashboard port) down as arguments, and hand the whole of it to the app."""
    from cockpit.core.config.settings import load

    return load()


def err(message: str) -> None:
    """One line on stderr, as every failure is reported (cleaned: errors quote cluster text)."""
    from cockpit.core.text import clean

    say(f"cockpit: {clean(message)}", sys.stderr)


def say(message: str, stream: TextIO | None = None) -> None:
    """A line for the person at the terminal, if there still is one: after the terminal was closed under
    the cockpit every write fails (EIO), and what it was telling must not stop what it was doing."""
    with contextlib.suppress(OSError, ValueError):
        print(message, file=stream or sys.stdout, flush=True)


def colour_wanted(choice: str = "auto") -> bool:
    """Whether a job's own colours (ANSI escapes in its log) go through to stdout: `--color always` or
    `never`; `auto`, only to a terminal and only without `NO_COLOR` (https://no-color.org: set and not
    empty). The cockpit's own output has no colour at all."""
    if choice != "auto":
        return choice == "always"
    return not os.environ.get("NO_COLOR") and sys.stdout.isatty()


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number from LOW (up to HIGH), else argparse's one-line error and exit 2
    (`--expect-nodes -3` was taken, and join progress waited for -3 nodes)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < low or (high is not None and value > high):
            wanted = f"from {low} to {high}" if high is not None else f"{low} or more"
            raise argparse.ArgumentTypeError(f"{value} is not {wanted}")
        return value

    parse.__name__ = "whole number"  # what argparse names in its own errors
    return parse


def add_connect_options(parser: argparse.ArgumentParser, target_optional: bool = False) -> None:
    """TARGET and the options every TARGET-taking command shares. `target_optional`: TARGET may be left
    out (the config's `target` is used)."""
    parser.add_argument(
        "target",
        metavar="TARGET",
        nargs="?" if target_optional else None,
        help="local | http://HOST:PORT | slurm:JOBID | SSH destination"
        + (" (default: `target` in config)" if target_optional else ""),
    )
    add_connection_flags(parser)


def add_connection_flags(parser: argparse.ArgumentParser, expose: bool = True) -> None:
    """The options of how to reach a cluster (SSH config, dashboard port, token, host keys). EXPOSE:
    `--expose-port` too (not for commands that reach several targets at once)."""
    parser.add_argument("--ssh-config", metavar="FILE", help="OpenSSH client config (like ssh -F; or config)")
    parser.add_argument(
        "--dashboard-port",
        type=whole(1, 65535),
        help="dashboard port on the head (default 8265, or `dashboard_port` in config)",
    )
    parser.add_argument(
        "--token-file", metavar="FILE", help="Ray auth token (else RAY_AUTH_TOKEN, ~/.ray/auth_token)"
    )
    parser.add_argument(
        "--accept-new",
        action="store_true",
        help="accept and record an unknown SSH host key (never a changed one)",
    )
    if not expose:
        parser.set_defaults(expose_port=None)
        return
    parser.add_argument(
        "--expose-port",
        type=whole(0, 65535),
        metavar="PORT",
        help="also forward the dashboard to 127.0.0.1:PORT (0 picks one); anyone on this machine can use it",
    )


def connect_options(
    args: argparse.Namespace, interactive: bool | None = None, timeout: float | None = None
) -> ConnectOptions:
    """Connect options from the common flags; prompts only when a person is at the terminal.

    `timeout`: seconds for one dashboard request (default: ConnectOptions' own).
    """
    from cockpit.core.connect.connection import ConnectOptions

    settings = user_config()
    if interactive is None:
        interactive = sys.stdin.isatty() and sys.stderr.isatty()
    options = ConnectOptions(
        token_file=args.token_file,
        dashboard_port=args.dashboard_port or settings.dashboard_port,
        ssh_config=args.ssh_config or settings.ssh_config or None,
        accept_new=args.accept_new,
        expose_port=args.expose_port,
        confirm_host_key=confirm_host_key_on_terminal if interactive else None,
        ask_passphrase=ask_passphrase_on_terminal if interactive else None,
        on_notice=lambda sentence: err(f"note: {sentence}"),
    )
    return options if timeout is None else replace(options, timeout=timeout)


async def confirm_host_key_on_terminal(unknown: UnknownHostKey) -> bool:
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


async def ask_passphrase_on_terminal(prompt: str) -> str | None:
    import getpass

    return await asyncio.to_thread(getpass.getpass, f"{prompt}: ") or None


def print_checklist(checks: tuple[Check, ...] | list[Check]) -> None:
    """The pre-flight checklist on stderr, one mark per check."""
    marks = {"ok": "✔", "fail": "✘", "warn": "!", "info": "·"}
    for check in checks:
        print(f"  {marks[check.status]} {check.name}: {check.detail}", file=sys.stderr)
