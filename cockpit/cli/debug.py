"""Provides `cockpit debug`: the workers paused in the post-mortem debugger, and a pdb-like console on one.

`cockpit debug TARGET` lists them (numbered, identical errors grouped); `--attach N` opens a console on
the N-th: `where`, `up`, `down`, `p EXPR`, `pp EXPR`, `l`, `locals`, `c` (release: the task fails as it
would have), `q` (leave it paused). Any other line is evaluated in the selected frame. Legacy
(`RAY_DEBUG=legacy`) sessions get the worker's own pdb console, line for line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cockpit.cli.common import EXIT_OK, add_connect_options, connect_options, say

if TYPE_CHECKING:
    from cockpit.core.connect.connection import Connection
    from cockpit.core.debug.paused import PausedWorker
    from cockpit.core.debug.session import DebugSession, LegacySession

CONSOLE_HELP = """commands:
  where | bt        the stack (> marks the selected frame)
  up | down         select the caller / the callee
  l | list          the source around the selected frame's line
  locals            the selected frame's local variables
  p EXPR / pp EXPR  evaluate in the selected frame (pp: pretty-printed)
  EXPR              anything else is evaluated too
  c                 release the worker: its task fails with the original error
  q                 detach and leave the worker paused
  help              this text"""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "debug", help="workers paused in the post-mortem debugger; --attach N: a pdb-like console"
    )
    add_connect_options(p)
    p.add_argument("--json", action="store_true", help="machine-readable list")
    p.add_argument(
        "--attach",
        metavar="N",
        help="open a console on session N of the list (or the worker whose id starts with N)",
    )
    p.add_argument(
        "--no-peek",
        action="store_true",
        help="do not attach briefly to learn each exception (list only what the dashboard knows)",
    )
    p.set_defaults(handler=debug)


def numbered(workers: Iterable[PausedWorker]) -> list[PausedWorker]:
    """The sessions in the order `cockpit debug` numbers them: stable from one run to the next (by job,
    task and worker id, not by what a peek learnt), so `--attach N` finds the worker that was listed."""
    return sorted(workers, key=lambda w: (w.mode != "debugpy", w.job_id, w.task_name, w.worker_id, w.port))


def chosen(workers: list[PausedWorker], attach: str) -> PausedWorker:
    from cockpit.core.errors import CockpitError

    if not workers:
        raise CockpitError("no worker is paused in the debugger.")
    if attach.isdigit() and len(attach) <= 4:
        if not 1 <= int(attach) <= len(workers):
            raise CockpitError(f"--attach takes 1..{len(workers)} (the numbers `cockpit debug` lists).")
        return workers[int(attach) - 1]
    matches = [w for w in workers if w.worker_id.startswith(attach.lower())]
    if len(matches) != 1:
        raise CockpitError(
            f"--attach {attach}: {'no' if not matches else len(matches)} paused worker ids start so; give "
            "a number from `cockpit debug` or a longer worker id."
        )
    return matches[0]


def debug(args: argparse.Namespace) -> int:
    from cockpit.core.connect.connection import open_connection
    from cockpit.core.debug.paused import PausedCache
    from cockpit.core.debug.session import discover, settle
    from cockpit.core.targets import parse_target

    target = parse_target(args.target)

    async def run() -> int:
        async with open_connection(target, connect_options(args)) as connection:
            try:
                # --attach does not peek: it attaches to one worker, and learns its exception so.
                peek = not args.no_peek and args.attach is None
                listing = await discover(connection, PausedCache(), peek_new=peek)
                ordered = numbered(listing.workers)
                if args.attach is None:
                    print_sessions(ordered, listing.total_paused, args.json, args.target)
                    return EXIT_OK
                worker = chosen(ordered, args.attach)
                if worker.mode == "legacy":
                    await legacy_console(connection, worker)
                else:
                    await dap_console(connection, worker)
                return EXIT_OK
            finally:
                await settle(5)  # an attach cut short (Ctrl+C) ends armed: its worker stays paused

    return asyncio.run(run())


def print_sessions(workers: list[PausedWorker], total: int, as_json: bool, target: str = "TARGET") -> None:
    from cockpit.core.debug.paused import group_paused
    from cockpit.core.text import clean

    groups = group_paused(workers)
    if as_json:
        doc = {
            "sessions": [{"n": n, **w.as_dict()} for n, w in enumerate(workers, 1)],
            "groups": [
                {
                    "exception": g.exception.one_line() if g.exception else None,
                    "where": g.exception.where if g.exception else None,
                    "members": [workers.index(m) + 1 for m in g.members],
                }
                for g in groups
            ],
            "paused": total,
        }
        print(json.dumps(doc, indent=2))
        return
    if not workers:
        print("no worker is paused in the debugger")
        return
    for group in groups:
        exc = group.exception
        head = clean(exc.one_line())[:160] if exc else "(exception not known: attach to see it)"
        where = f"  at {clean(exc.where)}" if exc and exc.where else ""
        print(f"{len(group.members)} x {head}{where}")
        for worker in group.members:
            mode = " [legacy pdb]" if worker.mode == "legacy" else ""
            number = workers.index(worker) + 1
            print(
                f"  {number:>3}  {clean(worker.label())[:60]}  job {clean(worker.job_id)}  "
                f"node {clean(worker.ip)}  worker {clean(worker.worker_id[:12])}{mode}"
            )
            if worker.note:
                print(f"       {clean(worker.note)[:200]}")
    if total > len(workers):
        print(f"showing {len(workers)} of {total} paused workers")
    print(clean(f"attach: cockpit debug {shlex.quote(target)} --attach N"))


async def _read_line(prompt: str) -> str | None:
    """One console line from stdin, or None at end of input."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line = await asyncio.to_thread(sys.stdin.readline)
    return None if line == "" else line.rstrip("\n")


async def dap_console(connection: Connection, worker: PausedWorker) -> None:
    from cockpit.core.debug.errors import AttachError
    from cockpit.core.debug.session import DebugSession
    from cockpit.core.text import clean

    say(f"attaching to {clean(worker.label())} at {worker.address} ...")
    session = await DebugSession.attach(connection, worker)
    summary = session.summary()
    say(f"{clean(summary.one_line())}" + (f"  at {clean(summary.where)}" if summary.where else ""))
    console = DapConsole(session)
    say(console.position())
    try:
        while session.open:
            line = await _read_line("(cockpit-pdb) ")
            out = await console.run("q" if line is None else line)
            if out:
                say(out)
            if line is None and session.open:  # end of input and the worker could not be left paused
                await session.close()
    except (KeyboardInterrupt, asyncio.CancelledError):
        if session.open:
            try:
                await session.leave_paused()
                say("detached; the worker stays paused")
            except AttachError as exc:
                say(clean(str(exc)))
                await session.close()
        raise


class DapConsole:
    """The pdb-like commands on a DAP session; `run(line)` returns what to print."""

    def __init__(self, session: DebugSession) -> None:
        self.session = session
        self.index = session.first_user_frame()

    def position(self) -> str:
        from cockpit.core.text import clean

        if not self.session.frames:
            return "(no frames)"
        frame = self.session.frames[self.index]
        return f"> {clean(frame.path)}({frame.line}){clean(frame.name)}()"

    async def run(self, line: str) -> str:
        from cockpit.core.debug.errors import AttachError, DapError
        from cockpit.core.text import clean

        command, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        frames = self.session.frames
        try:
            if command == "":
                return ""
            if command in ("h", "help"):
                return CONSOLE_HELP
            if command in ("w", "where", "bt"):
                lines = []
                for i, f in enumerate(frames):
                    mark = ">" if i == self.index else " "
                    lines.append(f"{mark} {i:>2} {clean(f.name)}  {clean(f.path)}:{f.line}")
                return "\n".join(lines)
            if command in ("u", "up", "d", "down"):
                step = 1 if command in ("u", "up") else -1
                new = self.index + step
                if not 0 <= new < len(frames):
                    return "*** Oldest frame" if step > 0 else "*** Newest frame"
                self.index = new
                return self.position()
            if command in ("l", "list"):
                return await self.listing()
            if command == "locals":
                return await self.locals()
            if command == "pp" and rest:
                pretty = await self._pretty(rest)
                if pretty is not None:
                    return _lines(pretty)
                command = "p"  # pformat failed (e.g. a syntax error): p says why
            if command == "p" and rest:
                value = await self.session.client.evaluate(rest, self._frame_id(), context="repl")
                return _lines(value.value)
            if command in ("c", "cont", "continue"):
                await self.session.release()
                return "released: the worker goes on and its task fails with the original error"
            if command in ("q", "quit", "exit"):
                try:
                    await self.session.leave_paused()
                except AttachError as exc:
                    return clean(str(exc))
                return "detached; the worker stays paused (attach again, or release it with c)"
            value = await self.session.client.evaluate(line.strip(), self._frame_id(), context="repl")
            return _lines(value.value)
        except DapError as exc:
            if self.session.client.closed:
                self.session.ended = "the worker went away"
            return f"*** {clean(str(exc))}"

    def _frame_id(self) -> int | None:
        frames = self.session.frames
        return frames[self.index].id if frames else None

    async def _pretty(self, expression: str) -> str | None:
        from cockpit.core.debug.errors import DapError

        try:
            value = await self.session.client.evaluate(
                f"__import__('pprint').pformat({expression})", self._frame_id(), context="repl"
            )
        except DapError:
            return None
        text = str(value.value)
        # A repr of a str: the quotes and escapes of the pformat result itself are dropped.
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
            try:
                import ast

                return str(ast.literal_eval(text))
            except (ValueError, SyntaxError):
                return text
        return text

    async def locals(self) -> str:
        from cockpit.core.text import clean

        frame_id = self._frame_id()
        if frame_id is None:
            return "(no frames)"
        scopes = await self.session.client.scopes(frame_id)
        local = next((s for s in scopes if s.name.lower().startswith("local")), scopes[0] if scopes else None)
        if local is None:
            return "(no locals)"
        variables = await self.session.client.variables(local.variables_reference)
        shown = [v for v in variables if v.name != "special variables"]  # debugpy's group of dunders
        return "\n".join(f"{clean(v.name)} = {clean(v.value)[:500]}" for v in shown) or "(no locals)"

    async def listing(self, context: int = 5) -> str:
        from cockpit.core.text import clean

        if not self.session.frames:
            return "(no frames)"
        frame = self.session.frames[self.index]
        text = await self.session.source(frame.path, frame.source_reference)
        if text is None:
            return f"(source of {clean(frame.path)} not available)"
        lines = text.splitlines()
        start = max(1, frame.line - context)
        end = min(len(lines), frame.line + context)
        out = []
        for number in range(start, end + 1):
            mark = "->" if number == frame.line else "  "
            out.append(f"{number:>5} {mark} {clean(lines[number - 1])}")
        return "\n".join(out)


async def legacy_console(connection: Connection, worker: PausedWorker) -> None:
    from cockpit.core.debug.session import LegacySession
    from cockpit.core.text import clean

    head = await _head_node_id(connection)
    say(f"attaching to the pdb session of {clean(worker.label())} ...")
    session: LegacySession = await LegacySession.attach(connection, worker, head)
    summary = session.summary()
    if summary is not None:
        say(clean(f"{summary.one_line()}  at {summary.where}"))
    say(_lines(session.banner.rstrip()))
    try:
        while not session.console.closed:
            line = await _read_line("(Pdb) ")
            if line is None:
                line = "c"
            out = await session.console.run(line)
            if out.strip():
                say(_lines(out.rstrip()))
    finally:
        await session.console.close()


def _lines(text: str) -> str:
    """Worker text cleaned line by line (`clean` alone would fold the line breaks too)."""
    from cockpit.core.text import clean

    return "\n".join(clean(line) for line in text.splitlines())


async def _head_node_id(connection: Connection) -> str:
    nodes = (await connection.client.node_table()).rows
    return next((n.node_id for n in nodes if n.is_head), "")
