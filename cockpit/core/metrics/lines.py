"""Provides the metric lines of a driver log as (step, key, value) samples, parsed as the log arrives, in
the formats the frameworks really print (where each sample format comes from: tests/unit/test_metrics.py).

- `verl` (Intuitor too): verl's console logger, one line a step, `step:12 - actor/pg_loss:0.123 -
  critic/score/mean:np.float64(0.5)` (`pprint.pformat` of each number, so NumPy 2 scalars print as
  `np.float64(...)`). verl's trainer loop runs in its `TaskRunner` actor: the lines reach the driver log
  as `(TaskRunner pid=N) step:12 - ...`.
- `nemo_rl`: NeMo RL's report of each step: a `===== Step 3/100 =====` header, then sections
  (`📊 Training Results:`, `⏱️  Timing:`, `🔍 Performance Metrics:`, `📊 Validation Results:`) of
  `  • Avg Reward: 0.4567` bullets. Keys are the section and the bullet's name as a slug
  (`train/avg_reward`, `timing/total_step_time`, `perf/...`, `val/accuracy`); units (`12.34s`, `40.5%`)
  are dropped.
- `rlinf`: RLinf's `Global Step` progress bar (tqdm: `Global Step:  12%|█  | 12/100 [01:23<10:12,
  7.01s/it, step_time=7.01, rewards=0.5]`, each redraw after a carriage return) and its metric table
  (`│ Global Step:   12/100 │ ...`, `├── Rollout ──┤` section titles, `│rewards=0.500 │...` cells; keys get
  the section's prefix back: `rollout/rewards`).
- `demo`: the demo trainer's driver line `step=12 reward=0.512 kl=0.0213 throughput=3406 tok/s`.
- `generic`: a line that starts with a step key (`step`, `global_step`, `iteration`, `iter`, `epoch`),
  `=` or `:` and a whole number, then `key=value` or `key: value` pairs (`step: 3, loss: 0.5 | lr=1e-5`).
  It reads the demo's and verl's lines too.
- `auto` (the default): each line is tried as verl, generic, NeMo RL, then RLinf.
- a regex (a profile's `metrics:`) with a named group `step` and a named group per key, searched in
  each line.

Which lines count: ANSI escapes, Ray's `(Name pid=N, ip=...)` prefix and its `[repeated Nx across
cluster]` suffix are removed first, and a worker's line counts like the driver's (verl prints its metrics
from the TaskRunner actor). Every format is anchored at the start of the line so cleaned: the demo's actors
print `policy update step=3 loss=...`, `reference step=10 kl=...`, which are not metric lines. A carriage
return ends a line like a newline does (a progress bar redraws itself on one line). Ray's deduplication
keeps only the last of lines that differ only in their numbers when several workers print them within
5 s, so such lines can be missing from the log; nothing here can bring them back.

Cost: lines are found by `str.find` of a few literal words (`step`, `iter`, `epoch`, `Step `, `•`, ...),
which the C code runs over the whole chunk; only the lines holding one of those words are looked at in
Python, so every other line costs next to nothing (bench/metrics_parse.py). A regex format looks at
every line.

Caps: a line longer than MAX_LINE_CHARS is skipped (and so is what arrives of it without a newline), a
key longer than MAX_KEY_CHARS or holding a character that is not printable is skipped, values are
numbers of at most 64 characters and steps whole numbers of at most 18 digits. The store
(`metric_series.SeriesStore`) caps the keys and the points kept per key.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterable

from cockpit.core.logs.buffer import RAY_PREFIX
from cockpit.core.text import strip_ansi

Sample = tuple[int, str, float]
"""(step, key, value). A plain tuple, not a dataclass: a verl line holds a hundred of them, and building
a tuple costs a tenth of building an object."""

Format = str | re.Pattern[str]
"""A format name (`FORMATS`) or a compiled regex with a `step` group and a group per key."""

FORMATS = ("auto", "verl", "nemo_rl", "rlinf", "demo", "generic")
FRAMEWORK_FORMATS = {
    "verl": "verl",
    "intuitor": "verl",
    "nemo_rl": "nemo_rl",
    "rlinf": "rlinf",
    "demo": "demo",
    "generic": "auto",
}
"""The format a profile's `framework:` implies when it names no `metrics:`."""

MAX_LINE_CHARS = 256 * 1024
"""Longer lines are skipped: no framework prints a step's metrics in a quarter of a megabyte."""
MAX_KEY_CHARS = 128
MAX_VALUE_CHARS = 64

_WORDS: dict[str, tuple[str, ...]] = {
    "verl": ("step:",),
    "demo": ("step=",),
    "generic": ("step", "iter", "epoch"),
    "nemo_rl": ("Step ", "Epoch "),
    "rlinf": ("Step",),
    "auto": ("tep", "iter", "poch"),  # `tep`: step, Step, Global Step in one pass; `poch`: epoch, Epoch
}
"""What a line of each format holds for sure; a line with none of them is never looked at. One `str.find`
pass a word and a chunk: a word the chunk lacks costs a whole pass (about 1 ns a character on text with
any non-Latin-1 character in it), and a regex alternation of the words scans 8 to 25 times slower."""
_NEMO_WORDS = ("•", "Results", "Timing:", "Metrics", "/sec")
"""Looked for too once a NeMo RL `===== Step N/M =====` header was seen: the section titles and bullets,
and the throughputs' dashed items under their bullet (`    - E2E (Tokens/sec/gpu): 240.00`)."""
_TABLE_WORDS = ("│", "├", "╰")
"""Looked for too while an RLinf metric table is open (after its `│ Global Step:` line)."""

_REPEATED = re.compile(r" \[repeated \d+x across cluster\]")
_WRAPPERS = frozenset(
    [
        f"{module}.{kind}{bits}"
        for module in ("np", "numpy")
        for kind in ("float", "int", "uint")
        for bits in ("", "8", "16", "32", "64", "128")
    ]
    + ["tensor", "torch.tensor"]
)
"""`np.float64(0.5)` (verl's pprint of a NumPy 2 scalar), `tensor(0.5)`, `tensor(0.5, device='cuda:0')`."""
_GENERIC_STEP = re.compile(r"(?:global_step|step|iteration|iter|epoch)[ \t]*[=:][ \t]*(\d{1,18})(?![\w.])")
_PAIR = re.compile(r"(?<![\w./@-])([A-Za-z_][\w./@-]{0,127})[ \t]*[=:][ \t]*([^\s,;|]{1,64})(?![^\s,;|])")
"""A `key=value` or `key: value` pair; bounded repeats, so a hostile line costs linear time."""
_NEMO_STEP = re.compile(r"=+ Step (\d{1,18})/(\d{1,18}) =+$")
_NEMO_EPOCH = re.compile(r"=+ Epoch (\d{1,9})/\d+ =+$")
"""NeMo RL's step header counts from 1 again each epoch (`current_step = 0  # Reset step counter for new
epoch`, grpo.py, sft.py, dpo.py, ...), under an epoch header; its denominator is the steps an epoch holds
(`min(len(dataloader), max_num_steps)`), so the global step (W&B's) is (epoch - 1) x that + the step."""
_NEMO_SECTIONS = (
    ("Training Results", "train"),
    ("Timing", "timing"),
    ("Performance Metrics", "perf"),
    ("Validation Results", "val"),
)
_LEADING_NUMBER = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|nan|inf)", re.I)
"""A bullet's value, its unit (`12.34s`, `40.5%`, `12.00 TFLOPS`) left behind."""
_SLUG = re.compile(r"[^0-9a-z]+")
_RLINF_BAR = re.compile(r"Global Step\b[^|]{0,200}\|[^|]{0,4000}\|\s*(\d{1,18})/(?:\d+|\?)\s*\[([^\]]*)(\]?)")
"""RLinf's `Global Step` progress bar, its postfix's `key=value` items in brackets; tqdm cuts a line at
its `ncols` (RLinf sets 1650), which can take the `]` and the end of the last item with it."""
_RLINF_TABLE_STEP = re.compile(r"│ Global Step:\s*(\d{1,18})/\d+ ")
_RLINF_SECTIONS = {
    "Time": "time",
    "Environment": "env",
    "Rollout": "rollout",
    "Evaluation": "eval",
    "Replay Buffer": "replay_buffer",
    "Training/Actor": "train",
    "Training/Critic": "train",
    "Training/Other": "train",
}
"""`print_metrics_table`'s section titles and the prefix it took off the keys under them."""


def parse_format(text: str) -> Format:
    """A format name, or a regex with a `(?P<step>...)` group and at least one other named group.

    Raises:
        ValueError: one sentence saying what is wrong (the profile check adds the file, line and key).
    """
    if text in FORMATS:
        return text
    try:
        pattern = re.compile(text)
    except re.error as exc:
        raise ValueError(f"not a format ({', '.join(FORMATS)}) nor a regular expression: {exc}.") from None
    except (OverflowError, RecursionError) as exc:
        raise ValueError(f"not a regular expression Python takes: {exc}.") from None
    groups = set(pattern.groupindex)
    if "step" not in groups or len(groups) < 2:
        raise ValueError(
            f"not a format ({', '.join(FORMATS)}); as a regex it needs a (?P<step>...) group and a named "
            "group per key, e.g. 'it (?P<step>\\d+): loss (?P<loss>\\S+)'."
        )
    return pattern


def format_label(form: Format) -> str:
    return form if isinstance(form, str) else f"regex {form.pattern}"


def profile_format(metrics: str, framework: str) -> Format:
    """The format a profile gives: its `metrics:` (checked at load), else what its `framework:` prints."""
    if metrics:
        return parse_format(metrics)
    return FRAMEWORK_FORMATS.get(framework, "auto")


def _whole(text: str) -> int | None:
    return int(text) if 0 < len(text) <= 18 and text.isascii() and text.isdigit() else None


def number(text: str) -> float | None:
    """The value a logger printed: `0.5`, `-1e-05`, `nan`, `inf`, `-inf`, `np.float64(0.5)`,
    `tensor(0.5)`; None for anything else (`True`, `abc`, `1_000`, non-ASCII digits)."""
    if text.endswith(")"):
        head, _, inner = text[:-1].partition("(")
        if head.strip() not in _WRAPPERS:
            return None
        text = inner.partition(",")[0]  # tensor(0.5, device='cuda:0')
    if len(text) > MAX_VALUE_CHARS or not text.isascii() or "_" in text:
        return None  # float() reads `1_000` and other scripts' digits; no logger prints them
    try:
        return float(text)
    except ValueError:
        return None


def fits(key: str) -> bool:
    """Whether KEY can be a series' name: 1 to MAX_KEY_CHARS printable characters."""
    return 0 < len(key) <= MAX_KEY_CHARS and key.isprintable()


def _slug(name: str) -> str:
    return _SLUG.sub("_", name.strip().lower()).strip("_")


def clean_line(raw: str) -> str:
    """A line as the formats read it: ANSI escapes, Ray's worker prefix and `[repeated Nx across
    cluster]` suffix removed, outer whitespace stripped."""
    body = strip_ansi(raw) if "\x1b" in raw else raw
    if body.startswith("(") and (prefix := RAY_PREFIX.match(body)):
        body = body[prefix.end() :]
    if "[repeated " in body:
        at = body.rfind(" [repeated ")
        if at >= 0 and _REPEATED.match(body, at):
            body = body[:at]
    return body.strip()


class MetricsParser:
    """Turns a driver log, fed in chunks cut anywhere, into samples.

    `feed` returns the samples of the complete lines in what it was given; the partial line at the end
    waits for the next chunk (or `flush`), so any cutting of the same text gives the same samples. One
    parser per log: the NeMo RL and RLinf table formats carry the step from a header to the lines below.
    """

    def __init__(self, form: Format = "auto") -> None:
        if isinstance(form, str) and form not in FORMATS:
            raise ValueError(f"unknown metrics format {form!r} (known: {', '.join(FORMATS)}).")
        self.format = form
        self._pattern = form if isinstance(form, re.Pattern) else None
        self._base_words = () if self._pattern is not None else _WORDS[str(form)]
        self._words: tuple[str, ...] | None = None if self._pattern is not None else self._base_words
        readers: dict[str, tuple[Callable[[str, list[Sample]], bool], ...]] = {
            "auto": (self._verl, self._generic, self._nemo, self._rlinf),
            "verl": (self._verl,),
            "nemo_rl": (self._nemo,),
            "rlinf": (self._rlinf,),
            "demo": (self._demo,),
            "generic": (self._generic,),
        }
        self._readers = (self._regex,) if self._pattern is not None else readers[str(form)]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self._skipping = False
        """The line being received has passed MAX_LINE_CHARS: drop it up to its end."""
        self._nemo_step: int | None = None
        self._nemo_section: str | None = None
        self._nemo_epoch = 1
        self._nemo_parent: str | None = None
        """The bullet without a value that heads the dashed items after it (`• Throughputs (per GPU):`)."""
        self._table_step: int | None = None
        self._table_section: str | None = None
        self.looked_at = 0
        """Lines read in Python (those holding one of the format's words; every line for a regex)."""
        self.metric_lines = 0
        """Lines that gave at least one sample."""

    # -- feeding --------------------------------------------------------------------------------------

    def feed(self, data: str | bytes) -> list[Sample]:
        """The samples of the lines DATA completes (bytes are UTF-8; a character split between chunks is
        decoded whole)."""
        text = self._decoder.decode(data) if isinstance(data, bytes) else data
        if self._skipping:
            end = _first_end(text)
            if end < 0:
                return []
            text, self._skipping = text[end + 1 :], False
        elif self._pending:
            text = self._pending + text
        cut = max(text.rfind("\n"), text.rfind("\r"))
        rest = text[cut + 1 :]
        if len(rest) > MAX_LINE_CHARS:
            self._pending, self._skipping = "", True
        else:
            self._pending = rest
        if cut < 0:
            return []
        out: list[Sample] = []
        self._scan(text, cut, out)
        return out

    def feed_lines(self, lines: Iterable[str]) -> list[Sample]:
        """The samples of complete lines without their newlines (a log pane's lines; a carriage return in
        one ends a line there, as in `feed`). Not to be mixed with a `feed` that left a partial line."""
        out: list[Sample] = []
        for line in lines:
            for part in line.split("\r") if "\r" in line else (line,):
                words = self._words
                if words is None or any(word in part for word in words):
                    self._line(part, out)
        return out

    def flush(self) -> list[Sample]:
        """The samples of the partial line held back (the log ended without a newline)."""
        text = self._pending + self._decoder.decode(b"", final=True)
        self._pending = ""
        if self._skipping or not text:
            self._skipping = False
            return []
        out: list[Sample] = []
        self._line(text, out)
        return out

    def _scan(self, text: str, end: int, out: list[Sample]) -> None:
        """Every line of TEXT[:END] that holds one of the format's words (every line for a regex)."""
        line = self._line
        words = self._words
        if words is None:
            for raw in text[:end].replace("\r", "\n").split("\n"):
                line(raw, out)
            return
        find, rfind = text.find, text.rfind
        pos = 0
        upcoming = _first(text, words, pos, end)
        while (at := min(upcoming, default=end)) < end:
            start = max(pos, rfind("\n", pos, at) + 1, rfind("\r", pos, at) + 1)
            stop = find("\n", at, end)
            stop = end if stop < 0 else stop
            cr = find("\r", at, stop)
            stop = stop if cr < 0 else cr
            line(text[start:stop], out)
            pos = stop + 1
            if self._words is not words:  # a NeMo RL step or an RLinf table began or ended
                words = self._words or ()
                upcoming = _first(text, words, pos, end)
                continue
            for i, next_at in enumerate(upcoming):
                if next_at < pos:
                    found = find(words[i], pos, end)
                    upcoming[i] = end if found < 0 else found

    def _line(self, raw: str, out: list[Sample]) -> None:
        self.looked_at += 1
        if len(raw) > MAX_LINE_CHARS:
            return
        body = clean_line(raw)
        if not body:
            return
        for read in self._readers:
            if read(body, out):
                self.metric_lines += 1
                return

    def _look_for(self) -> None:
        """The words to scan for now: the format's, and its section and table words while they matter."""
        if self._words is None:
            return
        words = self._base_words
        if self._nemo_step is not None and self.format in ("auto", "nemo_rl"):
            words += _NEMO_WORDS
        if self._table_step is not None:
            words += _TABLE_WORDS
        if words != self._words:
            self._words = words

    # -- the formats: each reads one cleaned line, appends its samples, and says whether it had any ----

    def _verl(self, body: str, out: list[Sample]) -> bool:
        if not body.startswith("step:"):
            return False
        head, _, rest = body.partition(" - ")
        step = _whole(head[5:].strip())
        if step is None:
            return False
        count = len(out)
        for field in rest.split(" - "):
            key, sep, text = field.rpartition(":")
            key = key.strip()
            # `fits`, inlined: a verl line holds a hundred fields
            if (
                sep
                and (value := number(text)) is not None
                and 0 < len(key) <= MAX_KEY_CHARS
                and key.isprintable()
            ):
                out.append((step, key, value))
        return len(out) > count

    def _demo(self, body: str, out: list[Sample]) -> bool:
        if not body.startswith("step="):
            return False
        tokens = body.split()
        step = _whole(tokens[0][5:])
        if step is None:
            return False
        count = len(out)
        for token in tokens[1:]:
            key, sep, text = token.partition("=")
            if sep and (value := number(text)) is not None and fits(key):
                out.append((step, key, value))
        return len(out) > count

    def _generic(self, body: str, out: list[Sample]) -> bool:
        found = _GENERIC_STEP.match(body)
        if found is None:
            return False
        step = int(found.group(1))
        count = len(out)
        for key, text in _PAIR.findall(body, found.end()):
            if (value := number(text)) is not None and fits(key):
                out.append((step, key, value))
        return len(out) > count

    def _nemo(self, body: str, out: list[Sample]) -> bool:
        if body.startswith("•"):
            step, section = self._nemo_step, self._nemo_section
            name, sep, rest = body[1:].partition(":")
            if step is None or section is None or not sep:
                return False
            found = _LEADING_NUMBER.match(rest.lstrip())
            self._nemo_parent = _slug(name) if found is None and not rest.strip() else None
            key = f"{section}/{_slug(name)}"
            if found is None or key.endswith("/") or not fits(key):
                return False
            out.append((step, key, float(found.group())))
            return True
        if body.startswith("- ") and self._nemo_parent:
            step, section = self._nemo_step, self._nemo_section
            name, sep, rest = body[2:].rpartition(":")
            found = _LEADING_NUMBER.fullmatch(rest.strip())
            if step is None or section is None or not sep or found is None:
                return False
            key = f"{section}/{self._nemo_parent}/{_slug(name)}"
            if key.endswith("/") or not fits(key):
                return False
            out.append((step, key, float(found.group())))
            return True
        if body.startswith("="):
            if header := _NEMO_STEP.match(body):
                step, per_epoch = int(header.group(1)), int(header.group(2))
                self._nemo_step, self._nemo_section = (self._nemo_epoch - 1) * per_epoch + step, None
                self._nemo_parent = None
                self._look_for()
            elif epoch := _NEMO_EPOCH.match(body):
                self._nemo_epoch = max(1, int(epoch.group(1)))
        elif body.endswith(":"):
            for title, section in _NEMO_SECTIONS:
                if title in body:
                    self._nemo_section, self._nemo_parent = section, None
                    break
        return False

    def _rlinf(self, body: str, out: list[Sample]) -> bool:
        first = body[0]
        if first == "│":
            return self._rlinf_row(body, out)
        if first == "├":
            self._table_section = _RLINF_SECTIONS.get(body.strip("├┤─ "))
        elif first == "╰":
            self._table_step = self._table_section = None
            self._look_for()
        elif bar := _RLINF_BAR.match(body):
            step = int(bar.group(1))
            count = len(out)
            items = bar.group(2).split(",")
            if not bar.group(3):  # cut at the terminal's width: the last item may be cut short too
                items = items[:-1]
            for item in items:
                key, sep, text = item.partition("=")
                key = key.strip()
                if sep and (value := number(text)) is not None and fits(key):
                    out.append((step, key, value))
            return len(out) > count
        return False

    def _rlinf_row(self, body: str, out: list[Sample]) -> bool:
        if "=" not in body:
            if heading := _RLINF_TABLE_STEP.match(body):
                self._table_step, self._table_section = int(heading.group(1)), None
                self._look_for()
            return False
        step, section = self._table_step, self._table_section
        if step is None or section is None:
            return False
        count = len(out)
        for cell in body.split("│"):
            name, sep, text = cell.strip().partition("=")
            key = f"{section}/{name}"
            if sep and name and not text.endswith("…") and (value := number(text)) is not None and fits(key):
                out.append((step, key, value))
        return len(out) > count

    def _regex(self, body: str, out: list[Sample]) -> bool:
        assert self._pattern is not None
        found = self._pattern.search(body)
        if found is None:
            return False
        groups = found.groupdict()
        step = _whole((groups.pop("step") or "").strip())
        if step is None:
            return False
        count = len(out)
        for key, text in groups.items():
            if text is not None and (value := number(text)) is not None:
                out.append((step, key, value))
        return len(out) > count


def _first(text: str, words: tuple[str, ...], start: int, end: int) -> list[int]:
    """Where each of WORDS is next found in TEXT[START:END] (END: nowhere)."""
    found = [text.find(word, start, end) for word in words]
    return [end if at < 0 else at for at in found]


def _first_end(text: str) -> int:
    """Where TEXT's first line ends (a newline or a carriage return), or -1."""
    newline, cr = text.find("\n"), text.find("\r")
    if newline < 0 or cr < 0:
        return max(newline, cr)
    return min(newline, cr)
