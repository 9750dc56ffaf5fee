"""How many examples the property tests (Hypothesis) try. The everyday suite tries a quarter of each
test's own number (at least 20; 25 where a test names none), which keeps the whole run within its
budget (docs/testing.md); `COCKPIT_PROPERTY_EXAMPLES=full` tries every test's whole number, as a deeper
run before a release or after a change to a parser or renderer does. Each run draws new examples, so
the quarter still explores over many runs; a failure's example is printed and can be replayed with
`@example`."""

from __future__ import annotations

import os

from hypothesis import settings

FULL = os.environ.get("COCKPIT_PROPERTY_EXAMPLES", "") == "full"
SHARE = 1.0 if FULL else 0.25
LEAST = 20


def load_suite_profile() -> None:
    """The suite's Hypothesis settings for the tests that name no number of their own."""
    settings.register_profile("suite", max_examples=100 if FULL else 25)
    settings.load_profile("suite")


def examples(own: int) -> int:
    """The number of examples to try for a test whose own number is OWN."""
    return own if FULL else max(LEAST, min(own, round(own * SHARE)))
