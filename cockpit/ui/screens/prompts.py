"""Provides the questions the cockpit asks while connecting: trust a host key, an SSH key's passphrase."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from cockpit.core.ssh.errors import UnknownHostKey
from cockpit.ui.widgets.safe_text import plain

PROMPT_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 76; max-width: 95%; height: auto; border: round $warning; background: $surface; padding: 1 2;
}}
{name} Horizontal {{ height: auto; align-horizontal: right; margin-top: 1; }}
{name} Button {{ margin-left: 2; }}
"""


class HostKeyScreen(ModalScreen[bool]):
    """Shows an unknown host's key fingerprint and asks whether to trust it (the answer is the result)."""

    DEFAULT_CSS = PROMPT_CSS.format(name="HostKeyScreen")
    BINDINGS = [
        Binding("escape,n", "answer(False)", "Refuse", id="hostkey.refuse"),
        Binding("y", "answer(True)", "Trust", id="hostkey.trust"),
    ]

    def __init__(self, unknown: UnknownHostKey) -> None:
        super().__init__()
        self.unknown = unknown

    def compose(self) -> ComposeResult:
        u = self.unknown
        with Vertical():
            # Host names and paths as typed; the algorithm and fingerprint come from the server.
            yield Static(
                Text.assemble(
                    ("Unknown host key", "bold"),
                    "\n\n",
                    plain(u.host),
                    f" (port {u.port}) offers the key\n\n  ",
                    plain(f"{u.key.get_algorithm()} {u.fingerprint}", "bold"),
                    "\n\nCompare it with what your cluster's admins publish. "
                    "If you trust it, it is added to ",
                    plain(u.known_hosts),
                    " and never asked again. A key that later changes is always refused.",
                )
            )
            with Horizontal():
                yield Button("Refuse (n)", id="refuse", variant="error")
                yield Button("Trust (y)", id="trust", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "trust")

    def action_answer(self, trust: bool) -> None:
        self.dismiss(trust)


class PassphraseScreen(ModalScreen[str | None]):
    """Asks for an encrypted SSH key's passphrase; it lives in memory only, for reconnects."""

    DEFAULT_CSS = PROMPT_CSS.format(name="PassphraseScreen")
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="passphrase.cancel")]

    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text.assemble(
                    plain(self.prompt, "bold"),
                    "\nIt is kept in memory for reconnects and never written anywhere.",
                )
            )
            yield Input(password=True, id="passphrase")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
