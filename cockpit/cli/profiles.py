"""Provides `cockpit profiles list | show NAME | check [FILE ...]`."""

from __future__ import annotations

import argparse
import json
import sys

from cockpit.cli.common import EXIT_FAIL, EXIT_OK, err, say, user_config


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("profiles", help="saved job profiles")
    actions = p.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    actions.add_parser(
        "list",
        help="profiles in ./profiles, ~/.config/ray-cockpit/profiles, then shipped (first of a name wins)",
    ).set_defaults(handler=list_profiles)
    p = actions.add_parser("show", help="a profile's job request, secrets masked")
    p.add_argument("name", metavar="NAME")
    p.set_defaults(handler=show)
    p = actions.add_parser("check", help="validate profiles (all found, or the given files)")
    p.add_argument("files", nargs="*", metavar="FILE")
    p.set_defaults(handler=check)


def list_profiles(args: argparse.Namespace) -> int:
    from cockpit.core.jobs import profiles

    found, problems = profiles.discover(warn=err, dirs=user_config().profile_dirs)
    for profile in found:
        shape = f"{profile.cluster.nodes}x{profile.cluster.gpus_per_node}"
        print(f"{profile.name:36} {shape:>6}  {profile.description[:70]}")
    for problem in problems:
        print(f"(invalid) {problem}")
    return EXIT_OK


def show(args: argparse.Namespace) -> int:
    from cockpit.core.jobs import profiles

    profile = profiles.load(profiles.find(args.name, warn=err, dirs=user_config().profile_dirs))
    print(json.dumps(profiles.render(profile, mask=True, check_secrets=False), indent=2, ensure_ascii=False))
    if profile.progress or profile.hang_after is not None:
        # Not part of the job request, so not in the JSON (which scripts read): one line on stderr.
        from cockpit.core.doctor.hang import DEFAULT_HANG_AFTER
        from cockpit.core.text import clean
        from cockpit.core.units import duration

        progress = (
            f"a driver-log line matching `{clean(profile.progress)}`"
            if profile.progress
            else "any driver-log line, or GPU utilization that moves"
        )
        after = duration(DEFAULT_HANG_AFTER if profile.hang_after is None else profile.hang_after)
        say(f"hang detector: progress is {progress}; no progress for {after} is a hang", sys.stderr)
    if profile.metrics:
        from cockpit.core.metrics.lines import FORMATS
        from cockpit.core.text import clean

        shown = (
            f"the {profile.metrics} format" if profile.metrics in FORMATS else f"`{clean(profile.metrics)}`"
        )
        say(f"metrics: driver-log lines in {shown} (cockpit metrics)", sys.stderr)
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    from cockpit.core.jobs import profiles
    from cockpit.core.jobs.preflight import preflight

    if args.files:
        loaded: list[profiles.Profile | str] = []
        for name in args.files:
            try:
                loaded.append(profiles.load(profiles.find(name, warn=err, dirs=user_config().profile_dirs)))
            except profiles.ProfileError as exc:
                loaded.append(str(exc))
    else:
        found, problems = profiles.discover(warn=err, dirs=user_config().profile_dirs)
        loaded = [*found, *problems]
    bad = 0
    for item in loaded:
        if isinstance(item, str):
            print(f"✘ {item}")
            bad += 1
            continue
        checks = preflight(item, (), None, at_submit=False)
        failed = [c for c in checks if c.blocking]
        if failed:
            line = failed[0].line or profiles.line_of_text(item.path, failed[0].key)
            print(f"✘ {item.path}:{line}: {failed[0].name}: {failed[0].detail}")
            bad += 1
        else:
            print(f"✔ {item.name} ({item.path})")
            # What would block a submit from this shell but not the profile itself (a secret not set).
            for warning in (c for c in checks if c.status == "warn"):
                print(f"  ⚠ {warning.name}: {warning.detail}")
    if bad:
        err(f"{bad} of {len(loaded)} profile(s) have problems")
    return EXIT_FAIL if bad else EXIT_OK
