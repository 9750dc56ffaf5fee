"""Provides `LineView`, what the Line-API views (the GPU list, the actor table) share: their styles and
rendered rows, cached, and forgotten together when the theme, focus or CSS changes."""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual.cache import LRUCache
from textual.scroll_view import ScrollView
from textual.strip import Strip


class LineView(ScrollView):
    """A `ScrollView` drawn line by line. `_style("name")` is the widget's style plus its component class
    `{STYLE_PREFIX}--name`; `_strips` caches rendered rows (keyed by the subclass)."""

    STYLE_PREFIX: ClassVar[str] = ""
    STRIP_CACHE: ClassVar[int] = 256

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:  # noqa: A002
        super().__init__(id=id, classes=classes)
        self._strips: LRUCache[tuple[object, ...], Strip] = LRUCache(self.STRIP_CACHE)
        self._styles: dict[str, Style] = {}

    @property
    def _plain(self) -> Style:
        """The widget's own style (`rich_style` walks the ancestors on every access: cached here)."""
        style = self._styles.get("")
        if style is None:
            style = self._styles[""] = self.rich_style
        return style

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            component = self.get_component_rich_style(f"{self.STYLE_PREFIX}--{name}", partial=True)
            style = self._styles[name] = self._plain + component
        return style

    def notify_style_update(self) -> None:
        """Theme, focus or CSS changed: styles and rendered rows are stale."""
        super().notify_style_update()
        self._styles.clear()
        self._strips.clear()
