"""`python -m workers.pool start|stop|status|serve`: the warm pool's own commands.

start   launch the pool detached in the runtime dir (JMP_WARM_DIR, else $XDG_RUNTIME_DIR/
        jmp-warm, else /tmp/jmp-warm-UID) and wait until it answers; prints its state
stop    ask the pool to exit (its live workers keep serving their kernels)
status  print the pool's state as JSON; exit 1 when no pool answers
serve   run the pool in the foreground (what `start` and kernels launch)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from protocol import pool as P

START_WAIT_S = 300.0  # the first import of OpenHands on a busy machine


def ask(directory: Path, msg: P.AnyPoolMsg, timeout_s: float = 5.0) -> P.AnyPoolMsg | None:
    """One request/answer on a fresh connection; None when no pool answers."""
    from workers.pool import read_frame

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(directory / "pool.sock"))
            sock.sendall(P.encode(msg))
            if isinstance(msg, P.Stop):
                return msg
            return read_frame(sock)[0]
    except (OSError, EOFError, ValueError, msgspec.DecodeError):
        return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workers.pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("command", choices=["start", "stop", "status", "serve"])
    parser.add_argument("dir", nargs="?", default=None)
    parser.add_argument("--idle", type=float, default=None)
    parser.add_argument("--preload", default="all")
    parser.add_argument("--detach", action="store_true")
    parser.add_argument("--pad", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    directory = Path(args.dir) if args.dir else P.pool_dir(os.environ, os.getuid())
    idle = args.idle if args.idle and args.idle > 0 else P.idle_timeout(os.environ)
    if args.command == "serve":
        from workers.pool import serve

        kinds = [] if args.preload == "none" else args.preload.split(",")
        if args.preload == "all":
            kinds = ["tool", "router", "generator", "harness"]
        return serve(directory, idle, kinds, args.detach)
    if args.command == "stop":
        if ask(directory, P.Status()) is None:
            print(f"no warm pool in {directory}")
            return 0
        ask(directory, P.Stop())
        print(f"stopped the warm pool in {directory}")
        return 0
    state = ask(directory, P.Status())
    if args.command == "start" and state is None:
        argv = [*P.serve_argv(sys.executable, directory, idle, args.preload), "--detach"]
        subprocess.run(
            argv,
            env=P.pool_env(os.environ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        deadline = time.monotonic() + START_WAIT_S
        while state is None and time.monotonic() < deadline:
            time.sleep(0.2)  # polling a socket that appears once the imports are done
            state = ask(directory, P.Status())
    if state is None:
        print(f"no warm pool in {directory}", file=sys.stderr)
        return 1
    print(json.dumps(msgspec.to_builtins(state)))
    return 0
