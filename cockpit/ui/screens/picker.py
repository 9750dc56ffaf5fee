"""Provides a keyboard picker: type to filter a list, Enter to choose, escape to back out."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from cockpit.ui.screens.launcher import arrows_move_list, fuzzy_score
from cockpit.ui.widgets.safe_text import plain


class PickScreen(ModalScreen[str | None]):
    """Returns the id of the chosen item, or None. Each item is one line, cut with "…" (`text-wrap`): a
    label is the cluster's text (an IP, a file name) and can be any length."""

    DEFAULT_CSS = """
    PickScreen { align: center middle; }
    PickScreen > Vertical {
        width: 90; max-width: 96%; height: 80%; border: round $primary; background: $surface; padding: 0 1;
    }
    PickScreen OptionList { height: 1fr; text-wrap: nowrap; text-overflow: ellipsis; }
    """
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="pick.cancel")]

    def __init__(self, title: str, items: list[tuple[str, Text]]) -> None:
        """`items` are (id, label) pairs. Labels are `Text`, never markup: they name things from the
        cluster (see `safe_text.plain`); so is the title, shown as plain text."""
        super().__init__()
        self.title_text = title
        self.items = items

    def compose(self) -> ComposeResult:
        with Vertical():
            hint = "(type to filter, Enter to choose, esc to cancel)"
            yield Static(Text.assemble(plain(self.title_text, "bold"), "  ", hint))
            yield Input(placeholder="filter…", id="pick-filter", compact=True)
            yield OptionList(id="pick-list")

    def on_mount(self) -> None:
        self._fill("")
        self.query_one("#pick-filter", Input).focus()

    def _fill(self, query: str) -> None:
        options = self.query_one("#pick-list", OptionList)
        options.clear_options()
        ranked = sorted(
            (score, index, item_id, label)
            for index, (item_id, label) in enumerate(self.items)
            if (score := fuzzy_score(query, label.plain)) is not None
        )
        for _score, _index, item_id, label in ranked:
            options.add_option(Option(label, id=item_id))
        if ranked:
            options.highlighted = 0

    @on(Input.Changed, "#pick-filter")
    def _changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def on_key(self, event: events.Key) -> None:
        arrows_move_list(
            event, self.focused is self.query_one("#pick-filter"), self.query_one("#pick-list", OptionList)
        )

    @on(Input.Submitted)
    def _submitted(self) -> None:
        options = self.query_one("#pick-list", OptionList)
        if options.highlighted is not None and options.option_count:
            self.dismiss(options.get_option_at_index(options.highlighted).id)

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
