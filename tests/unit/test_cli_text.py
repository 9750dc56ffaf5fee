"""What the command line prints of the cluster's text (`cockpit status`, `cockpit jobs`) is one line of
text a terminal only shows: no escape, no control character, nothing UTF-8 cannot write (a lone
surrogate once crashed `cockpit status` with UnicodeEncodeError), each field cut to its column."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.cli.cluster import node_lines
from cockpit.cli.jobs import job_lines
from cockpit.core.cluster.join import JoinProgress
from cockpit.core.text import clean, cut
from tests.harness.hostile import T0, Cluster, controls, hostile_cluster, hostile_jobs
from tests.harness.properties import examples

EXAMPLES = settings(max_examples=examples(200), deadline=None)


def shown_safely(lines: list[str]) -> None:
    for line in lines:
        assert not controls(line), repr(line)
        line.encode("utf-8")  # a lone surrogate raises here, as print() did


@EXAMPLES
@given(hostile_cluster())
def test_status_prints_hostile_nodes_as_text(cluster: Cluster) -> None:
    nodes, _ = cluster
    lines = node_lines(nodes, T0)
    shown_safely(lines)
    assert len(lines) == len(nodes) + 1
    for node, line in zip(nodes, lines[1:], strict=True):
        assert line.startswith(clean(node.node_id)[:8])  # an id prefix, as typed back: no "…"
        assert cut(node.hostname, 16) in line
    deaths = JoinProgress.of(nodes).death_lines()
    shown_safely(deaths)
    assert len(deaths) == sum(1 for node in nodes if not node.alive)


@EXAMPLES
@given(st.lists(hostile_jobs(), max_size=5))
def test_jobs_prints_hostile_jobs_as_text(jobs: list) -> None:  # type: ignore[type-arg]
    lines = job_lines(jobs, T0)
    shown_safely(lines)
    assert len(lines) == len(jobs) + 1
    for job, line in zip(jobs, lines[1:], strict=True):
        assert line.startswith(cut(job.key, 32))


def test_a_long_field_is_cut_to_its_column() -> None:
    assert cut("x" * 5000, 16) == "x" * 15 + "…"
    assert cut("short", 16) == "short"
    assert cut("\x1b]0;t\x07ab\ud800", 16) == "ab\ufffd"
