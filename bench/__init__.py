"""Benchmarks: `python -m bench [NAME...]` runs every bench/*.py module that defines run()."""
