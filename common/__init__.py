"""Pieces shared by the IMPALA, PER and LASER agents.

Importing this package first (every package's `__init__` does) silences
TensorFlow's C++ INFO and WARNING lines before TensorFlow loads, so a user's
one-line error is not buried under start-up chatter. Errors still print.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
