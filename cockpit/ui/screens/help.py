"""Provides the keys help: every binding of the app and of the screen it was opened from."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "Close", id="help.close")]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll {
        width: 64; max-width: 95%; height: auto; max-height: 90%;
        border: round $primary; background: $surface; padding: 1 2;
    }
    """

    def __init__(self, sections: list[tuple[str, list[tuple[str, str]]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        lines = ["[b]Keys[/b]"]
        for title, keys in self.sections:
            lines.append(f"\n[b]{title}[/b]")
            lines.extend(f"  [b]{key:>10}[/b]  {description}" for key, description in keys)
        lines.append("\n[dim]escape closes this help[/dim]")
        with VerticalScroll():
            yield Static("\n".join(lines), id="help-text")

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)
