"""The GPU list and heatmap on fixture data: a synthetic 1,024 x 8 cluster (heatmap snapshot) and the
captured AMD node summary (N/A temperature, logical GPUs, an actor found by pid).

Snapshots are plain text (one letter per colour class, and the rendered rows), so a diff shows which
GPU changed class. Regenerate with COCKPIT_UPDATE_SNAPSHOTS=1 after a deliberate change, and read the diff.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.style import Style
from textual.app import App, ComposeResult

from cockpit.core.cluster import parse
from cockpit.core.gpu.board import GpuBoard, GpuFleet, SortKey
from cockpit.core.snapshots import ActorRow, NodeSnapshot
from cockpit.ui.widgets.gpu_heatmap import CLASSES, EMPTY, GpuHeatmap, cursor_detail
from cockpit.ui.widgets.gpu_list import GpuList
from tests.harness.hostile import controls, hostile_cluster
from tests.harness.properties import examples
from tests.harness.snapshots import check_snapshot
from tests.harness.synthetic import T0, synthetic_actors, synthetic_nodes

SAMPLES = Path(__file__).resolve().parents[2].parent / "shared" / "ray-2.60-samples"
SIZE = (200, 50)


class Host(App[None]):
    """A bare app around one GPU widget, at a fixed size."""

    CSS = "GpuHeatmap, GpuList { height: 1fr; }"

    def __init__(self, widget: GpuHeatmap | GpuList) -> None:
        super().__init__()
        self.widget = widget

    def compose(self) -> ComposeResult:
        yield self.widget


def synthetic_fleet(nodes: int = 1024, gpus: int = 8) -> tuple[GpuBoard, GpuFleet]:
    board = GpuBoard()
    cluster = synthetic_nodes(nodes, gpus)
    board.ingest_actors(synthetic_actors(cluster))
    board.ingest_nodes(cluster, job_running=True, local_time=T0)
    return board, board.fleet()


async def test_heatmap_1024x8_fits_one_200x50_screen_snapshot() -> None:
    _board, fleet = synthetic_fleet()
    heatmap = GpuHeatmap()
    async with Host(heatmap).run_test(size=SIZE) as pilot:
        heatmap.show(fleet)
        await pilot.pause()
        # 1,024 nodes in one screen: 21 nodes x 8 GPUs per row, two node rows per terminal row.
        assert heatmap.nodes_per_line == 21 and heatmap.text_rows == 25 <= SIZE[1] - 6
        rendered = [
            "".join(seg.text for seg in heatmap.render_line(y)).rstrip() for y in range(heatmap.text_rows)
        ]
        grid = heatmap.text_grid()
        check_snapshot(
            "gpu_heatmap_1024x8.txt", "\n".join(["# classes", *grid, "# screen", *rendered]) + "\n"
        )
        # Every class of GPU the view knows appears in the synthetic cluster.
        assert set("".join(grid)) >= set("xnsaI12345 0123456789")  # no "o": <5% while a job runs is "I"
        # Colours: the upper half of a cell is its node row's class colour, the lower half the next row's.
        cells = [seg.style for seg in heatmap.render_line(0) for char in seg.text if char == "▀"]
        top, bottom = heatmap._cells[0], heatmap._cells[21]
        for gpu in range(1, 8):  # GPU 0 of node 0 holds the cursor
            expected = Style(
                color=heatmap._class_style(top[gpu]).color,
                bgcolor=heatmap._class_style(bottom[gpu]).color if bottom[gpu] != EMPTY else None,
            )
            style = cells[gpu]
            assert style is not None and style.color == expected.color and style.bgcolor == expected.bgcolor
        assert len(CLASSES) == 11


async def test_heatmap_keys_move_the_cursor_and_enter_opens_the_node() -> None:
    _board, fleet = synthetic_fleet(100, 8)
    heatmap = GpuHeatmap()
    chosen: list[GpuHeatmap.NodeChosen] = []
    host = Host(heatmap)
    async with host.run_test(
        size=(80, 24),
        message_hook=lambda m: chosen.append(m) if isinstance(m, GpuHeatmap.NodeChosen) else None,
    ) as pilot:
        heatmap.show(fleet)
        heatmap.focus()
        await pilot.pause()
        per_line = heatmap.nodes_per_line
        await pilot.press("right", "right", "down")
        assert heatmap.cursor == (per_line, 2)
        row = heatmap.cursor_row
        assert row is not None and row.node is fleet.ordered()[per_line * 8].node
        await pilot.press("enter")
        await pilot.pause()
        assert chosen and chosen[-1].node is row.node
        await pilot.press("end")
        assert heatmap.cursor[0] == len(heatmap._cells) - 1
        await pilot.press("home")
        assert heatmap.cursor == (0, 0)


def captured_fleet() -> tuple[GpuBoard, GpuFleet]:
    doc = json.loads((SAMPLES / "nodes_summary_fakeamd.json").read_text())
    nodes = tuple(parse.node_from_summary(e) for e in doc["data"]["summary"])
    amd = next(n for n in nodes if n.gpus)
    board = GpuBoard()
    board.ingest_actors(
        [
            ActorRow(
                actor_id="79ef", class_name="AmdTrainer", name="amd_trainer", state="ALIVE", job_id="05",
                node_id=amd.node_id, pid=11500, num_restarts=0, required_resources={"GPU": 1.0},
            )
        ]
    )  # fmt: skip
    assert amd.sample_time is not None
    board.ingest_nodes(nodes, job_running=True, local_time=amd.sample_time)
    return board, board.fleet()


async def test_list_of_the_captured_amd_cluster() -> None:
    board, fleet = captured_fleet()
    gpu_list = GpuList()
    async with Host(gpu_list).run_test(size=(160, 30)) as pilot:
        gpu_list.show(fleet, "node", "", board.history, now=fleet.built_at)
        await pilot.pause()
        lines = gpu_list.text_lines()
        text = "\n".join(lines)
        amd_gpu0 = next(line for line in lines if "37%" in line)
        assert "12.0/192.0 GiB" in amd_gpu0 and "412 W" in amd_gpu0 and "N/A" in amd_gpu0  # no temperature
        assert "AmdTrainer amd_trainer (policy) 3.0 GiB" in amd_gpu0  # the GPU memory its process allocated
        amd_gpu1 = next(line for line in lines if " 0% " in line)
        assert "IDLE while a job runs" in amd_gpu1
        assert "2 x FAKE Instinct MI300X" in text
        assert text.count("no GPU telemetry (logical GPU") == sum(1 for r in fleet.rows if r.gpu is None)
        assert "holds 1 GPU" not in text  # a node with telemetry names its actors by pid, not as holders
        screen = ["".join(s.text for s in gpu_list.render_line(y)) for y in range(5)]
        assert screen[0].lstrip().startswith("GPU Util")  # the header row stays on top


async def test_list_sorted_by_utilization_puts_idle_gpus_first_at_80_columns() -> None:
    board, fleet = synthetic_fleet(32, 8)
    gpu_list = GpuList()
    async with Host(gpu_list).run_test(size=(80, 24)) as pilot:
        gpu_list.show(fleet, "util", "", board.history, now=fleet.built_at)
        await pilot.pause()
        visible = ["".join(s.text for s in gpu_list.render_line(y)) for y in range(24)]
        assert all(len(line) == 80 for line in visible)
        assert "Node" in visible[0] and " 0% " in visible[1] and "IDLE" in visible[1]


def board_with_a_short_node(
    count: int, gpus: int, short: int, keep: int
) -> tuple[GpuBoard, list[NodeSnapshot]]:
    """A synthetic cluster where node `short` has only its first `keep` GPUs (MIG, a 4-GPU node...)."""
    nodes = list(synthetic_nodes(count, gpus))
    nodes[short] = replace(nodes[short], gpus=nodes[short].gpus[:keep])
    board = GpuBoard()
    board.ingest_nodes(tuple(nodes), job_running=False, local_time=T0)
    return board, nodes


async def test_heatmap_cursor_walks_nodes_with_fewer_gpus() -> None:
    """Right and left step GPU by GPU and cross into the next node whatever its size (MIG, 4-GPU nodes)."""
    board, nodes = board_with_a_short_node(6, 8, short=1, keep=3)
    heatmap = GpuHeatmap()
    async with Host(heatmap).run_test(size=(80, 24)) as pilot:
        heatmap.show(board.fleet())
        heatmap.focus()
        await pilot.pause()
        for _ in range(8):
            await pilot.press("right")
        assert heatmap.cursor == (1, 0)
        await pilot.press("right", "right", "right")
        assert heatmap.cursor == (2, 0)  # node 1 has 3 GPUs: the fourth step leaves it
        await pilot.press("left")
        assert heatmap.cursor == (1, 2)
        row = heatmap.cursor_row
        assert row is not None and row.node.node_id == nodes[1].node_id and row.gpu_index == 2
        # A new fleet without node 0: the cursor stays on the same GPU of the same node.
        board.ingest_nodes(tuple(nodes[1:]), job_running=False, local_time=T0 + 1)
        heatmap.show(board.fleet())
        assert heatmap.cursor == (0, 2) and heatmap.cursor_row is not None
        assert heatmap.cursor_row.node.node_id == nodes[1].node_id


async def test_list_pages_without_skipping_rows_under_the_header() -> None:
    board, fleet = synthetic_fleet(16, 8)
    gpu_list = GpuList()
    async with Host(gpu_list).run_test(size=(120, 12)) as pilot:
        gpu_list.show(fleet, "node", "", board.history, now=fleet.built_at)
        gpu_list.focus()
        await pilot.pause()
        height = gpu_list.scrollable_content_region.height
        seen: list[str] = []
        for _ in range(6):
            seen += ["".join(s.text for s in gpu_list.render_line(y)) for y in range(1, height)]
            await pilot.press("pagedown")
            await pilot.pause()
        lines = gpu_list.text_lines()[1:]
        shown = [line.rstrip() for line in seen]
        first_pages = [line[:120].rstrip() for line in lines[: len(shown)]]
        assert shown[: len(first_pages)] == first_pages  # every row once, in order: none skipped
        header = "".join(s.text for s in gpu_list.render_line(0))
        assert header.lstrip().startswith("GPU Util")  # still on top after paging


async def test_heatmap_clicks_reach_the_lower_node_of_a_row() -> None:
    """Two node rows share a terminal row: a click picks the upper node, a second click the lower one,
    and a cell the upper node does not have (it has fewer GPUs) goes straight to the lower node."""
    board, _nodes = board_with_a_short_node(40, 4, short=0, keep=1)
    heatmap = GpuHeatmap()
    async with Host(heatmap).run_test(size=(80, 24)) as pilot:
        heatmap.show(board.fleet())
        await pilot.pause()
        per_line = heatmap.nodes_per_line
        assert heatmap.cursor == (0, 0)
        await pilot.click(GpuHeatmap, offset=(6 + 3, 0))  # GPU 3 of the first column
        assert heatmap.cursor == (per_line, 3)
        await pilot.click(GpuHeatmap, offset=(6 + 5 + 1, 0))  # GPU 1 of the second column: upper node
        assert heatmap.cursor == (1, 1)
        await pilot.click(GpuHeatmap, offset=(6 + 5 + 1, 0))  # again: the lower node
        assert heatmap.cursor == (1 + per_line, 1)


async def test_list_and_heatmap_show_any_cluster_text_as_text() -> None:
    """Host names, IPs, node ids, death causes, GPU models and actor names from a hostile cluster: every
    row of the list, sorted and flat, and the heatmap's detail line draw without a control character."""
    gpu_list = GpuList()
    async with Host(gpu_list).run_test(size=(160, 30)):

        @settings(max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(
            hostile_cluster(), st.sampled_from(["node", "util", "memory"]), st.sampled_from([80, 120, 200])
        )
        def check(
            cluster: tuple[tuple[NodeSnapshot, ...], list[ActorRow]], sort: SortKey, width: int
        ) -> None:
            nodes, actors = cluster
            board = GpuBoard()
            board.ingest_nodes(nodes, job_running=True, local_time=T0)
            board.ingest_actors(actors)
            fleet = board.fleet()
            gpu_list.show(fleet, sort, "", board.history, now=T0)
            for line in gpu_list.text_lines():
                assert controls(line) == [], line
            for row in fleet.rows:
                assert controls(cursor_detail(fleet, row).plain) == []

        check()
