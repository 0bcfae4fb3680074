"""What untrusted code run by jmp can see: the model's shell command, or a task script's code.

    python -I probe.py OUT_DIR MARKER [ENV_FILE]

Stdlib only, run by the shell (agent front ends) or from a task script (harness front ends).
Writes OUT_DIR/probe.json (its pid, environment, /proc status, the chain of its ancestors with
each one's command line, status and whether its environ was readable) and OUT_DIR/environ.bin
(every /proc/PID/environ it could read, raw: the test looks for the keys in it, so nothing
between the probe and the test can redact them). On stdout, which does pass jmp's redactor, it
prints what an attacker would try to get out: `B64 <base64>` of every readable environment
that holds MARKER (the run's own processes: no redactor recognises a key in that form; the
marker keeps other runs on the machine out) and `CMDLINE <text>` for every process whose command
line holds MARKER (the test's MCP server: its arguments are readable by design and must come
out redacted). Given ENV_FILE (the workspace's `.env`, or jmp's key file: the run's keys), it
prints each key's common encodings, `ENC <name> <form> <text>`: base64 with the key at byte 0, 1 and
2 of a group, standard and URL-safe, padded and not; hex in both cases; percent-encoding of
every byte and as `urllib.parse.quote`/`quote_plus` do (issue 32 item 6: the redactor must
know them all). Before those it prints the whole file line-wrapped, between `DUMP <how>` lines
and a last `DUMP end`: through GNU `base64` (76 columns) and `xxd -p` (60 columns), each key
then broken across lines at whatever column the file puts it.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote, quote_plus

STATUS_FIELDS = ("Uid", "Gid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs")
STATUS_FIELDS += ("Seccomp",)


def status(pid: int | str) -> dict[str, str]:
    found = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError as exc:
        return {"error": exc.strerror or str(exc)}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in STATUS_FIELDS or name == "PPid":
            found[name] = value.strip()
    return found


def cmdline(pid: int | str) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def environ(pid: int | str) -> tuple[bytes | None, str]:
    """(the raw environ, '') or (None, why not)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes(), ""
    except OSError as exc:
        return None, exc.strerror or type(exc).__name__


def chain() -> list[dict[str, object]]:
    """Every ancestor, nearest first, up to (not including) pid 1."""
    found: list[dict[str, object]] = []
    pid = os.getppid()
    while pid > 1 and len(found) < 32:
        info = status(pid)
        raw, why = environ(pid)
        found.append(
            {
                "pid": pid,
                "cmdline": cmdline(pid),
                "status": info,
                "environ_readable": raw is not None,
                "environ_error": why,
            }
        )
        try:
            pid = int(info.get("PPid", "0"))
        except ValueError:
            break
    return found


def control() -> bool:
    """Can the probe read the environ of a child of its own (dumpable, same credentials)? The
    proof that an unreadable environ elsewhere is refused, not missed by the probe."""
    import subprocess
    import time

    child = subprocess.Popen(["sleep", "60"], env={"PROBE_CONTROL": "1"})
    try:
        # Popen returns once exec closed its pipe, a little before the kernel sets up the new
        # image's environment (until then it reads empty): poll, bounded.
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            raw, _ = environ(child.pid)
            if raw is not None and b"PROBE_CONTROL=1" in raw:
                return True
            time.sleep(0.02)
        return False
    finally:
        child.kill()
        child.wait()


def encodings(key: str) -> list[tuple[str, str]]:
    """(form, text) of every common encoding of key, as a script would print it."""
    raw = key.encode()
    found = []
    for offset, before in enumerate((b"", b"\n", b"k=")):  # the key at byte 0, 1, 2 of a group
        for alphabet, encode in (("std", base64.b64encode), ("url", base64.urlsafe_b64encode)):
            text = encode(before + raw + b"\n").decode()
            found += [(f"b64-{offset}-{alphabet}", text)]
            found += [(f"b64-{offset}-{alphabet}-nopad", text.rstrip("="))]
    found += [("hex", raw.hex()), ("HEX", raw.hex().upper())]
    found += [("percent-every-byte", "".join(f"%{b:02X}" for b in raw))]
    found += [("quote", quote(key)), ("quote-safe-none", quote(key, safe=""))]
    found += [("quote-plus", quote_plus(key))]
    return found


def print_encodings(env_file: Path) -> None:
    """A `.env` (NAME=VALUE lines), or jmp's key file (`{"keys": {NAME: VALUE}}`, the key file
    scenario: the owner's file, which the same user's shell can read)."""
    text = env_file.read_text()
    if env_file.suffix == ".json":
        pairs = list(json.loads(text)["keys"].items())
    else:
        pairs = [line.partition("=")[::2] for line in text.splitlines()]
    for name, value in pairs:
        if value:
            for form, found in encodings(value):
                print("ENC", name, form, found)


def print_dumps(env_file: Path) -> None:
    """The whole file as `base64 FILE` and `xxd -p FILE` print it (the tools themselves where
    installed, their layout otherwise: the header says which)."""
    raw = env_file.read_bytes()
    for tool, width, encode in (
        ("base64", 76, lambda b: base64.b64encode(b).decode()),
        ("xxd", 60, bytes.hex),
    ):
        argv = [tool, str(env_file)] if tool == "base64" else [tool, "-p", str(env_file)]
        if shutil.which(tool):
            text = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            print("DUMP", " ".join(argv[:-1]))
        else:
            text = "\n".join(textwrap.wrap(encode(raw), width)) + "\n"
            print("DUMP", " ".join(argv[:-1]), "(its layout: not installed)")
        print(text, end="")
    print("DUMP end")


def main(out: Path, marker: str, env_file: Path | None = None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    readable_control = control()
    dump = bytearray()
    keyed: list[bytes] = []
    readable: list[int] = []
    marked: list[str] = []
    for entry in sorted(os.listdir("/proc")):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        raw, _ = environ(entry)
        if raw is not None:
            readable.append(int(entry))
            dump += f"PID {entry}\n".encode() + raw + b"\n"
            if marker and marker.encode() in raw:
                keyed.append(raw)
        line = " ".join(cmdline(entry))
        if marker and marker in line:
            marked.append(line)
    report = {
        "pid": os.getpid(),
        "env": dict(os.environ),
        "status": status("self"),
        "chain": chain(),
        "environ_readable_pids": readable,
        "control_readable": readable_control,
    }
    (out / "environ.bin").write_bytes(bytes(dump))
    (out / "probe.json").write_text(json.dumps(report, indent=1))
    print("B64", base64.b64encode(b"\n".join(keyed)).decode())
    for line in marked:
        print("CMDLINE", line)
    if env_file is not None:
        print_dumps(env_file)
        print_encodings(env_file)
    print("PROBED", len(readable))


if __name__ == "__main__":
    main(
        Path(sys.argv[1]),
        sys.argv[2] if len(sys.argv) > 2 else "",
        Path(sys.argv[3]) if len(sys.argv) > 3 else None,
    )
