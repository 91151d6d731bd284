"""Prioritized experience replay (Schaul et al. 2016) on Double DQN."""

import common  # noqa: F401  (quiets TensorFlow before it loads)
