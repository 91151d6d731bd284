"""A Reverb server built from the tables an agent declares, and `connect`.

The server listens on all interfaces. On one machine keep its port private
(e.g. a firewall); across machines, use a private network.
"""

from __future__ import annotations

import pathlib
import socket
import time
from typing import Sequence

import reverb

from common.errors import UsageError


def check_port_free(port: int) -> None:
    """A `UsageError` if anything listens on `port`.

    gRPC binds with SO_REUSEPORT, so a second Reverb server on a busy port
    would start without error and silently share the first one's traffic; a
    plain bind (without SO_REUSEPORT) fails on any holder.
    """
    if not 0 < port < 65536:
        raise UsageError(f"--port={port}: must be in 1..65535")
    for family, host in ((socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((host, port))
        except OSError as error:
            if error.errno in (97, 99):  # No IPv6 on this machine: the IPv4 probe decides.
                continue
            raise UsageError(f"--port={port} is already in use; choose a free port or omit --port") from None


def make_server(
    tables: Sequence[reverb.Table], port: int | None = None, checkpoint_dir: pathlib.Path | None = None
) -> reverb.Server:
    """A server for `tables` on `port` (None: any free port).

    With `checkpoint_dir`, `Client.checkpoint()` saves the tables there and a
    new server loads the latest saved tables, so a resumed run keeps its replay.
    """
    if port is not None:
        check_port_free(port)
    checkpointer = None
    if checkpoint_dir is not None:
        checkpointer = reverb.checkpointers.DefaultCheckpointer(str(checkpoint_dir))
    return reverb.Server(list(tables), port=port, checkpointer=checkpointer)


def connect(address: str, timeout_s: float) -> reverb.Client:
    """A client for `address`, after checking the server answers within `timeout_s`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"bad Reverb address {address!r}: expected HOST:PORT, e.g. localhost:8000")
    client = reverb.Client(address)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            client.server_info(timeout=max(1, int(deadline - time.monotonic())))
            return client
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no Reverb server answered at {address} within {timeout_s:.0f}s ({type(error).__name__}); "
                    "start the server role first or check --replay_address"
                ) from None
            time.sleep(0.5)
