"""Provides the `cockpit` command line: the contract in ARCHITECTURE.md.

Start-up stays light: argparse only here, and each command imports what it needs when it runs, so
`cockpit status --help` imports neither Textual nor Ray. Exit codes: 0 ok, 1 failure (one line on
stderr), 2 usage error, 3 timeout.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Sequence

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_TIMEOUT = 0, 1, 2, 3


def _add_connect_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="TARGET", help="local | http://HOST:PORT | SSH destination")
    parser.add_argument("--ssh-config", metavar="FILE", help="OpenSSH client config (like ssh -F)")
    parser.add_argument(
        "--dashboard-port", type=int, default=8265, help="dashboard port on the head (default 8265)"
    )
    parser.add_argument(
        "--token-file", metavar="FILE", help="Ray auth token (else RAY_AUTH_TOKEN, ~/.ray/auth_token)"
    )
    parser.add_argument(
        "--accept-new",
        action="store_true",
        help="accept and record an unknown SSH host key (never a changed one)",
    )
    parser.add_argument(
        "--expose-port",
        type=int,
        metavar="PORT",
        help="also forward the dashboard to 127.0.0.1:PORT (0 picks one); anyone on this machine can use it",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cockpit", description="A terminal cockpit for Ray clusters running multi-node RL training."
    )
    from cockpit import __version__

    parser.add_argument("--version", action="version", version=f"ray-cockpit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("connect", help="open the cockpit on a cluster")
    _add_connect_options(p)
    p.add_argument("--expect-nodes", type=int, metavar="N", help="nodes the job needs (join progress)")
    p.add_argument("--expect-gpus", type=int, metavar="G", help="GPUs the job needs (join progress)")
    p.add_argument("--layout", default="default", metavar="NAME", help="pane arrangement from layouts/")

    p = sub.add_parser("demo", help="start a local 3-node cluster, run the demo job, open the cockpit")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--gpus-per-node", type=int, default=2)
    p.add_argument("--profile", default="demo", help="profile to submit (demo, demo-crash)")
    p.add_argument("--keep", action="store_true", help="leave the cluster running on exit")

    local = sub.add_parser("local", help="a real multi-node Ray cluster on this machine").add_subparsers(
        dest="local_command", metavar="ACTION", required=True
    )
    p = local.add_parser("up", help="start the cluster")
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--gpus-per-node", type=int, default=2, help="logical GPUs per node")
    p.add_argument("--cpus-per-node", type=int, default=2, help="logical CPUs per node")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="no token auth (by default a random token guards it; without, anyone here can submit jobs)",
    )
    local.add_parser("down", help="stop it; no Ray process is left")
    local.add_parser("status", help="its nodes and dashboard address")

    p = sub.add_parser("status", help="one-shot cluster summary")
    _add_connect_options(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("wait", help="wait until the cluster has N nodes (and G GPUs)")
    _add_connect_options(p)
    p.add_argument("--nodes", type=int, required=True, metavar="N")
    p.add_argument("--gpus", type=float, metavar="G")
    p.add_argument(
        "--timeout", type=float, default=600.0, metavar="S", help="seconds (default 600); exit 3 after"
    )
    p.add_argument("--interval", type=float, default=2.0, metavar="S", help=argparse.SUPPRESS)

    p = sub.add_parser("submit", help="submit a job from a profile")
    _add_connect_options(p)
    p.add_argument("profile", metavar="PROFILE", help="profile name or path")
    p.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="extra overrides appended to the entrypoint"
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print the request (secrets masked); submit nothing"
    )
    p.add_argument("--follow", action="store_true", help="print the driver log until the job ends")
    p.add_argument("--force", action="store_true", help="submit even when a pre-flight check fails")

    p = sub.add_parser("jobs", help="list jobs")
    _add_connect_options(p)
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("stop", help="stop a job")
    _add_connect_options(p)
    p.add_argument("job", metavar="JOB", help="submission id")

    p = sub.add_parser("logs", help="print or follow a driver, actor or node log")
    _add_connect_options(p)
    p.add_argument("job", nargs="?", metavar="JOB", help="submission id: the job's driver log")
    p.add_argument("--actor", metavar="ID", help="an actor's output (actor id or name)")
    p.add_argument("--err", action="store_true", help="with --actor: stderr instead of stdout")
    p.add_argument("--node", metavar="ID", help="a node (id or unique prefix), with --file")
    p.add_argument("--file", metavar="NAME", help="a log file of --node (e.g. raylet.out)")
    p.add_argument(
        "--follow", "-f", action="store_true", help="keep printing (a job's log ends with the job)"
    )
    p.add_argument("--lines", "-n", type=int, default=1000, metavar="N", help="start with the last N lines")

    p = sub.add_parser("gpu-agent", help="print one JSON line per sample of this machine's GPUs")
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between samples (default 1)"
    )
    p.add_argument("--count", type=int, metavar="N", help=argparse.SUPPRESS)

    profiles = sub.add_parser("profiles", help="saved job profiles").add_subparsers(
        dest="profiles_command", metavar="ACTION", required=True
    )
    profiles.add_parser(
        "list", help="profiles found in ./profiles, ~/.config/ray-cockpit/profiles and shipped"
    )
    p = profiles.add_parser("show", help="a profile's job request, secrets masked")
    p.add_argument("name", metavar="NAME")
    p = profiles.add_parser("check", help="validate profiles (all found, or the given files)")
    p.add_argument("files", nargs="*", metavar="FILE")
    return parser


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    # A closed terminal (SIGHUP) or a kill (SIGTERM) unwinds like Ctrl+C, so tunnels and sockets are
    # removed on the way out.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    parser = build_parser()
    args = parser.parse_args(argv)
    from cockpit.core.errors import CockpitError

    try:
        from cockpit import commands

        handler = getattr(commands, f"cmd_{args.command.replace('-', '_')}")
        return int(handler(args))
    except CockpitError as exc:
        print(f"cockpit: {exc}", file=sys.stderr)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("cockpit: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `cockpit jobs local | head`: the reader left; end quietly as other command-line tools do.
        # (SIGPIPE stays ignored: a network write to a dropped peer must raise, not kill the process.)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
