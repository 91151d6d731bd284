"""Reverb, the one data plane between actors and learners.

* `tables`: the table kinds the agents declare (a FIFO queue, a one-slot
  variables table, uniform and prioritized replay);
* `adders`: writers that turn N env streams into items of several tables;
* `datasets`: batches of items for a learner;
* `server`: a server built from an agent's tables, and `connect`;
* `ports`: the port a server is to listen on, checked before TensorFlow loads;
* `variables`: parameters published by the learner and fetched by actors.
"""
