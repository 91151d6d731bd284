"""IMPALA's learning at the current commit against its committed MinAtar result (#13's equivalence check)."""
