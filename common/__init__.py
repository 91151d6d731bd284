"""Pieces shared by the IMPALA, PER and LASER agents."""
