"""Provides the keys help: every binding of the app, of the screen it was opened from and of its pane,
under a header that names the cockpit's version (what a bug report asks first)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from cockpit import __version__


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 72; max-width: 95%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections
        self.header = f"ray-cockpit {__version__} · Keys"
        self.plain = "\n".join(f"{key} {what}" for _title, keys in sections for key, what in keys)
        """The keys as plain text (for tests and screen readers)."""

    def compose(self) -> ComposeResult:
        parts: list[Text | Table] = [Text(self.header, style="bold")]
        for title, keys in self.sections:
            parts.append(Text(f"\n{title}", style="bold"))
            table = Table.grid(padding=(0, 2))
            table.add_column(justify="right", style="bold", min_width=10, no_wrap=True)
            table.add_column(ratio=1)
            for key, description in keys:
                table.add_row(key, description)
            parts.append(table)
        parts.append(Text("\nescape closes this help", style="dim"))
        with VerticalScroll():
            yield Static(Group(*parts), id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
