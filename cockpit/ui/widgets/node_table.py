"""Provides the node table: one keyed row per node, updated in place; dead nodes stay listed."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import DataTable

from cockpit.core.snapshots import NA, NodeSnapshot
from cockpit.core.units import ago, human_bytes, percent
from cockpit.ui.widgets.safe_text import plain

COLUMNS = (
    ("node", "Node"),
    ("host", "Host"),
    ("ip", "IP"),
    ("state", "State"),
    ("cpu", "CPU"),
    ("mem", "Memory"),
    ("gpus", "GPUs"),
    ("store", "Object store"),
    ("joined", "Joined"),
    ("reason", "Death reason"),
)


def node_cells(node: NodeSnapshot, now: float) -> dict[str, Text]:
    """The cells of one node's row, by column key: all `Text`, since a `str` cell is read as markup and
    the ids, names, states and death causes came from the cluster."""
    state = plain(node.state, "bold green" if node.alive else "bold red")
    gpus = f"{node.logical_gpus:g}"
    if node.logical_gpus and not node.has_gpu_telemetry:
        gpus += " (logical)"
    elif node.gpus:
        gpus = f"{len(node.gpus)} phys"
    mem = (
        "N/A"
        if node.mem_total_bytes is NA
        else f"{human_bytes(node.mem_used_bytes)}/{human_bytes(node.mem_total_bytes)}"
    )
    store = (
        "N/A"
        if node.object_store_total_bytes is NA
        else f"{human_bytes(node.object_store_used_bytes)}/{human_bytes(node.object_store_total_bytes)}"
    )
    return {
        "node": plain(f"{node.node_id[:8]}{' ★' if node.is_head else ''}"),
        "host": plain(node.hostname),
        "ip": plain(node.ip),
        "state": state,
        "cpu": Text(percent(node.cpu_percent) if node.alive else "-"),
        "mem": Text(mem if node.alive else "-"),
        "gpus": Text(gpus),
        "store": Text(store if node.alive else "-"),
        "joined": Text(ago(now - node.start_time) if node.start_time else "?"),
        "reason": plain(node.state_message, "red") if not node.alive else Text(),
    }


class NodeTable(DataTable[Text]):
    """Nodes keyed by node id. A refresh updates changed cells only (no clear, no re-measure of rows)."""

    DEFAULT_CSS = """
    NodeTable { height: 1fr; }
    NodeTable.stale { opacity: 60%; }
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self._cells: dict[str, dict[str, Text]] = {}

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.add_column(label, key=key)

    def show(self, nodes: tuple[NodeSnapshot, ...]) -> None:
        now = time.time()
        with self.app.batch_update():
            for node in nodes:
                cells = node_cells(node, now)
                old = self._cells.get(node.node_id)
                if old is None:
                    self.add_row(*(cells[key] for key, _ in COLUMNS), key=node.node_id)
                else:
                    for key, _ in COLUMNS:
                        if old[key] != cells[key]:
                            self.update_cell(node.node_id, key, cells[key], update_width=True)
                self._cells[node.node_id] = cells
            gone = set(self._cells) - {n.node_id for n in nodes}
            for node_id in gone:
                self.remove_row(node_id)
                del self._cells[node_id]

    def select(self, node_id: str) -> bool:
        """Put the cursor on NODE_ID's row (and focus the table); False if it is not listed."""
        if node_id not in self._cells:
            return False
        self.move_cursor(row=self.get_row_index(node_id))
        self.focus()
        return True
