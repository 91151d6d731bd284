"""IMPALA (Espeholt et al. 2018): V-trace and the actor-learner agent."""

import common  # noqa: F401  (quiets TensorFlow before it loads)
