"""`cockpit logs` writes a log to stdout as text a terminal only shows (`TerminalText`): the same text
whatever the chunks' cuts, no escape but colours (and those only when colour is wanted), no control
character a terminal acts on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.core.logs.terminal import TerminalText
from cockpit.core.text import strip_ansi
from tests.harness.hostile import controls, hostile_text
from tests.harness.properties import examples

EXAMPLES = settings(max_examples=examples(300), deadline=None)

ATTACKS = [
    "\x1b]52;c;aGk=\x07",  # a clipboard write
    "\x1b]0;PWNED\x07",  # a window title
    "\x1b]8;;http://evil\x1b\\link\x1b]8;;\x1b\\",  # a hyperlink, ESC-backslash ends
    "\x1b[2J",  # clear the screen
    "\x1b[?1049l",  # leave the alternate screen
    "\x1bP1$qm\x1b\\",  # DCS: a terminal query
    "\x1b[6n",  # ask the cursor's position: the answer is typed into the shell
    "\x9b31m",  # C1 CSI, no ESC
    "\x9d0;t\x9c",  # C1 OSC
    "\x00\x07\x08\x7f",
    "\u202eevil",  # a right-to-left override
]
"""What a process on the cluster could write to its log to act on the terminal of whoever reads it."""

RAW = (
    "\x1b[36m(RolloutWorker pid=123)\x1b[0m step=1 κλ 中文 🚀\n"
    "\x1b]0;title\x07x \x1b[1;38;2;10;20;30mrgb\x1b[0m\n"
    "\x1b]8;;http://example.com\x1b\\link\x1b]8;;\x1b\\ end\x1b[2K\n"
    "progress  10%\rprogress 100%\ttab\n"
).encode()


def shown(chunks: list[bytes], colour: bool) -> str:
    text = TerminalText(colour)
    return "".join(text.feed(chunk) for chunk in chunks) + text.end()


def terminal_acts_on(out: str, colour: bool) -> list[str]:
    """What in OUT a terminal would act on: escapes (colours aside when COLOUR), controls but newline,
    tab and carriage return."""
    left = strip_ansi(out) if colour else out
    return [ch for ch in controls(left) if ch not in "\n\t\r"] + (["ESC"] if "\x1b" in left else [])


def test_every_cut_gives_the_same_text() -> None:
    """The stream's chunks may cut an escape or a UTF-8 character anywhere: whatever the cuts, the same
    text comes out: without colour the log's text alone, with colour its colour codes kept too."""
    plain = strip_ansi(RAW.decode())
    assert shown([RAW], colour=False) == plain and "link end" in plain
    coloured = shown([RAW], colour=True)
    assert "\x1b[36m(RolloutWorker pid=123)\x1b[0m" in coloured and "\x1b[1;38;2;10;20;30mrgb" in coloured
    assert "title" not in coloured and "http://example.com" not in coloured and "\x1b[2K" not in coloured
    for first in range(len(RAW) + 1):
        for second in range(first, len(RAW) + 1, 7):
            parts = [RAW[:first], RAW[first:second], RAW[second:]]
            assert shown(parts, colour=False) == plain, (first, second)
            assert shown(parts, colour=True) == coloured, (first, second)


def test_an_escape_never_finished_comes_out_as_text_without_its_esc() -> None:
    text = TerminalText(colour=True)
    assert text.feed(b"tail \x1b[3") == "tail "
    assert text.end() == "[3"


def test_what_acts_on_a_terminal_never_reaches_it() -> None:
    for attack in ATTACKS:
        for colour in (False, True):
            out = shown([f"before {attack} after\n".encode()], colour)
            assert not terminal_acts_on(out, colour), (attack, colour, out)
            assert out.startswith("before ") and out.endswith(" after\n")
    assert shown([b"\xff\xfe not utf-8 \xc3"], colour=False) == "\ufffd\ufffd not utf-8 \ufffd"


@EXAMPLES
@given(st.lists(hostile_text | st.sampled_from(ATTACKS), max_size=8), st.booleans(), st.data())
def test_hostile_logs_cut_anywhere(pieces: list[str], colour: bool, data: st.DataObject) -> None:
    """Any log text, in any chunks: nothing a terminal acts on but colours, and the same text as the
    stream read whole (escapes short enough to be held back whole at a chunk's end, as every real one is)."""
    raw = "".join(pieces).encode("utf-8", "surrogatepass")
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=6)))
    chunks = [raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    out = shown(chunks, colour)
    assert not terminal_acts_on(out, colour)
    assert out == shown([raw], colour)
