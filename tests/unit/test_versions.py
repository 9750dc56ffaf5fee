"""The supported Ray range: versions read as the dashboard reports them, one warning line outside the
range (or for a version that cannot be read)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.core.versions import NEWEST_TESTED, OLDEST_SUPPORTED, TESTED, parse_version, range_warning


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2.44.1", (2, 44, 1)),
        ("2.60.0", (2, 60, 0)),
        ("2.60.0rc1", (2, 60, 0)),
        ("3.0", (3, 0, 0)),
        (" 2.9.3+dev", (2, 9, 3)),
        ("unknown", None),
        ("", None),
        ("v2.44", None),
    ],
)
def test_parse_version(text: str, expected: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize("text", [*TESTED, "2.43.0", "2.52.1"])
def test_no_warning_inside_the_range(text: str) -> None:
    assert range_warning(text) == ""


def test_one_line_outside_the_range() -> None:
    old = range_warning("2.9.3")
    assert old == (
        "this cluster runs Ray 2.9.3, older than the oldest the cockpit supports (2.43): best effort; "
        "some views may be empty."
    )
    new = range_warning("3.1.0")
    assert new == (
        "this cluster runs Ray 3.1.0, newer than the newest the cockpit is tested with (2.60): best effort."
    )
    assert range_warning("nonsense").startswith("the cluster reports Ray version 'nonsense'")


def test_the_range_holds_the_tested_versions() -> None:
    assert all(OLDEST_SUPPORTED <= parse_version(v)[:2] <= NEWEST_TESTED for v in TESTED)  # type: ignore[index]


@given(st.text(max_size=40))
def test_any_version_text_gives_one_line_or_none(text: str) -> None:
    """Whatever the cluster reports (a newline, an escape), the warning is one line, or none."""
    warning = range_warning(text)
    assert "\n" not in warning and "\x1b" not in warning
