"""Provides `cockpit config show` (the effective configuration, and where each value came from; the layout
it names checked as the app checks it), `cockpit config keys` (every binding id, its default key and the
key in effect) and `cockpit config schema [KIND]` (where the JSON Schema of each kind of file is, for
editors)."""

from __future__ import annotations

import argparse

from cockpit.cli.common import EXIT_OK, err, say
from cockpit.cli.schemas import KINDS as SCHEMA_KINDS  # argparse only: the generator imports lazily


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help="the configuration file: show | keys | schema")
    what = p.add_subparsers(dest="config_command", metavar="show|keys|schema", required=True)
    show = what.add_parser("show", help="the effective configuration and where each value came from")
    show.set_defaults(handler=show_config)
    keys = what.add_parser(
        "keys", help="every key binding: its id (for `keys:` in config), default, effective"
    )
    keys.set_defaults(handler=show_keys)
    schema = what.add_parser(
        "schema",
        help="the path of the JSON Schema of a kind of file, for editors "
        "(# yaml-language-server: $schema=PATH)",
    )
    schema.add_argument(
        "kind",
        nargs="?",
        choices=SCHEMA_KINDS,
        metavar="KIND",
        help=f"one of {', '.join(SCHEMA_KINDS)} (default: all)",
    )
    schema.set_defaults(handler=show_schema)


def show_config(args: argparse.Namespace) -> int:
    from cockpit.core.config.settings import FIELDS, load, show
    from cockpit.ui.layouts import load_layout_or_default

    config = load()
    for problem in config.problems:
        err(problem)
    _layout, layout_problem = load_layout_or_default(config.layout)  # what the cockpit screen would say
    if layout_problem:
        err(layout_problem)
    state = "found" if config.path.exists() else "not found: every value below is its default or from env"
    say(f"# {config.path} ({state})")
    say(
        "# each line: the effective value, then where it came from (default, FILE:LINE, env) and what it does"
    )
    group = ""
    for spec in FIELDS:
        top, _, sub = spec.name.rpartition(".")
        if top and top != group:
            say(f"{top}:")
        group = top
        name = f"  {sub}" if top else spec.name
        env = f" (env {spec.env})" if spec.env else ""
        say(f"{name + ': ' + show(config[spec.name]):<34} # {config.origins[spec.name]} · {spec.doc}{env}")
    return EXIT_OK


def show_keys(args: argparse.Namespace) -> int:
    import cockpit.ui.app  # noqa: F401  # the app's own bindings (all_bindings imports every screen's)
    from cockpit.core.config.settings import load
    from cockpit.ui.keymap import all_bindings, check_keys, usable_keys

    config = load()
    for problem in (*config.problems, *check_keys(config)):
        err(problem)
    keys = usable_keys(config)  # what is in effect: an entry refused above is not
    say(f"{'id':<24} {'key':<14} {'default':<14} what")
    for binding_id, binding in sorted(all_bindings().items()):
        key = keys.get(binding_id, binding.key)
        say(f"{binding_id:<24} {key:<14} {binding.key:<14} {binding.tooltip or binding.description}")
    return EXIT_OK


def show_schema(args: argparse.Namespace) -> int:
    from cockpit.cli.schemas import shipped_path

    if args.kind:
        say(str(shipped_path(args.kind)))
        return EXIT_OK
    for kind in SCHEMA_KINDS:
        say(f"{kind:<8} {shipped_path(kind)}")
    return EXIT_OK
