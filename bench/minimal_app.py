"""Provides the idle-CPU baseline: the smallest Textual app worth the name (a Static and a Footer).

Run it in a terminal with `python bench/minimal_app.py`; `q` quits. It polls nothing and has no timer
of its own, so what it burns while idle is Textual's own floor in that terminal.
"""

from __future__ import annotations

from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Footer, Static


class MinimalApp(App[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield Static("minimal textual app: idle baseline")
        yield Footer()


if __name__ == "__main__":
    MinimalApp().run()
