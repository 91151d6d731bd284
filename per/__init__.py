"""Prioritized experience replay (Schaul et al. 2016) on Double DQN."""
