"""PER App. Fig. 10: the last-seen |delta| of the transitions in the replay, sorted, over training.

PER (App. Fig. 10) plots, every 10^6 frames, "the last-seen absolute
TD-error for all transitions in the replay memory, sorted", for rank-based
and uniform replay, and finds that the distribution becomes heavy-tailed as
learning goes on (§5, Discussion: evidence for the form of eq. 1).

`TdErrorLog` keeps, for every live item the learner has sampled, its last
|delta_j| and insertion index; every `every_frames` frames it appends one
snapshot to a JSON-lines file: the seen items' |delta| sorted in decreasing
order, at `POINTS` evenly spaced rank fractions (`sorted_profile`). An item
not sampled yet has no last-seen |delta| (PER stored it at the maximal
priority instead); a snapshot counts them (`unseen`) and leaves them out.
With uniform replay the learner computes |delta| all the same, so the log
needs no priorities.
"""

from __future__ import annotations

import io
import json
import pathlib

import numpy as np

FILE = "td_errors.jsonl"  # In the run directory.
POINTS = 101  # Rank fractions 0, 0.01, ..., 1 of each stored curve.


def sorted_profile(abs_delta: np.ndarray, points: int = POINTS) -> tuple[np.ndarray, np.ndarray]:
    """|delta| sorted in decreasing order, read at `points` evenly spaced rank fractions.

    Args:
      abs_delta: [n] the last-seen |delta| of n >= 1 items.
      points: how many rank fractions, from 0 (the largest) to 1 (the smallest).

    Returns:
      ([points] rank fractions, [points] |delta| at the item of that rank,
      rank fraction f being the item of 0-based rank round(f (n - 1))).
    """
    ordered = np.sort(np.asarray(abs_delta, np.float64))[::-1]
    fractions = np.linspace(0.0, 1.0, points)
    return fractions, ordered[np.rint(fractions * (len(ordered) - 1)).astype(int)]


class TdErrorLog:
    """Last-seen |delta| per live item, written out as sorted snapshots.

    `serialize` and `deserialize` keep it in the run's checkpoint (the agent
    wraps it as a `tf.train.experimental.PythonState`). This module imports no
    TensorFlow, so the study scripts that read the snapshots start fast.
    """

    def __init__(self, path: pathlib.Path, every_frames: int, capacity: int):
        if every_frames < 1:
            raise ValueError(f"every_frames={every_frames}: must be >= 1")
        self.path, self.every_frames, self.capacity = pathlib.Path(path), every_frames, capacity
        self._abs_delta: dict[int, float] = {}
        self._inserted_at: dict[int, int] = {}
        self._next_frames = every_frames

    def record(self, keys: np.ndarray, td_errors: np.ndarray, inserted_at: np.ndarray) -> None:
        """The sampled items' new |delta|, and their insertion indices (to forget them once evicted)."""
        for key, delta, inserted in zip(np.asarray(keys).tolist(), np.abs(td_errors).tolist(), inserted_at.tolist()):
            self._abs_delta[key], self._inserted_at[key] = float(delta), int(inserted)

    def maybe_snapshot(self, frames: int, inserted: int, table_size: int) -> bool:
        """Appends a snapshot once `frames` reaches the next multiple of `every_frames`; True if it did."""
        if frames < self._next_frames:
            return False
        self._forget_evicted(inserted)
        seen = np.fromiter(self._abs_delta.values(), np.float64, len(self._abs_delta))
        record = {"frames": int(frames), "table_size": int(table_size), "seen": len(seen)}
        record["unseen"] = max(int(table_size) - len(seen), 0)
        if len(seen):
            fractions, values = sorted_profile(seen)
            record.update(rank_fraction=fractions.round(4).tolist(), abs_td_error=values.tolist())
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
        self._next_frames = (frames // self.every_frames + 1) * self.every_frames
        return True

    def _forget_evicted(self, inserted: int) -> None:
        """Drops items the FIFO remover has evicted: all older than the last `capacity` inserts."""
        oldest_live = inserted - self.capacity
        for key in [k for k, i in self._inserted_at.items() if i < oldest_live]:
            del self._abs_delta[key], self._inserted_at[key]

    def serialize(self) -> bytes:
        """The items' |delta| and insertion indices, and the next snapshot's frames."""
        keys = np.fromiter(self._abs_delta, np.uint64, len(self._abs_delta))
        buffer = io.BytesIO()
        np.savez(
            buffer, keys=keys, next_frames=np.int64(self._next_frames),
            abs_delta=np.array([self._abs_delta[int(k)] for k in keys], np.float64),
            inserted_at=np.array([self._inserted_at[int(k)] for k in keys], np.int64),
        )  # fmt: skip
        return buffer.getvalue()

    def deserialize(self, string_value: bytes) -> None:
        with np.load(io.BytesIO(string_value)) as arrays:
            keys = [int(k) for k in arrays["keys"]]
            self._abs_delta = dict(zip(keys, arrays["abs_delta"].tolist()))
            self._inserted_at = dict(zip(keys, arrays["inserted_at"].tolist()))
            self._next_frames = int(arrays["next_frames"])


def read(path: pathlib.Path) -> list[dict]:
    """A run's snapshots, oldest first (none if it logged none).

    A run resumed from a checkpoint logs again from the checkpoint's frames:
    a snapshot replaces those of the abandoned stretch (at as many frames or more).
    """
    snapshots: list[dict] = []
    if not path.exists():
        return snapshots
    for line in path.read_text().splitlines():
        record = json.loads(line)
        while snapshots and snapshots[-1]["frames"] >= record["frames"]:
            snapshots.pop()
        snapshots.append(record)
    return snapshots
