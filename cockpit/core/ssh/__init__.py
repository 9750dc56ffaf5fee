"""Provides the SSH side of the cockpit, one subject a module: `config` (what the user's OpenSSH config
says, destinations and hops), `host_keys` (known_hosts and the host-key policy), `hop` (what one hop's
connection reads and the client that applies the policy), `link` (the connection and its private
tunnel) and `errors`.

Only `link`, `hop`, `config` and `host_keys` load asyncssh (~100 ms, ~15 MiB); `errors` is light, because
the UI and the non-SSH commands catch these errors on every path. Nothing is re-exported here for that
reason.
"""
