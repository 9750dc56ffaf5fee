"""Provides `TextPanel`: a Static whose text is written only when it would draw differently, and laid
out again only when its number of lines changed. Panels that are handed their text on every poll (the
join progress, the jobs strip) would otherwise repaint, and lay the screen out, for nothing."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from cockpit.ui.widgets.keyed_table import same_cell


class TextPanel(Static):
    """A Static written through `put`."""

    _shown: Text | None = None
    """The text `put` last wrote."""

    def put(self, text: Text) -> None:
        """Write TEXT unless it is what the panel shows; a layout pass only if its height changed."""
        shown = self._shown
        if shown is not None and same_cell(shown, text):
            return
        self._shown = text
        self.update(text, layout=shown is None or shown.plain.count("\n") != text.plain.count("\n"))
