"""Provides the screens of an attached debugger: a debugpy session, and a legacy pdb console.

The session screen shows the exception and its traceback, the stack (select a frame), the source around
the frame's line (as the worker has the file), the frame's scopes and variables (expanded one level at
a time, on demand), and a prompt that evaluates expressions in the selected frame, with history.
`c` releases the worker after a confirmation (its task fails with the original error), `d` or Esc
detaches and leaves it paused, `v` leaves it paused and hands it to VS Code on a loopback port.
Everything the worker sends is shown as text, never as markup.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Log, OptionList, Static, Tree
from textual.widgets.option_list import Option

from cockpit.core.debug.paused import PausedWorker
from cockpit.core.errors import CockpitError
from cockpit.ui.messages import RefreshRequested
from cockpit.ui.screens.confirm import ConfirmScreen
from cockpit.ui.state import host_of
from cockpit.ui.widgets.footer import KeyFooter
from cockpit.ui.widgets.key_hints import KeyHints
from cockpit.ui.widgets.safe_text import clean, plain

if TYPE_CHECKING:
    from textual.widgets.tree import TreeNode

    from cockpit.core.debug.dap import Variable
    from cockpit.core.debug.session import DebugSession, LegacySession

SOURCE_CONTEXT = 12
"""Lines shown above and below the frame's line before the pane has a size."""
VALUE_CELLS = 160
TENSOR_TYPES = frozenset({"Tensor", "Parameter", "DTensor", "ndarray", "Array", "ArrayImpl"})
"""Types whose shape and dtype are shown beside them (torch, numpy, jax)."""
SHAPES_PER_LEVEL = 50
HISTORY = 200


class EvalInput(Input):
    """The expression prompt: ↑ and ↓ walk the history."""

    BINDINGS = [
        Binding("up", "history(-1)", "Earlier", id="session.earlier", show=False),
        Binding("down", "history(1)", "Later", id="session.later", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.history: list[str] = []
        self.position = 0

    def remember(self, line: str) -> None:
        if line and (not self.history or self.history[-1] != line):
            self.history.append(line)
            del self.history[:-HISTORY]
        self.position = len(self.history)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self.position = max(0, min(len(self.history), self.position + step))
        self.value = self.history[self.position] if self.position < len(self.history) else ""
        self.cursor_position = len(self.value)


class DebugSessionScreen(Screen[None]):
    """An attached debugpy session on one paused worker."""

    DEFAULT_CSS = """
    DebugSessionScreen #dbg-exception { height: auto; max-height: 4; padding: 0 1; background: $panel; }
    DebugSessionScreen #dbg-top { height: 1fr; }
    DebugSessionScreen #dbg-bottom { height: 1fr; }
    DebugSessionScreen #dbg-frames { width: 40%; border: round $primary-darken-2; }
    DebugSessionScreen #dbg-source-box { border: round $primary-darken-2; overflow-x: auto; }
    DebugSessionScreen #dbg-source { width: auto; }
    DebugSessionScreen #dbg-vars { width: 40%; border: round $primary-darken-2; }
    DebugSessionScreen #dbg-output { border: round $primary-darken-2; }
    DebugSessionScreen #dbg-eval { height: 3; }
    """
    BINDINGS = [
        Binding("c", "release", "Release (task fails)", id="session.release", show=False),
        Binding("d,escape", "detach", "Detach, stay paused", id="session.detach", show=False),
        Binding("e,colon", "prompt", "Evaluate", id="session.prompt", show=False),
        Binding("v", "vscode", "Hand to VS Code", id="session.vscode", show=False),
        Binding("tab", "app.focus_next", "Next pane", id="session.next_pane", show=False),
    ]

    def __init__(self, worker: PausedWorker) -> None:
        super().__init__()
        self.worker = worker
        self.session: DebugSession | None = None
        self.frame_index = 0

    def compose(self) -> ComposeResult:
        yield Static(
            plain(f"attaching to {self.worker.label()} at {self.worker.address} …"), id="dbg-exception"
        )
        with Horizontal(id="dbg-top"):
            yield OptionList(id="dbg-frames")
            with VerticalScroll(id="dbg-source-box"):
                yield Static(id="dbg-source", expand=True)
        with Horizontal(id="dbg-bottom"):
            tree: Tree[int] = Tree("variables", id="dbg-vars")
            tree.show_root = False
            yield tree
            yield Log(id="dbg-output", max_lines=5000)
        yield EvalInput(
            placeholder="expression in the selected frame (Enter: evaluate, ↑ history)", id="dbg-eval"
        )
        yield KeyHints(self, id="dbg-hint")
        yield KeyFooter(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        self.query_one("#dbg-frames").border_title = "stack"
        self.query_one("#dbg-source-box").border_title = "source"
        self.query_one("#dbg-vars").border_title = "variables"
        self.query_one("#dbg-output").border_title = "output"
        self._open_session()

    @property
    def output(self) -> Log:
        return self.query_one("#dbg-output", Log)

    def say(self, text: str) -> None:
        """A line in the output pane (a `Log`: plain text, never markup)."""
        self.output.write_line(clean(text))

    @work(group="debug-attach", exclusive=True, description="Attaching the debugger")
    async def _open_session(self) -> None:
        from cockpit.core.debug.session import DebugSession

        host = host_of(self.app)
        paused = host.state.paused
        paused.attached = self.worker.key  # before attaching: the watcher's peeks keep off this worker
        try:
            connection = await host.connection()
            session = await DebugSession.attach(connection, self.worker)  # waits out a peek under way
        except CockpitError as exc:
            paused.attached = ""
            self.query_one("#dbg-exception", Static).update(
                Text.assemble(plain("cannot attach: ", "bold red"), plain(str(exc)), "\nEsc: back")
            )
            return
        except BaseException:
            paused.attached = ""
            raise
        self.session = session
        paused.session = session
        summary = session.summary()
        paused.cache.learn(replace(self.worker, exception=summary, note=""))
        header = Text.assemble(
            plain(summary.one_line()[:300], "bold red"),
            plain(f"  at {summary.where}" if summary.where else "", "cyan"),
            "\n",
            plain(f"{self.worker.label()} · job {self.worker.job_id} · node {self.worker.ip}", "dim"),
        )
        self.query_one("#dbg-exception", Static).update(header)
        frames = self.query_one("#dbg-frames", OptionList)
        frames.clear_options()
        for index, frame in enumerate(session.frames):
            name = frame.path.replace("\\", "/").rsplit("/", 1)[-1]
            frames.add_option(Option(plain(f"{frame.name}  {name}:{frame.line}"), id=str(index)))
        if session.exception.stack_trace:
            self.say("Traceback (from the worker):")
            for line in session.exception.stack_trace.splitlines():
                self.say(line)
        self.frame_index = session.first_user_frame()
        if session.frames:
            frames.highlighted = self.frame_index
            frames.focus()
        await self._show_frame(self.frame_index)

    @on(OptionList.OptionHighlighted, "#dbg-frames")
    async def _frame_chosen(self, event: OptionList.OptionHighlighted) -> None:
        if self.session is None or event.option_index == self.frame_index:
            return
        self.frame_index = event.option_index
        await self._show_frame(self.frame_index)

    async def _show_frame(self, index: int) -> None:
        session = self.session
        if session is None or not session.frames:
            return
        frame = session.frames[index]
        self.run_worker(self._load_source(index), group="debug-source", exclusive=True)
        self.run_worker(self._load_scopes(frame.id), group="debug-scopes", exclusive=True)

    async def _load_source(self, index: int) -> None:
        session = self.session
        if session is None:
            return
        frame = session.frames[index]
        text = await session.source(frame.path, frame.source_reference)
        view = self.query_one("#dbg-source", Static)
        # A Text, not a str: a str border title is read as markup, and the path came from the worker.
        self.query_one("#dbg-source-box").border_title = Text(clean(frame.path)[-70:])
        if text is None:
            view.update(plain(f"(source of {frame.path} is not available)", "dim"))
            return
        lines = text.splitlines()
        # As many lines around the frame's line as the pane holds, the line itself in the middle.
        height = self.query_one("#dbg-source-box").content_size.height
        context = max(1, (height - 1) // 2) if height > 0 else SOURCE_CONTEXT
        start = max(1, frame.line - context)
        end = min(len(lines), frame.line + context)
        shown = Text(no_wrap=True, overflow="ellipsis")
        for number in range(start, end + 1):
            mark = "→" if number == frame.line else " "
            style = "bold reverse" if number == frame.line else ""
            shown.append(f"{number:>5} {mark} ", style="dim" if number != frame.line else "bold")
            shown.append(clean(lines[number - 1]), style=style)
            shown.append("\n")
        view.update(shown)

    async def _load_scopes(self, frame_id: int) -> None:
        session = self.session
        if session is None:
            return
        tree = self.query_one("#dbg-vars", Tree)
        tree.clear()
        try:
            scopes = await session.client.scopes(frame_id)
        except CockpitError as exc:
            self.say(f"*** {exc}")
            return
        for scope in scopes:
            node = tree.root.add(plain(scope.name, "bold"), data=scope.variables_reference, expand=False)
            if not scope.expensive:
                await self._fill(node)
                node.expand()

    async def _fill(self, node: TreeNode[int]) -> None:
        """Reads one level of a variable (its children), once."""
        session = self.session
        if session is None or node.data is None or node.data <= 0 or node.children:
            return
        try:
            variables = await session.client.variables(node.data)
        except CockpitError as exc:
            node.add_leaf(plain(f"*** {exc}", "red"))
            return
        shapes = await self._shapes(variables[:SHAPES_PER_LEVEL])
        for variable in variables[:500]:
            label = Text.assemble(
                plain(variable.name, "bold"),
                plain(f": {variable.type}" if variable.type else "", "dim"),
                plain(f" {shapes[variable.name]}" if variable.name in shapes else "", "magenta"),
                " = ",
                plain(variable.value[:VALUE_CELLS]),
            )
            if variable.variables_reference > 0:
                node.add(label, data=variable.variables_reference, expand=False)
            else:
                node.add_leaf(label)
        if len(variables) > 500:
            node.add_leaf(plain(f"… {len(variables) - 500} more (evaluate to see them)", "dim"))

    async def _shapes(self, variables: list[Variable]) -> dict[str, str]:
        """`shape (4, 128) float32` of the tensors and arrays among VARIABLES (their repr shows values,
        not the shape), asked of the worker in the selected frame."""
        session = self.session
        if session is None or not session.frames:
            return {}
        frame = session.frames[self.frame_index].id
        found: dict[str, str] = {}
        for variable in variables:
            if variable.type not in TENSOR_TYPES or not variable.evaluate_name:
                continue
            name = variable.evaluate_name
            expression = f"'shape ' + str(tuple({name}.shape)) + ' ' + str({name}.dtype)"
            try:
                answer = await session.client.evaluate(expression, frame, context="watch")
            except CockpitError:
                continue
            found[variable.name] = "shape " + answer.value.replace("'", "").strip("()").replace(
                "), ", ") ", 1
            )
        return found

    @on(Tree.NodeExpanded, "#dbg-vars")
    async def _expanded(self, event: Tree.NodeExpanded[int]) -> None:
        await self._fill(event.node)

    @on(Input.Submitted, "#dbg-eval")
    async def _evaluate(self, event: Input.Submitted) -> None:
        prompt = self.query_one("#dbg-eval", EvalInput)
        line = event.value.strip()
        prompt.value = ""
        if not line:
            return
        prompt.remember(line)
        session = self.session
        if session is None or not session.open:
            self.say("*** not attached")
            return
        frame = session.frames[self.frame_index].id if session.frames else None
        self.say(f">>> {line}")
        try:
            value = await session.client.evaluate(line, frame, context="repl")
        except CockpitError as exc:
            self.say(f"*** {exc}")
            if session.client.closed:
                self._gone(str(exc))
            return
        self.say(value.value if value.value else "(no value)")

    def _gone(self, why: str) -> None:
        self.query_one("#dbg-exception", Static).update(
            Text.assemble(plain("the session ended: ", "bold red"), plain(why), "\nEsc: back")
        )
        self._forget()

    def _forget(self) -> None:
        host = host_of(self.app)
        if host.state.paused.attached == self.worker.key:
            host.state.paused.attached = ""
        if host.state.paused.session is self.session:
            host.state.paused.session = None

    def action_prompt(self) -> None:
        self.query_one("#dbg-eval").focus()

    async def action_detach(self) -> None:
        if self.focused is self.query_one("#dbg-eval"):
            self.query_one("#dbg-frames").focus()
            return
        session = self.session
        if session is not None and session.open:
            try:
                await session.leave_paused()
            except CockpitError as exc:
                self.notify(clean(str(exc)), severity="error", markup=False)
                return
            self.notify("detached: the worker stays paused")
        self._forget()
        self.post_message(RefreshRequested())
        self.dismiss()

    def action_release(self) -> None:
        session = self.session
        if session is None or not session.open:
            self.notify("not attached", severity="warning")
            return
        question = Text.assemble(
            ("Release this worker?", "bold"),
            "\n\n",
            plain(session.summary().one_line()[:200], "red"),
            "\n\nIt goes on and its task fails with this error, as it would have without the debugger.",
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._release()

        self.app.push_screen(ConfirmScreen(question, yes_label="Release"), answered)

    @work(group="debug-release", exclusive=True, description="Releasing the worker")
    async def _release(self) -> None:
        session = self.session
        if session is None:
            return
        try:
            await session.release()
        except CockpitError as exc:
            self.notify(clean(f"release: {exc}"), severity="error", markup=False)
            if session.open:
                return  # still attached: the user decides what next
        else:
            self.notify("released: the task fails with the original error")
        host_of(self.app).state.paused.cache.known.pop(self.worker.key, None)  # it may pause again, anew
        self._forget()
        self.post_message(RefreshRequested())
        self.dismiss()

    @work(group="debug-vscode", exclusive=True, description="Handing the worker to VS Code")
    async def action_vscode(self) -> None:
        from cockpit.core.debug.session import vscode_attach

        session = self.session
        if session is None or not session.open:
            return
        frames = list(session.frames)
        try:
            await session.leave_paused()  # debugpy takes one client: ours leaves, the worker stays paused
            connection = await host_of(self.app).connection()
            if connection.link is not None:
                port, close = await connection.link.forward_loopback(self.worker.ip, self.worker.port)
                host_of(self.app).state.paused.forwards.append((self.worker.label(), port, close))
                host = "127.0.0.1"
                where = (
                    f"127.0.0.1:{port} (forwarded through SSH until you close it with x on the Debugger "
                    "screen or quit; anyone on this machine can use it meanwhile)"
                )
            else:
                host, port = self.worker.ip, self.worker.port
                where = f"{host}:{port} (the worker's own port)"
        except CockpitError as exc:
            self.notify(clean(str(exc)), severity="error", markup=False)
            return
        self._forget()
        snippet = json.dumps({"configurations": [vscode_attach(host, port, frames)]}, indent=2)
        await self.app.push_screen_wait(SnippetScreen(where, snippet))
        self.post_message(RefreshRequested())
        self.dismiss()


class SnippetScreen(ModalScreen[None]):
    """The launch.json attach configuration for VS Code (plain text, to copy)."""

    DEFAULT_CSS = """
    SnippetScreen { align: center middle; }
    SnippetScreen > Vertical { width: 90; max-width: 98%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2; }
    """
    BINDINGS = [Binding("escape,enter,q", "close", "Close", id="snippet.close")]

    def __init__(self, where: str, snippet: str) -> None:
        super().__init__()
        self.where = where
        self.snippet = snippet

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(
                    ("The worker stays paused for VS Code.\n", "bold"),
                    "Attach to ",
                    plain(self.where),
                    "\nwith this in .vscode/launch.json (Run and Debug → attach):\n",
                )
            )
            yield Static(Text("\n".join(clean(line) for line in self.snippet.splitlines())))
            yield Static(plain("Esc: close", "dim"))

    def action_close(self) -> None:
        self.dismiss()


class LegacyConsoleScreen(Screen[None]):
    """The worker's own pdb console (`RAY_DEBUG=legacy`), line for line."""

    DEFAULT_CSS = """
    LegacyConsoleScreen #pdb-title { height: auto; padding: 0 1; background: $panel; }
    LegacyConsoleScreen #pdb-output { height: 1fr; border: round $primary-darken-2; }
    LegacyConsoleScreen #pdb-input { height: 3; }
    """
    BINDINGS = [Binding("escape", "leave", "Close console (worker goes on)", id="pdb.close")]

    def __init__(self, worker: PausedWorker) -> None:
        super().__init__()
        self.worker = worker
        self.session: LegacySession | None = None

    def compose(self) -> ComposeResult:
        yield Static(
            plain(f"pdb of {self.worker.label()} on {self.worker.ip} (legacy debugger) · attaching …"),
            id="pdb-title",
        )
        yield Log(id="pdb-output", max_lines=5000)
        yield EvalInput(placeholder="pdb command (p x, where, l, c to continue)", id="pdb-input")

    def on_mount(self) -> None:
        self._open_session()

    @work(group="pdb-attach", exclusive=True, description="Opening the pdb console")
    async def _open_session(self) -> None:
        from cockpit.core.debug.session import LegacySession

        log = self.query_one("#pdb-output", Log)
        host = host_of(self.app)
        try:
            connection = await host.connection()
            nodes = host.state.snapshot.nodes if host.state.snapshot else ()
            head = next((n.node_id for n in nodes if n.is_head), "")
            self.session = await LegacySession.attach(connection, self.worker, head)
        except CockpitError as exc:
            log.write_line(clean(f"cannot attach: {exc}"))
            return
        summary = self.session.summary()
        self.query_one("#pdb-title", Static).update(
            Text.assemble(
                plain(f"{summary.one_line()}  at {summary.where}\n" if summary else "", "bold red"),
                plain(f"pdb of {self.worker.label()} on {self.worker.ip} (legacy debugger)"),
                ("  ·  Esc closes the console (the worker goes on)", "dim"),
            )
        )
        for line in self.session.banner.splitlines():
            log.write_line(clean(line))
        self.query_one("#pdb-input").focus()

    @on(Input.Submitted, "#pdb-input")
    async def _run(self, event: Input.Submitted) -> None:
        prompt = self.query_one("#pdb-input", EvalInput)
        line = event.value
        prompt.value = ""
        prompt.remember(line.strip())
        log = self.query_one("#pdb-output", Log)
        session = self.session
        if session is None or session.console.closed:
            log.write_line("*** the console is closed")
            return
        log.write_line(clean(f"(Pdb) {line}"))
        try:
            out = await session.console.run(line)
        except CockpitError as exc:
            log.write_line(clean(f"*** {exc}"))
            return
        for text in out.rstrip("\n").splitlines():
            log.write_line(clean(text))
        if session.console.closed:
            log.write_line("(the worker went on; the console is closed)")
            host_of(self.app).state.paused.cache.known.pop(self.worker.key, None)
            self.post_message(RefreshRequested())

    def action_leave(self) -> None:
        session = self.session
        if session is None or session.console.closed:
            self.dismiss()
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._close(), group="pdb-close", exclusive=True)

        question = Text(
            "Close the pdb console? A legacy pdb session cannot be left paused: the worker goes on and its "
            "task fails with the original error."
        )
        self.app.push_screen(ConfirmScreen(question, yes_label="Close"), answered)

    async def _close(self) -> None:
        if self.session is not None:
            with contextlib.suppress(CockpitError):  # already gone: the worker went on
                await self.session.console.run("c")
            host_of(self.app).state.paused.cache.known.pop(self.worker.key, None)
        self.post_message(RefreshRequested())
        self.dismiss()
