"""Where the warm pool lives and what it runs with: its directory (one per installation, one
per confinement view), its command line and environment, and the code fingerprint.

`code_fingerprint()` reads file metadata only (no contents): the interpreter, every site
directory's mtime (a pip install or upgrade changes it) and every .py file of our packages
(path, size, mtime). Kernel and pool compute it the same way; a difference means other code.

Each confinement view (`host/confinement.py`) has its own pool, in `view_dir(DIR, VIEW)`, so
differently confined kernels each find their own; and each installation has its own DIR
(`pool_dir`), so two copies of jmp never replace each other's pool. The messages:
`protocol/pool.py`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from host.spawn import CODE_ROOT, module_argv

ROOT = CODE_ROOT
CODE_PACKAGES = ("protocol", "host", "workers", "jev_harness", "kernel")


def code_fingerprint(root: Path = ROOT) -> str:
    """sha256 of the interpreter, the site directories and our packages' .py files (metadata)."""
    try:  # CPython's own sha256: hashlib's import loads OpenSSL, a cost at every kernel start
        from _sha2 import sha256
    except ImportError:  # another interpreter
        from hashlib import sha256
    h = sha256()
    exe = os.path.realpath(sys.executable)
    h.update(f"{exe}\0{sys.version}\0{_stamp(exe)}\0".encode())
    for entry in sorted({p for p in sys.path if p.endswith(("site-packages", "dist-packages"))}):
        h.update(f"{entry}\0{_stamp(entry)}\0".encode())
    for package in CODE_PACKAGES:
        for dirpath, dirnames, filenames in os.walk(root / package):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.join(dirpath, name)
                    h.update(f"{os.path.relpath(path, root)}\0{_stamp(path)}\0".encode())
    return str(h.hexdigest())


def _stamp(path: str) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_size}:{st.st_mtime_ns}"


def view_dir(directory: Path, key: str) -> Path:
    """Where the pool of one view keeps pool.sock, pool.lock, pool.pid and pool.log."""
    return directory / key


DEFAULT_IDLE_S = 10_800.0  # 3 hours, as Gradle's daemon and Bazel's server
TITLE = "jmp-warm-pool"
INSTALL_CHECK_S = 10.0  # how often an idle pool looks whether its installation still exists


def installation_gone(root: Path = ROOT, python: str = sys.executable) -> str:
    """Why this pool's installation is gone (`uv tool uninstall`, `pipx uninstall`, a deleted
    checkout or venv: its code root or its interpreter no longer exists), else "". A pool
    whose installation is gone exits instead of holding its memory for hours (issue 37)."""
    for path in (root / "host" / "pool.py", Path(python)):
        if not os.path.exists(path):
            return f"{path} no longer exists"
    return ""


def pool_dir(env: dict[str, str] | os._Environ[str], uid: int, root: Path = ROOT) -> Path:
    """The per-user runtime directory of this installation: JMP_WARM_DIR, else
    $XDG_RUNTIME_DIR/jmp-warm-TAG, else /tmp/jmp-warm-UID-TAG, TAG naming where this copy of
    jmp lives (`install_tag`). Short, so the socket path (in a `view_dir` of it) fits in
    sun_path."""
    if env.get("JMP_WARM_DIR"):
        return Path(env["JMP_WARM_DIR"])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / f"jmp-warm-{install_tag(root)}"
    return Path(f"/tmp/jmp-warm-{uid}-{install_tag(root)}")


def install_tag(root: Path = ROOT) -> str:
    """8 hex digits of where this copy of jmp's code lives. Two installations on one machine
    (two checkouts, a `uv tool` and a `pipx` one) run different code: sharing one pool dir,
    each would find the other's pool stale and replace it on every run, so each has its own."""
    try:  # as in code_fingerprint: hashlib's import loads OpenSSL
        from _sha2 import sha256
    except ImportError:
        from hashlib import sha256
    return str(sha256(os.fsencode(root)).hexdigest()[:8])


def idle_timeout(env: dict[str, str] | os._Environ[str]) -> float:
    """JMP_WARM_IDLE_S (seconds, > 0), default 10,800 (3 hours)."""
    try:
        value = float(env.get("JMP_WARM_IDLE_S") or DEFAULT_IDLE_S)
    except ValueError:
        return DEFAULT_IDLE_S
    return value if value > 0 else DEFAULT_IDLE_S


def serve_argv(
    python: str, directory: Path, idle_s: float, preload: str = "all", also: tuple[str, ...] = ()
) -> list[str]:
    """The pool's command line; the padding leaves room to retitle forked workers in `ps`.
    `also`: modules to fork besides jmp's workers (the tests' fake worker)."""
    pad = "--pad=" + "-" * 3000
    args = ["serve", str(directory), f"--idle={idle_s:g}", f"--preload={preload}"]
    return module_argv(python, "workers.pool", [*args, *(f"--also-fork={m}" for m in also), pad])


_POOL_ENV_KEYS = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "JMP_WARM_DIR",
    "JMP_WARM_IDLE_S",
    # They choose the TLS trust store the pool parses once for its forks (workers/tls.py): a
    # pool without them built the default one, no kernel on a machine that sets them (this
    # one does) could reuse it, and every forked router parsed the CA bundle again (~35 ms).
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
)


def pool_env(env: dict[str, str] | os._Environ[str]) -> dict[str, str]:
    """The pool's own environment: an allowlist, so no key or setting of any kernel is in it
    (each forked worker gets its kernel's environment in the Spawn request instead)."""
    out = {k: env[k] for k in _POOL_ENV_KEYS if env.get(k)}
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    out |= {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "OPENHANDS_SUPPRESS_BANNER": "1"}
    return out
