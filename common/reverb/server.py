"""A Reverb server built from the tables an agent declares, and `connect`.

The server listens on all interfaces. On one machine keep its port private
(e.g. a firewall); across machines, use a private network.
"""

from __future__ import annotations

import logging
import os
import pathlib
import sys
import tempfile
import time
from typing import Sequence

import numpy as np
import reverb

from common import process_exit
from common.errors import UsageError
from common.reverb.ports import check_port_free


def _not_portpicker_info(record: logging.LogRecord) -> bool:
    # A server given its --port returns it to portpicker as it stops, which logs on the root logger that it had
    # not handed the port out: a line of noise after a stopped server's last word.
    return not (record.pathname.endswith("portpicker.py") and record.levelno < logging.WARNING)


logging.getLogger().addFilter(_not_portpicker_info)


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


def check_served(tables: Sequence[reverb.Table], client: reverb.Client, address: str, remedy: str) -> None:
    """A `UsageError` unless the server at `address` holds `tables` as this process's config builds them.

    A learner or actor started from another config than its server's would
    otherwise wait forever on a rate limiter built for another batch, or
    sample with another alpha than its config.json records. Compared: what a
    table's config sets (capacity, selectors, rate limiter), not its contents.
    `remedy`: what the refusal tells the user to do.
    """
    try:
        served = client.server_info(timeout=60)
    except reverb.errors.DeadlineExceededError:  # Busy, e.g. saving a large replay: not a traceback.
        raise UsageError(f"the Reverb server at {address} did not describe its tables within 60s; try again") from None
    for table in tables:
        name = table.info.name
        if name not in served:
            raise UsageError(
                f"the Reverb server at {address} has no table {name!r} (it has {', '.join(sorted(served))}); {remedy}"
            )
        wanted, got = _settings(table.info), _settings(served[name])
        for key, value in wanted.items():
            if got[key] != value:
                raise UsageError(
                    f"the Reverb server at {address} built table {name!r} with {key} {got[key]}, this process's "
                    f"config with {value}; {remedy}"
                )


def check_unused(tables: Sequence[reverb.Table], client: reverb.Client, address: str, remedy: str) -> None:
    """A `UsageError` if one of `tables` on the server at `address` holds items.

    A new run's learner (not `--resume`) must start on tables no other run has
    used: one found another run's unrolls or replay there, logged their
    episodes as its own and trained on them, and a server with `--tables_dir`
    then saved the mixed replay over the one it had kept. Its actors write
    nothing before it publishes its first parameters, so its own tables are
    empty when it starts. `tables`: those only this run writes (a LASER sweep
    member's shared replay, which the other members fill, is not one).
    """
    served = client.server_info(timeout=60)
    for table in tables:
        name = table.info.name
        if held := served[name].current_size:
            raise UsageError(
                f"the Reverb server at {address} already holds {held:,} item(s) in table {name!r}, another run's, "
                f"which a new run would train on; {remedy}"
            )


def claim(client: reverb.Client, table: str, run_id: str, directory: pathlib.Path) -> None:
    """Names the run whose learner uses the server's tables: `run_id` and its run directory, in `table`
    (`tables.run_identity`), replacing any earlier claim."""
    client.insert([np.array(f"{run_id} {directory}".encode())], {table: 1.0})


def claimant(client: reverb.Client, table: str) -> tuple[str, str] | None:
    """(run id, run directory) of the last `claim` in `table`; None if no learner has claimed it."""
    if not client.server_info(timeout=60)[table].current_size:
        return None  # Checked first: a sample of the empty table would wait for a claim.
    (sample,) = next(client.sample(table, num_samples=1))
    run_id, _, directory = sample.data[0].item().decode().partition(" ")
    return run_id, directory


def check_claim(
    client: reverb.Client, table: str, address: str, run: tuple[str | None, pathlib.Path] | None, remedy: str
) -> None:
    """A `UsageError` if a learner of a run other than `run` (id, directory; None: any run) claimed the server.

    A resumed learner on another run's server (the same config, another
    address given by mistake) trained on that run's replay and published
    its parameters to that run's actors; `check_served` compares only the
    tables' settings. A server that no learner has claimed (a new one, or one
    restored from tables saved before claims existed) passes. A run without
    an id yet (recorded before ids, or stopped between its claim and its
    record's first write) passes on its own directory's claim.
    """
    owner = claimant(client, table)
    if owner is None or run is not None and (owner[0] == run[0] or run[0] is None and owner[1] == str(run[1])):
        return
    raise UsageError(f"the Reverb server at {address} serves the run in {owner[1]} (its learner's); {remedy}")


def exit_when_claimed(
    client: reverb.Client, table: str, run_id: str, address: str, then: str, period_s: float = 30.0
) -> None:
    """Ends this learner (status 1, nothing saved) once another run's learner has claimed the server, saying `then`.

    Two learners started together on one server both pass `check_claim`
    before either claims it, and the later claim stands (`claim`). The other
    learner would go on sampling that run's replay, rewriting its priorities
    and publishing parameters to its actors; saving would checkpoint that
    run's tables. So it stops at once and its run keeps its last checkpoint.
    """
    while True:
        time.sleep(period_s)
        try:
            owner = claimant(client, table)
        except Exception:  # The server gone or too busy to answer: `common.launch.exit_when_server_gone` tells.
            continue
        if owner is not None and owner[0] != run_id:
            print(
                f"learner: the Reverb server at {address} now serves the run in {owner[1]}, whose learner claimed "
                f"it after this one; {then}", file=sys.stderr, flush=True,
            )  # fmt: skip
            process_exit.now(1)


def _settings(info: reverb.TableInfo) -> dict[str, object]:
    """What a table's config sets, by name; the rate limiter's counts and the contents left out."""
    limiter = info.rate_limiter_info
    return {
        "max_size": info.max_size, "max_times_sampled": info.max_times_sampled,
        "sampler": " ".join(str(info.sampler_options).split()), "remover": " ".join(str(info.remover_options).split()),
        "samples_per_insert": limiter.samples_per_insert, "min_size_to_sample": limiter.min_size_to_sample,
        "min_diff": limiter.min_diff, "max_diff": limiter.max_diff,
    }  # fmt: skip
