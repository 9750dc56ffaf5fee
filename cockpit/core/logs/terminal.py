"""Provides how `cockpit logs` writes a log's bytes to stdout: as text a terminal only shows.

A log is the cluster's output: any process on it may have written an escape that retitles the window,
writes the clipboard (OSC 52), leaves the alternate screen, clears it or moves the cursor, and C1 codes
(U+009B is CSI to some terminals) that do the same without an ESC. `TerminalText` lets through printable
text, newlines, tabs and carriage returns (tqdm's progress lines redraw with them, as in `ray job logs`),
and, when colour is wanted, the colour and style codes (SGR: `ESC [ ... m`) and nothing else of the
escapes; every other escape is taken out whole and every other control character shows as U+FFFD. The
chunks a stream delivers may cut an escape or a UTF-8 character anywhere: the same text comes out
whatever the cuts. Bytes that are not UTF-8 show as U+FFFD.
"""

from __future__ import annotations

import codecs
import re

from cockpit.core.text import ANSI, REPLACEMENT

_SGR = re.compile(r"\x1b\[[0-9;:]*m")
"""A colour or style escape: the only one let through, and only when colour is wanted."""
_UNFINISHED = re.compile(r"\x1b(?:\[[0-?]*[ -/]*)?\Z")
"""What may still become an escape when the next chunk comes: ESC alone, a CSI without its final byte."""
_OSC_OPEN = re.compile(r"\x1b\][^\x07\x1b]*\x1b?\Z")
"""An OSC (a title, a hyperlink, a clipboard write) whose end has not come yet, or only the ESC of it."""
_HOLD_MAX = 256
"""The longest unfinished escape held back at a chunk's end (a longer one is not an escape we know)."""
_CONTROLS = "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
"""What shows as U+FFFD: C0 but tab, newline and carriage return (ESC left over, not part of a whole
escape, among them), DEL, C1, the line and paragraph separators, the bidirectional overrides."""
_ACTS = re.compile(f"(?:{ANSI.pattern})|{_CONTROLS}")
"""A whole escape, else a control character: what a terminal would act on."""


class TerminalText:
    """A byte stream, chunk by chunk, as text safe to write to a terminal (with COLOUR: its SGR codes
    kept)."""

    def __init__(self, colour: bool) -> None:
        self._colour = colour
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._held = ""

    def feed(self, chunk: bytes) -> str:
        text = self._held + self._decoder.decode(chunk)
        self._held = ""
        hold = len(text)
        last = text.rfind("\x1b")
        if last != -1 and _UNFINISHED.match(text, last):
            hold = last
        osc = text.rfind("\x1b]")
        if osc != -1 and _OSC_OPEN.match(text, osc):
            hold = min(hold, osc)
        if len(text) - hold < _HOLD_MAX:
            text, self._held = text[:hold], text[hold:]
        return self._shown(text)

    def end(self) -> str:
        """What was held back at the end of the stream: an escape never finished, its ESC dropped."""
        text = self._held + self._decoder.decode(b"", final=True)
        self._held = ""
        return self._shown(text.replace("\x1b", ""))

    def _shown(self, text: str) -> str:
        return text if text.isprintable() else _ACTS.sub(self._instead, text)

    def _instead(self, found: re.Match[str]) -> str:
        """An escape: itself if it is a colour one and colour is wanted, else nothing; a control
        character: U+FFFD."""
        what = found.group()
        if len(what) > 1:
            return what if self._colour and _SGR.fullmatch(what) else ""
        return REPLACEMENT
