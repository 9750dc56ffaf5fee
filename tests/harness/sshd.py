"""Provides a real OpenSSH server (``sshd``) on 127.0.0.1 for tests.

The server runs as the current user from a private temporary directory: its own host key,
its own ``authorized_keys`` with a freshly generated client key, and a ``known_hosts`` file
that clients can use with strict host-key checking. It listens on 127.0.0.1 only.

Typical use from a fixture::

    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()

``restart()`` simulates the server going away and coming back on the same port with the
same keys; ``kill_connections()`` drops every established connection while the listener
keeps accepting new ones.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "SshServer",
    "ensure_openssh",
    "find_free_port",
    "generate_key",
    "listening_addresses",
    "log_tail",
    "process_table",
    "start_sshd",
    "write_sshd_config",
]

HOST = "127.0.0.1"
"""The only address the harness ever listens on."""

STARTUP_TIMEOUT_S = 10.0
"""How long `start_sshd` waits for the server to greet with ``SSH-2.0``."""

_SEARCH_PATH = os.pathsep.join(
    [os.environ.get("PATH", ""), "/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/bin", "/bin"]
)
_PRIVSEP_DIR = Path("/run/sshd")


def _which(name: str) -> str | None:
    """Return the absolute path of ``name``, also searching the sbin directories."""
    found = shutil.which(name, path=_SEARCH_PATH)
    return str(Path(found).resolve()) if found else None


def _apt_install(packages: list[str]) -> None:
    """Install Debian packages non-interactively; run ``apt-get update`` only if needed."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    first = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if first.returncode == 0:
        return
    subprocess.run(["apt-get", "update"], env=env, capture_output=True, text=True, check=False)
    second = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if second.returncode != 0:
        raise RuntimeError(
            f"apt-get install {' '.join(packages)} failed (exit {second.returncode}):\n"
            f"{second.stderr.strip()[-2000:]}"
        )


def ensure_openssh() -> str:
    """Return the absolute path of ``sshd``, installing OpenSSH with apt-get when running as root.

    Raises:
        RuntimeError: OpenSSH is missing and cannot be installed here (not root, no apt-get,
            or the installation failed).
    """
    sshd = _which("sshd")
    if sshd and _which("ssh-keygen") and _which("ssh"):
        return sshd
    if os.geteuid() != 0 or _which("apt-get") is None:
        raise RuntimeError(
            "OpenSSH (sshd, ssh, ssh-keygen) is not installed and cannot be installed automatically "
            "(needs root and apt-get); install the openssh-server and openssh-client packages"
        )
    _apt_install(["openssh-server", "openssh-client"])
    sshd = _which("sshd")
    if sshd is None or _which("ssh-keygen") is None:
        raise RuntimeError("openssh-server was installed but sshd or ssh-keygen is still not found")
    return sshd


def find_free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def generate_key(path: Path, comment: str, passphrase: str = "") -> str:
    """Create an ed25519 key pair at ``path`` (encrypted when ``passphrase`` is given); return
    ``"ssh-ed25519 AAAA..."``."""
    keygen = _which("ssh-keygen")
    if keygen is None:
        raise RuntimeError("ssh-keygen not found; install openssh-client")
    subprocess.run(
        [keygen, "-q", "-t", "ed25519", "-N", passphrase, "-C", comment, "-f", str(path)],
        check=True,
        capture_output=True,
        text=True,
    )
    path.chmod(0o600)
    return _public_key_of(path)


def _public_key_of(private_key: Path) -> str:
    """Return ``"TYPE BASE64"`` for a private key, from its ``.pub`` file or via ``ssh-keygen -y``."""
    pub = private_key.with_name(private_key.name + ".pub")
    if pub.exists():
        text = pub.read_text()
    else:
        keygen = _which("ssh-keygen")
        if keygen is None:
            raise RuntimeError("ssh-keygen not found; install openssh-client")
        text = subprocess.run(
            [keygen, "-y", "-f", str(private_key)], check=True, capture_output=True, text=True
        ).stdout
    key_type, blob = text.split()[:2]
    return f"{key_type} {blob}"


def _account_locked(user: str) -> bool:
    """Return whether ``user``'s password field marks the account locked (``!...``).

    With ``UsePAM no`` sshd refuses every login, keys included, for a locked account.
    """
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            name, _, rest = line.partition(":")
            if name == user:
                return rest.startswith("!") or rest.startswith("*LK*")
    except OSError:
        return False
    return False


def process_table() -> dict[int, tuple[int, str]]:
    """Return ``{pid: (ppid, state)}`` for every process, read from /proc/*/stat."""
    table: dict[int, tuple[int, str]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # The command name is in parentheses and may itself contain spaces or parentheses.
        fields = text[text.rindex(")") + 2 :].split()
        table[int(stat.parent.name)] = (int(fields[1]), fields[0])
    return table


def _descendants(pid: int) -> list[int]:
    """Return the pids of the live (not zombie) processes below ``pid``, breadth first."""
    children: dict[int, list[int]] = {}
    for child, (parent, state) in process_table().items():
        if state not in ("Z", "X"):
            children.setdefault(parent, []).append(child)
    found: list[int] = []
    pending = list(children.get(pid, []))
    while pending:
        child = pending.pop(0)
        found.append(child)
        pending.extend(children.get(child, []))
    return found


def _socket_inodes(pid: int) -> set[str]:
    """Return the inodes of the sockets that process ``pid`` holds open."""
    inodes: set[str] = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    try:
        fds = list(fd_dir.iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    return inodes


def _decode_address(hex_address: str) -> tuple[str, int]:
    """Decode a ``/proc/net/tcp{,6}`` ``ADDRESS:PORT`` field (address in host byte order)."""
    hex_ip, hex_port = hex_address.split(":")
    raw = bytes.fromhex(hex_ip)
    # The kernel prints each 32-bit word of the address in host byte order.
    if sys.byteorder == "little":
        raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    ip = raw
    family = socket.AF_INET if len(ip) == 4 else socket.AF_INET6
    return socket.inet_ntop(family, ip), int(hex_port, 16)


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """Return the TCP ``(address, port)`` pairs that process ``pid`` listens on (IPv4 and IPv6)."""
    inodes = _socket_inodes(pid)
    found: list[tuple[str, int]] = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            listening = fields[3] == "0A"
            if listening and fields[9] in inodes:
                found.append(_decode_address(fields[1]))
    return found


def _kill_all(pids: list[int]) -> None:
    """Send SIGKILL to each pid, ignoring processes that are already gone."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def log_tail(log_file: Path, lines: int = 30) -> str:
    """Return the last ``lines`` lines of a daemon's log, or ``(no log)``."""
    try:
        return "\n".join(log_file.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _greets(port: int) -> bool:
    """Return whether 127.0.0.1:``port`` accepts a TCP connection and sends an ``SSH-2.0`` banner."""
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as sock:
            banner = b""
            while b"\n" not in banner and len(banner) < 256:
                chunk = sock.recv(256)
                if not chunk:
                    break
                banner += chunk
            return banner.startswith(b"SSH-2.0")
    except OSError:
        return False


@dataclass(eq=False)
class SshServer:
    """A running OpenSSH server on 127.0.0.1 and the client-side files to reach it.

    Every field but ``process`` stays fixed for the server's life; ``restart()`` replaces
    ``process`` with a new sshd on the same port using the same keys.
    """

    host: str
    port: int
    root: Path
    host_key: Path
    host_public_key: str
    client_key: Path
    client_public_key: str
    known_hosts: Path
    user: str
    process: subprocess.Popen[bytes]
    log_file: Path
    sshd_path: str = field(default="/usr/sbin/sshd", repr=False)
    config_file: Path = field(default=Path(), repr=False)

    @property
    def pid(self) -> int:
        """The pid of the listening sshd."""
        return self.process.pid

    def listening_addresses(self) -> list[tuple[str, int]]:
        """The TCP ``(address, port)`` pairs the listener holds; ``[("127.0.0.1", port)]`` when running."""
        return listening_addresses(self.pid) if self.running else []

    @property
    def running(self) -> bool:
        """Whether the listening sshd is still alive."""
        return self.process.poll() is None

    def ssh_config_entry(self, alias: str, proxy_jump: str | None = None) -> str:
        """Return an OpenSSH client ``ssh_config`` block that reaches this server as ``alias``.

        ``proxy_jump`` names another host (an alias from the same config, or ``user@host:port``)
        to connect through.
        """
        lines = [
            f"Host {alias}",
            f"    HostName {self.host}",
            f"    Port {self.port}",
            f"    User {self.user}",
            f"    IdentityFile {self.client_key}",
            f"    UserKnownHostsFile {self.known_hosts}",
            "    StrictHostKeyChecking yes",
            "    IdentitiesOnly yes",
        ]
        if proxy_jump is not None:
            lines.append(f"    ProxyJump {proxy_jump}")
        return "\n".join(lines) + "\n"

    def kill_connections(self) -> list[int]:
        """SIGKILL the server side of every established connection; keep the listener running.

        The per-connection sshd processes are the listener's children (found through the
        parent pids in /proc/*/stat); their own children, the session processes and the
        commands they run, are killed too. Returns the pids killed, once the listener has
        reaped them.
        """
        if not self.running:
            return []
        # Stop the listener for a moment so that no connection forks while we collect its children.
        os.kill(self.pid, signal.SIGSTOP)
        try:
            pids = _descendants(self.pid)
            _kill_all(pids)
        finally:
            os.kill(self.pid, signal.SIGCONT)
        self._wait_reaped(pids)
        return pids

    def _wait_reaped(self, pids: list[int], timeout: float = 5.0) -> None:
        """Wait until ``pids`` are gone from the process table (reaped by the listener)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() for pid in pids):
            time.sleep(0.02)

    def stop(self) -> None:
        """Stop the listener and drop every connection; safe to call more than once."""
        if self.running:
            # First drop the connections while the listener runs, so that it reaps them itself.
            self.kill_connections()
            with contextlib.suppress(ProcessLookupError):
                # Then make sure no connection slipped in before the listener goes.
                os.kill(self.pid, signal.SIGSTOP)
                _kill_all(_descendants(self.pid))
                self.process.terminate()
                os.kill(self.pid, signal.SIGCONT)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        else:
            self.process.wait()

    def use_host_certificate(
        self, ca_key: Path, principals: str = "127.0.0.1,localhost", validity: str | None = None
    ) -> Path:
        """Sign the host key with the CA ``ca_key`` (``ssh-keygen -s CA -h``) and restart the server
        presenting that certificate (``HostCertificate``); returns the certificate's path.

        ``principals`` is ``ssh-keygen -n`` (the names the certificate is valid for), ``validity`` its
        ``-V`` (e.g. ``20000101:20000102`` for one long expired).
        """
        public = self.host_key.with_name(self.host_key.name + ".pub")
        command = ["ssh-keygen", "-q", "-s", str(ca_key), "-I", "harness-host", "-h", "-n", principals]
        if validity is not None:
            command += ["-V", validity]
        subprocess.run([*command, str(public)], check=True, capture_output=True, text=True)
        certificate = self.host_key.with_name(self.host_key.name + "-cert.pub")
        lines = [
            ln for ln in self.config_file.read_text().splitlines() if not ln.startswith("HostCertificate")
        ]
        self.config_file.write_text("\n".join([*lines, f"HostCertificate {certificate}"]) + "\n")
        self.restart()
        return certificate

    def restart(self) -> None:
        """Stop the server (dropping all connections) and start it again on the same port and keys."""
        self.stop()
        self.process = _launch(self.sshd_path, self.config_file, self.log_file, self.port)

    def __enter__(self) -> SshServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _ensure_privsep_dir() -> None:
    """Create /run/sshd, which sshd needs for privilege separation (init scripts normally make it)."""
    if not _PRIVSEP_DIR.is_dir():
        _PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        _PRIVSEP_DIR.chmod(0o755)


def _port_is_free(port: int) -> bool:
    """Return whether 127.0.0.1:``port`` can be bound the way sshd binds it (``SO_REUSEADDR``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def _launch(sshd: str, config_file: Path, log_file: Path, port: int) -> subprocess.Popen[bytes]:
    """Start ``sshd -D`` with ``config_file`` and wait until it listens and greets on ``port``.

    Readiness means that this very process holds the listening socket on 127.0.0.1:``port`` and
    that a connection there reads an ``SSH-2.0`` banner, so another server on the port never
    passes for ours.
    """
    _ensure_privsep_dir()
    if not _port_is_free(port):
        raise RuntimeError(f"cannot start sshd: {HOST}:{port} is already in use")
    # -D: stay in the foreground (a child of ours); -e -E: log to log_file, not to syslog.
    process = subprocess.Popen(
        [sshd, "-D", "-e", "-E", str(log_file), "-f", str(config_file)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"sshd exited with code {process.returncode} during start-up on {HOST}:{port}; "
                f"log {log_file}:\n{log_tail(log_file)}"
            )
        if (HOST, port) in listening_addresses(process.pid) and _greets(port):
            _wait_for_no_connections(process.pid, deadline)
            return process
        time.sleep(0.05)
    process.kill()
    process.wait()
    raise RuntimeError(
        f"sshd did not greet with SSH-2.0 on {HOST}:{port} within {STARTUP_TIMEOUT_S:.0f} s; "
        f"log {log_file}:\n{log_tail(log_file)}"
    )


def _wait_for_no_connections(pid: int, deadline: float) -> None:
    """Wait until the banner probe's per-connection process has gone, so a new server starts clean."""
    while _descendants(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def write_sshd_config(
    root: Path,
    address: str,
    port: int,
    host_key: Path,
    authorized_keys: Path,
    user: str,
    *,
    allow_tcp_forwarding: bool = True,
) -> Path:
    """Write ``root/sshd_config`` for a server on ``address:port`` (keys only, its own pid file, log
    level VERBOSE so each accepted login is a line of its log); returns the file's path."""
    config_file = root / "sshd_config"
    forwarding = "yes" if allow_tcp_forwarding else "no"
    config_file.write_text(
        "\n".join(
            [
                f"ListenAddress {address}",
                f"Port {port}",
                f"HostKey {host_key}",
                f"PidFile {root / 'sshd.pid'}",
                f"AuthorizedKeysFile {authorized_keys}",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "PubkeyAuthentication yes",
                "PermitRootLogin prohibit-password",
                # The temporary directories are not owned and moded the way sshd insists on.
                "StrictModes no",
                # With UsePAM no sshd refuses locked accounts ("!" in /etc/shadow), even for keys.
                f"UsePAM {'yes' if _account_locked(user) else 'no'}",
                f"AllowTcpForwarding {forwarding}",
                "AllowStreamLocalForwarding yes",
                "PermitOpen any",
                "ClientAliveInterval 5",
                "ClientAliveCountMax 3",
                "UseDNS no",
                "PrintMotd no",
                "PrintLastLog no",
                "LogLevel VERBOSE",
                "Subsystem sftp internal-sftp",
            ]
        )
        + "\n"
    )
    return config_file


def start_sshd(
    root: Path,
    *,
    port: int | None = None,
    client_key: Path | None = None,
    allow_tcp_forwarding: bool = True,
) -> SshServer:
    """Start a real OpenSSH server on 127.0.0.1 with its keys and config under ``root``.

    Args:
        root: An empty private directory for the keys, config, pid file and log.
        port: The port to listen on; a free one is picked when ``None``.
        client_key: An existing unencrypted private key to authorize instead of generating one
            (so that several servers, e.g. a jump host and its target, accept the same key).
        allow_tcp_forwarding: Whether the server allows ``direct-tcpip`` and port forwarding
            (``False`` makes it useless as a ProxyJump host).

    Raises:
        RuntimeError: sshd is missing, exits, or does not greet within `STARTUP_TIMEOUT_S`.
    """
    sshd = ensure_openssh()
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    user = pwd.getpwuid(os.getuid()).pw_name

    host_key = root / "ssh_host_ed25519_key"
    host_public_key = generate_key(host_key, f"sshd-harness-host@{HOST}")
    if client_key is None:
        client_key = root / "id_ed25519"
        client_public_key = generate_key(client_key, f"sshd-harness-client@{user}")
    else:
        client_key = client_key.resolve()
        client_public_key = _public_key_of(client_key)

    authorized_keys = root / "authorized_keys"
    authorized_keys.write_text(client_public_key + "\n")
    authorized_keys.chmod(0o600)

    if port is None:
        port = find_free_port()
    known_hosts = root / "known_hosts"
    known_hosts.write_text(f"[{HOST}]:{port} {host_public_key}\n")

    config_file = write_sshd_config(
        root, HOST, port, host_key, authorized_keys, user, allow_tcp_forwarding=allow_tcp_forwarding
    )
    log_file = root / "sshd.log"
    # sshd refuses to start when it cannot parse the config; -t reports why more clearly.
    _ensure_privsep_dir()
    check = subprocess.run([sshd, "-t", "-f", str(config_file)], capture_output=True, text=True, check=False)
    if check.returncode != 0:
        raise RuntimeError(f"sshd rejected {config_file}: {check.stderr.strip()}")

    process = _launch(sshd, config_file, log_file, port)
    return SshServer(
        host=HOST,
        port=port,
        root=root,
        host_key=host_key,
        host_public_key=host_public_key,
        client_key=client_key,
        client_public_key=client_public_key,
        known_hosts=known_hosts,
        user=user,
        process=process,
        log_file=log_file,
        sshd_path=sshd,
        config_file=config_file,
    )
