"""Ours against a peer system on the same machine: `python -m reproduce.benchmarks.peers --peer sample_factory`.

IMPALA's end-to-end throughput (frames/s) on Pong against sample-factory 2.1.1
(APPO with V-trace, PyTorch) under matched settings: 84x84 grayscale, frame
skip 4, 4 stacked frames, the shallow network (conv 16 8x8/4, conv 32 4x4/2,
FC 256; sample-factory's `convnet_impala` encoder with one 256 layer), no LSTM,
unroll 20, batch 32 unrolls, 2 actor/rollout processes.

* `venv`: the peer's own pinned venv (`.peers/<peer>/`), never the project's.
* `measure`: one run of a system, its frames/s over a fixed window, the load.
* `report`: `peers.{csv,md}`.
* `sample_factory_train.py`: run by the peer's interpreter, not imported here.
"""
