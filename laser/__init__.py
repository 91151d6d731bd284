"""LASER (Schmitt, Hessel & Simonyan 2020): V-trace with shared replay."""
