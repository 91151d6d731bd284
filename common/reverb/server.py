"""A Reverb server built from the tables an agent declares, and `connect`.

The server listens on all interfaces. On one machine keep its port private
(e.g. a firewall); across machines, use a private network.
"""

from __future__ import annotations

import os
import pathlib
import tempfile
import time
from typing import Sequence

import reverb

from common.errors import UsageError
from common.reverb.ports import check_port_free


def make_server(
    tables: Sequence[reverb.Table], port: int | None = None, checkpoint_dir: pathlib.Path | None = None
) -> reverb.Server:
    """A server for `tables` on `port` (None: any free port).

    With `checkpoint_dir`, `Client.checkpoint()` saves the tables there and a
    new server loads the latest saved tables, so a resumed run keeps its replay.
    """
    if port is not None:
        check_port_free(port)
    if checkpoint_dir is not None:
        checkpointer = reverb.checkpointers.DefaultCheckpointer(str(checkpoint_dir))
        return reverb.Server(list(tables), port=port, checkpointer=checkpointer)
    # Without one, Reverb's default checkpointer makes an empty temporary directory per server and leaves it
    # behind. The server reads it only as it starts (an empty one holds no tables to load), so it goes once the
    # server is up; a later `Client.checkpoint()`, which no agent asks of such a server, would make it again.
    path = tempfile.mkdtemp(prefix="reverb_checkpoints_")
    try:
        return reverb.Server(list(tables), port=port, checkpointer=reverb.checkpointers.DefaultCheckpointer(path))
    finally:
        os.rmdir(path)


def connect(address: str, timeout_s: float) -> reverb.Client:
    """A client for `address`, after checking the server answers within `timeout_s`."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"bad Reverb address {address!r}: expected HOST:PORT, e.g. localhost:8000")
    client = reverb.Client(address)
    start = time.monotonic()
    deadline, said = start + timeout_s, False
    while True:
        try:
            # One second at a time: Python runs a signal's handler only between calls, so a Ctrl-C during a
            # whole-timeout call waited for its end.
            client.server_info(timeout=1)
            return client
        except (reverb.errors.DeadlineExceededError, RuntimeError, ValueError) as error:
            if time.monotonic() >= deadline:
                raise UsageError(
                    f"no Reverb server answered at {address} within {timeout_s:.0f}s ({type(error).__name__}); "
                    "start the server role first or check --replay_address"
                ) from None
            if not said and time.monotonic() - start >= 2.0:  # Not a loaded machine's slow first answer.
                print(f"waiting for the Reverb server at {address} (up to {timeout_s:.0f}s)", flush=True)
                said = True
            time.sleep(0.5)
