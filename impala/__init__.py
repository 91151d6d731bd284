"""IMPALA (Espeholt et al. 2018): V-trace and the actor-learner agent."""
