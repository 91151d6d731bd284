"""Benchmark suites (Atari-57, MinAtar, lists of games): `python -m reproduce.suite`, then
`python -m reproduce.suite.aggregate SUITE_DIR`.

Not a paper study: `python -m reproduce` skips this package.
"""
