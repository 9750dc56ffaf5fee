"""Provides `TextLine`: fixed-height text that changes without a layout pass.

`Static.update` asks for a layout of the whole screen (its size may change). The GPU screen's totals,
notice and legend change on every poll but never change size, so they repaint themselves only.
"""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget


class TextLine(Widget):
    """Text of a fixed height (set in CSS, 1 by default); `show` repaints it only if it changed."""

    DEFAULT_CSS = """
    TextLine { height: 1; }
    """

    def __init__(self, text: str | Text = "", *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._text = Text(text) if isinstance(text, str) else text

    @property
    def text(self) -> Text:
        return self._text

    def show(self, text: str | Text) -> None:
        new = Text(text) if isinstance(text, str) else text
        if new.plain == self._text.plain and new.spans == self._text.spans and new.style == self._text.style:
            return
        self._text = new
        self.refresh()

    def render(self) -> Text:
        return self._text
