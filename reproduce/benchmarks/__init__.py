"""Benchmarks against other systems: `python -m reproduce.benchmarks.<name>`.

Not paper studies: `python -m reproduce` never runs them. Each benchmark is a
package (`<name>/__main__.py`), and the study discovery in
`reproduce._scripts` skips packages, so keep no plain modules here.
"""
