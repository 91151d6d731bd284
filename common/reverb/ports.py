"""The port a process's Reverb server is to listen on, checked before TensorFlow and Reverb load."""

from __future__ import annotations

import socket

from common.errors import UsageError


def check_port_free(port: int) -> None:
    """A `UsageError` if anything listens on `port`.

    gRPC binds with SO_REUSEPORT, so a second Reverb server on a busy port
    would start without error and silently share the first one's traffic; a
    bind without SO_REUSEPORT fails while anything listens there. The probe
    sets SO_REUSEADDR, as gRPC does, so that a stopped server's connections,
    which linger in TIME_WAIT on its port for a minute, do not count: gRPC
    binds over them, and a plain bind refused Ctrl-C then `--resume --port P`.
    """
    if not 0 < port < 65536:
        raise UsageError(f"--port={port}: must be in 1..65535")
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                probe.bind((host, port))
        except OSError as error:
            if error.errno in (97, 99):  # No IPv6 on this machine: the IPv4 probe decides.
                continue
            raise UsageError(f"--port={port} is already in use; choose a free port or omit --port") from None


def check_address(address: str) -> None:
    """A `UsageError` unless `address` is HOST:PORT with a port in 1..65535 (checked before TensorFlow loads)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UsageError(f"--replay_address={address}: expected HOST:PORT with a port in 1..65535, e.g. localhost:8000")


def accepts_connections(address: str, timeout_s: float) -> bool:
    """Whether a TCP connection to `address` (HOST:PORT) opens within `timeout_s`."""
    host, _, port = address.rpartition(":")
    try:  # A bracketed IPv6 host, [::1]:8000 as gRPC takes it, is ::1 to a socket.
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False
