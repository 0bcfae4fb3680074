"""Worker processes: router (Jev), generator (Flash), tool (OpenHands executors and MCP).

Vendor SDKs are imported only here, each in its own subprocess.

Two import-time effects, on purpose. `python -m workers.pool ...` typed in a directory takes
that directory off sys.path (the block below; the workers the kernel starts run `python -P`).
And `python -m workers.<kind>` runs this first, so every worker turns non-dumpable
(PR_SET_DUMPABLE 0) before it imports anything or reads a key. A model worker holds its key in
its environment, the tool worker the MCP secrets in memory: no same-user process (a shell the
model started among them) may read /proc/PID/environ or mem of them. Dumpability resets on
exec, so the shells the tool worker starts stay ordinary processes.
"""

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

from host.inspection import forbid_inspection as _forbid_inspection

_forbid_inspection()
