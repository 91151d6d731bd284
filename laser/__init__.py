"""LASER (Schmitt, Hessel & Simonyan 2020): V-trace with shared replay."""

import common  # noqa: F401  (quiets TensorFlow before it loads)
