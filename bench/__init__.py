"""Benchmarks: `python -m bench [NAME...]` runs every bench/*.py module that defines run()."""

import sys as _sys

# `python -m` put the launch directory first on sys.path before any code of ours ran: when the
# module run is ours, our code's root takes its place (what a run from the checkout meant)
# before the first import that could find a file there. (This block opens every package a
# person runs with `python -m`; tests/test_launch_dir.py.)
if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path:  # the -m target is being located
    _argv = _sys.orig_argv
    _pairs = zip(_argv, [*_argv[1:], ""], strict=True)
    _target = next((a[2:] or b for a, b in _pairs if a[:2] == "-m"), "")
    if _target.partition(".")[0] == __name__:
        _sys.path[0] = __file__.rpartition("/")[0].rpartition("/")[0]
    del _argv, _pairs, _target
