"""Provides what the cockpit remembers of the local cluster: its record (`local.json`) and its auth token.

Both live in a private state directory (0700 and this user's, checked before each write; the token
file 0600, created afresh with O_EXCL|O_NOFOLLOW). Reading them starts nothing and imports nothing
heavy: every command that takes the `local` TARGET does it, the processes of the cluster are
`processes`'s business.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cockpit.core.errors import CockpitError


class LocalClusterError(CockpitError):
    """The local Ray cluster could not be started, found or stopped."""


def state_dir() -> Path:
    """Where the cockpit remembers its local cluster (`COCKPIT_STATE_DIR`, else XDG state home)."""
    explicit = os.environ.get("COCKPIT_STATE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "ray-cockpit"


@dataclass
class LocalNode:
    index: int
    temp_dir: str
    agent_port: int
    num_gpus: int
    num_cpus: int
    start_log: str = ""


@dataclass
class LocalCluster:
    """A cluster `cockpit local up` started, as remembered in `local.json`."""

    root: str
    cluster_id: str
    """Carried as COCKPIT_CLUSTER_ID by every process of the cluster."""
    gcs_port: int
    dashboard_port: int
    client_port: int
    nodes: list[LocalNode] = field(default_factory=list)
    head_ip: str = ""
    auth_token: bool = False

    @property
    def dashboard_url(self) -> str:
        return f"http://127.0.0.1:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        return f"{self.head_ip or '127.0.0.1'}:{self.gcs_port}"


def _state_file(directory: Path | None = None) -> Path:
    return (directory or state_dir()) / "local.json"


def token_file(directory: Path | None = None) -> Path:
    """Where the auth token of the local cluster is kept."""
    return (directory or state_dir()) / "token"


def load(directory: Path | None = None) -> LocalCluster | None:
    """The remembered local cluster, or None when none was started (or the record is unreadable)."""
    path = _state_file(directory)
    try:
        doc = json.loads(path.read_text())
        node_fields = set(LocalNode.__dataclass_fields__)
        cluster_fields = set(LocalCluster.__dataclass_fields__) - {"nodes"}
        nodes = [LocalNode(**{k: v for k, v in n.items() if k in node_fields}) for n in doc.get("nodes", [])]
        return LocalCluster(nodes=nodes, **{k: v for k, v in doc.items() if k in cluster_fields})
    except (OSError, ValueError, TypeError):
        return None


def cluster_token(directory: Path | None = None) -> str | None:
    """The auth token of the remembered cluster, if it uses one."""
    try:
        return token_file(directory).read_text().strip() or None
    except OSError:
        return None


def private_dir(directory: Path | None = None) -> Path:
    """The state directory, made 0700 if missing; refused (one line) unless it is a real directory of
    this user that nobody else can enter: the token is written there, and a directory others can write
    to lets them swap a file for a link at the moment it is written."""
    path = directory or state_dir()
    if not path.exists() and not path.is_symlink():
        path.mkdir(parents=True, mode=0o700)
        path.chmod(0o700)  # mkdir's mode is cut by the umask
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        problem = "a symbolic link"
    elif not stat.S_ISDIR(info.st_mode):
        problem = "not a directory"
    elif info.st_uid != os.getuid():
        problem = f"not yours (owner uid {info.st_uid})"
    elif info.st_mode & 0o077:
        problem = f"open to others (mode {stat.S_IMODE(info.st_mode):04o}): chmod 700 {path}"
    else:
        return path
    raise LocalClusterError(
        f"the cockpit's state directory {path} is {problem}; it must be a private directory of yours "
        "(or set COCKPIT_STATE_DIR to one)."
    )


def _write_new(path: Path, text: str) -> None:
    """Create `path` afresh (0600; never through a link, never into a file that is already there)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)


def save_private_json(path: Path, doc: object) -> None:
    """Write DOC as JSON to PATH in the user's state directory (made 0700 if missing): a fresh 0600 file
    written whole, then renamed over PATH, so a reader never sees half of it.

    Raises:
        OSError: the directory or the file cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temp = path.with_name(f".{path.name}.{os.getpid()}")
    _write_new(temp, json.dumps(doc))
    temp.replace(path)


def save(cluster: LocalCluster, directory: Path | None = None) -> None:
    """Remember `cluster` (written whole, then renamed: a reader never sees half a record)."""
    path = _state_file(private_dir(directory))
    tmp = path.with_suffix(".tmp")
    _write_new(tmp, json.dumps(asdict(cluster), indent=2))
    tmp.replace(path)


def save_token(token: str | None, directory: Path | None = None) -> None:
    """Keep the auth token of a new cluster (a fresh 0600 file); None: the new cluster has none."""
    path = token_file(private_dir(directory))
    path.unlink(missing_ok=True)
    if token is not None:
        _write_new(path, token + "\n")


def forget(directory: Path | None = None) -> None:
    """Drop the record and the token (the cluster is gone)."""
    _state_file(directory).unlink(missing_ok=True)
    token_file(directory).unlink(missing_ok=True)
