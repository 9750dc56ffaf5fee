"""Provides `cockpit slurm up`: a Ray cluster in a new Slurm job, running a profile's job once joined."""

from __future__ import annotations

import argparse
import asyncio

from cockpit.cli.common import (
    EXIT_FAIL,
    EXIT_OK,
    add_connection_flags,
    connect_options,
    err,
    print_checklist,
    say,
    user_config,
    whole,
)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("slurm", help="a Ray cluster inside a Slurm job")
    slurm = p.add_subparsers(dest="slurm_command", metavar="ACTION", required=True)
    p = slurm.add_parser(
        "up",
        help="sbatch a Ray cluster (head on the first node), then run PROFILE on it once every node joined",
    )
    p.add_argument("profile", metavar="PROFILE", help="profile name or path")
    p.add_argument(
        "overrides", nargs="*", metavar="KEY=VALUE", help="extra overrides appended to the entrypoint"
    )
    p.add_argument("--nodes", type=whole(1), metavar="N", help="nodes (default: the profile's cluster.nodes)")
    p.add_argument(
        "--gpus-per-node",
        type=whole(0),
        metavar="G",
        help="GPUs per node (default: the profile's cluster.gpus_per_node)",
    )
    p.add_argument("--partition", metavar="P")
    p.add_argument("--account", metavar="A")
    p.add_argument("--time", metavar="T", help="time limit, as sbatch takes it (e.g. 4:00:00)")
    p.add_argument("--job-name", metavar="NAME", help="Slurm job name (default cockpit-PROFILE)")
    p.add_argument("--dry-run", action="store_true", help="print the sbatch script; submit nothing")
    p.add_argument("--hold", action="store_true", help="submit it held (it starts after `scontrol release`)")
    p.add_argument("--connect", action="store_true", help="open the cockpit on the new job at once")
    p.add_argument("--force", action="store_true", help="submit even when a pre-flight check fails")
    add_connection_flags(p)  # for --connect (its TARGET is the new job)
    p.set_defaults(handler=up)


def up(args: argparse.Namespace) -> int:
    from pathlib import Path

    from cockpit.core.jobs import launch, profiles
    from cockpit.core.jobs.launch import parse_overrides
    from cockpit.core.slurm import script as slurm_script

    profile = profiles.load(profiles.find(args.profile, warn=err, dirs=user_config().profile_dirs))
    nodes = args.nodes if args.nodes is not None else profile.cluster.nodes
    gpus = args.gpus_per_node if args.gpus_per_node is not None else profile.cluster.gpus_per_node
    if nodes < 1 or gpus < 0:
        err("--nodes must be 1 or more and --gpus-per-node 0 or more.")
        return EXIT_FAIL
    overrides = parse_overrides(args.overrides)
    # The static checks here (secrets set in this shell: sbatch passes the environment on); the cluster
    # checks run in the job, right before it submits.
    checks = launch.plan(profiles.with_shape(profile, nodes, gpus), overrides, None).checks
    blocking = [c for c in checks if c.status == "fail"]
    token_auth = slurm_script.ray_has_token_auth()
    request = slurm_script.SlurmRequest(
        profile=Path(profile.path).resolve(),
        profile_name=profile.name,
        nodes=nodes,
        gpus_per_node=gpus,
        overrides=tuple(args.overrides),
        partition=args.partition,
        account=args.account,
        time=args.time,
        job_name=args.job_name,
    )
    if args.dry_run:
        print_checklist(checks)
        print(slurm_script.render(request, tokens=slurm_script.tokens_dir() if token_auth else None), end="")
        return EXIT_OK
    if blocking and not args.force:
        print_checklist(checks)
        err(f"not submitted: {blocking[0].name}: {blocking[0].detail} (fix it, or pass --force)")
        return EXIT_FAIL
    tokens = slurm_script.prepare_tokens_dir() if token_auth else None
    script = slurm_script.render(request, tokens=tokens)
    job_id = asyncio.run(slurm_script.sbatch(script, *(["--hold"] if args.hold else [])))
    name = request.job_name or f"cockpit-{profile.name}"
    say(f"submitted Slurm job {job_id} ({name}): {nodes} node(s) x {gpus} GPU(s), then {profile.name}")
    if args.hold:
        say(f"  held: it starts after `scontrol release {job_id}`")
    say(f"  follow it:  cockpit connect slurm:{job_id}")
    say(f"  its output: {Path.cwd() / f'slurm-{job_id}.out'} and {Path.cwd() / f'{job_id}-logs'}/")
    if not args.connect:
        return EXIT_OK
    from cockpit.core.targets import parse_target
    from cockpit.ui.app import CockpitApp

    app = CockpitApp(parse_target(f"slurm:{job_id}"), connect_options(args, interactive=False))
    app.run()
    return app.return_code or EXIT_OK
