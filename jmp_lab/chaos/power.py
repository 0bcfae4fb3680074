"""What a power cut must leave, checked right after each cut and at the end of an iteration.

Black-box, on what jmp printed and what the disk holds (JSON and files, not jmp's code; the
recall check reads the cache's documented file with sqlite3, and skips when it cannot):

- a session whose `session` record was printed still opens after the cut (`session-vanished`);
- a record that was printed is in the recovered log unchanged, or its seq is never used again
  for another record (`printed-lost-reused`);
- artifacts that durable records name exist and are complete: a request artifact or a
  checkpoint always (`request-artifact-missing`, `checkpoint-missing`); an output artifact
  shorter than it was is a silent prefix (`output-artifact-short`); one that is empty or
  missing is allowed only where the next model requests that show the call say so
  (`output-artifact-missing`);
- the first run after a cut finds the session: no "in use" (`lock-stuck`), no refused log
  (`log-refused`), no internal error (`internal-error`);
- after an injected EIO on fsync (or ENOSPC on a write) the run stops with an error naming
  the failure and a file on the disk (`eio-unclear`, `enospc-unclear`); the disk's power is
  then cut at once, so anything claimed durable after the failure is checked by the above;
- the recall index (memory.sqlite3) indexes no record the log does not hold (`recall-stale`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from jmp_lab.chaos import check, targets
from jmp_lab.chaos.plan import CACHES, Cut, Fault
from jmp_lab.chaos.world import read_log

if TYPE_CHECKING:
    from jmp_lab.chaos.drive import Driver
    from jmp_lab.chaos.invoke import Outcome

# What jmp's projection says of an output artifact it could not read (kernel/context/render.py)
MISSING_MARKERS = ("full output unreadable", "full output artifact is empty")
ERRNO_TEXT = {"eio_fsync": "Input/output error", "enospc": "No space left on device"}
ARTIFACT_FIELDS = {
    "tool_started": (("request", "request-artifact-missing"),),
    "tool_finished": (("full_output", "output"), ("artifact", "output")),
    "compaction": (("checkpoint", "checkpoint-missing"),),
}


class PowerWatch:
    """The power checks of one iteration, fed by its driver after every invocation."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver
        self.world = driver.world
        self.figures: Counter[str] = driver.report.figures
        self.printed: dict[tuple[str, int], dict[str, Any]] = {}
        self.sessions: set[str] = set()  # whose session record was printed
        self.runner_torn: set[tuple[str, int]] = set()  # lines the runner itself tore
        self.reopening = False  # the next invocation is the first after a cut
        self.outputs: list[tuple[str, str, int, int]] = []  # lost output: call, preview, from

    # --- after every invocation -------------------------------------------------------

    def after(self, out: Outcome, fault: Fault | None) -> list[str]:
        """Checks of one invocation; a cut (planned, or after an injected EIO) is handled."""
        found = self._reopened(out) if self.reopening else []
        self.reopening = False
        for record in out.lines:
            sid, seq = record.get("session_id"), record.get("seq")
            if isinstance(sid, str) and isinstance(seq, int):
                self.printed.setdefault((sid, seq), record)
                if record.get("kind") == "session":
                    self.sessions.add(sid)
        if out.cut is not None:
            return found + self._cut(out)
        if fault is not None and fault.kind in ERRNO_TEXT:
            found += self._disk_fault(out, fault)
        return found

    def _reopened(self, out: Outcome) -> list[str]:
        return reopened(out)

    def _disk_fault(self, out: Outcome, fault: Fault) -> list[str]:
        rules = out.disk.get("rules", [])
        fired = rules[0]["fired"] if rules and rules[0]["action"] in ("eio", "enospc") else []
        if not fired:
            return []
        self.figures[f"{fault.kind} injected"] += 1
        if silenced(out):
            self.figures[f"{fault.kind} injected, the kernel killed before it said"] += 1
        if cache_only(fired[0]):
            self.figures[f"{fault.kind} injected, a directory sync for the cache or nothing"] += 1
        problem = unclear(out, fault.kind, str(self.world.home))
        found = [problem] if problem else []
        if fault.kind == "eio_fsync":  # the power goes right after: nothing unsynced is kept
            found += self.cut_now(out, Cut("after-eio", 1, seed=len(self.printed)))
        return found

    def cut_now(self, out: Outcome, cut: Cut) -> list[str]:
        """A cut between invocations (the run is over; what is left of it is killed)."""
        disk = self.world.disk
        assert disk is not None
        disk.freeze()
        for proc in self.driver.census.alive():
            targets.sigkill(proc.pid)
        out.before = self.world.session_files()
        out.lost, out.cut = disk.cut(cut.data, cut.dirs, cut.seed), cut
        return self._cut(out)

    # --- right after a cut --------------------------------------------------------------

    def _cut(self, out: Outcome) -> list[str]:
        cut, lost, figures = out.cut, out.lost, self.figures
        assert cut is not None and self.world.disk is not None
        figures["cuts"] += 1
        figures[f"cuts {self.driver.path}"] += 1
        figures[f"cut phase {cut.phase}"] += 1
        figures[f"cut data {cut.data}, dirs {cut.dirs}"] += 1
        figures[f"cut model {self.world.disk.model}"] += 1
        figures["cut: files reverted or torn"] += len(lost["reverted"]) + len(lost["torn"])
        figures["cut: directory changes undone"] += len(lost["undone"])
        started = time.monotonic()
        self.world.disk.start()  # the power comes back
        figures["time: disk remounts"] += time.monotonic() - started
        self.reopening = True
        self.driver.interrupted = set()  # read again from the recovered log below
        found = []
        for sid in sorted(self.sessions):
            log = self.world.home / sid / "events.jsonl"
            if not read_log(log)[:1]:
                found.append(
                    f"session-vanished: session {sid} (its session record was printed) is gone "
                    f"after the cut at {_where(cut)}; undone: {', '.join(lost['undone'][:6])}"
                )
                self.sessions.discard(sid)
                if self.world.session_id == sid:
                    self.world.session_id = None  # the user can only start over
        sid = self.world.session_id
        if sid is not None:
            log = self.world.home / sid / "events.jsonl"
            data = log.read_bytes() if log.exists() else b""
            if data and not data.endswith(b"\n"):
                self.driver.cut.append(data[data.rfind(b"\n") + 1 :])  # must be archived
                figures["cut: torn log tails"] += 1
            found += self._artifacts(sid, out)
        return found

    def _artifacts(self, sid: str, out: Outcome) -> list[str]:
        """Artifacts the recovered log names, against what they held just before the cut."""
        found = []
        asked = (len(self.world.jev.requests), len(self.world.flash.requests))
        for event in read_log(self.world.home / sid / "events.jsonl"):
            data = event.get("data") or {}
            for name, cls in ARTIFACT_FIELDS.get(event.get("kind", ""), ()):
                rel = data.get(name)
                before = out.before.get(f"{sid}/{rel}") if isinstance(rel, str) else None
                if before is None:
                    continue
                path = self.world.home / sid / rel
                now = path.read_bytes() if path.is_file() else None
                if now == before:
                    continue
                self.figures["cut: artifacts lost or short"] += 1
                what = "missing" if now is None else f"{len(now)} of {len(before)} bytes"
                where = f"{rel} ({event['kind']} seq {event.get('seq')}): {what}"
                if cls != "output":
                    found.append(f"{cls}: {where} after the cut at {_where(out.cut)}")
                elif now and before.startswith(now):
                    found.append(f"output-artifact-short: {where}, a silent prefix")
                elif now:
                    found.append(f"output-artifact-short: {where}, other bytes than before")
                else:
                    call = str(data.get("call_id", ""))
                    self.outputs.append((call, str(data.get("text") or ""), *asked))
        return found

    # --- at the end ---------------------------------------------------------------------

    def final(self, sid: str | None) -> list[str]:
        home, figures = self.world.home, self.figures
        found = check.printed_kept(self.printed, self.runner_torn, home, figures)
        found += self._marked()
        return found + (check.recall_matches(home / sid, figures) if sid else [])

    def _marked(self) -> list[str]:
        """A lost or empty output is allowed where the model is told so when it sees the call."""
        found = []
        bodies_jev = self.world.jev.requests
        bodies_flash = self.world.flash.requests
        for call, preview, jev_from, flash_from in self.outputs:
            snippet = preview.strip()[:60]
            if not snippet:
                continue
            texts = [
                text
                for r in [*bodies_jev[jev_from:], *bodies_flash[flash_from:]]
                for text in _strings(r.get("body"))
                if snippet in text
            ]
            if not texts:
                self.figures["lost outputs never shown again"] += 1
            elif not any(m in t for t in texts for m in MISSING_MARKERS):
                found.append(
                    f"output-artifact-missing: the output of call {call} was lost in a cut and "
                    "the model was shown the call without a word of it"
                )
            else:
                self.figures["lost outputs marked missing"] += 1
        return found


def reopened(out: Outcome) -> list[str]:
    """What the first run after a cut must not say: an internal error, the session in use (a
    stuck lock), a refused log."""
    text = out.stdout + out.stderr
    found = []
    if "internal error" in text:
        found.append(f"internal-error: the first run after a cut: {_tail(out.stderr)}")
    if "in use by" in text:
        found.append(f"lock-stuck: the first run after a cut: {_tail(text)}")
    for refusal in ("malformed", "does not follow", "does not start with its session"):
        if refusal in text:
            found.append(f"log-refused: after a cut jmp refuses the log: {_tail(text)}")
            break
    return found


def silenced(out: Outcome) -> bool:
    """A planned kill took the kernel in this run: it may have landed before the kernel could
    say anything (a generation's first chunk, milliseconds after the failed fsync of the
    record before it). As after a cut, there is nobody left to ask; what it printed is still
    checked against the disk after the cut that follows."""
    return any(kill.target == "kernel" for kill in out.kills)


def cache_only(fired: dict[str, Any]) -> bool:
    """A failed fsync of a directory that was there to make durable only the entries of caches
    (plan.CACHES: the recall cache's memory.sqlite3*, events.index), or nothing at all. SQLite
    syncs the directory of a new WAL and ignores that sync's error; events.index's writer
    drops the index on any error. Both rightly: each cache is checked against the log and
    rebuilt from it. A failed directory fsync loses nothing by itself (its entries stay
    pending); no record depends on these entries."""
    commits = fired.get("commits")
    return commits is not None and all(name.startswith(CACHES) for name in commits)


def unclear(out: Outcome, kind: str, home: str) -> str | None:
    """The violation when a run whose disk failed (`kind`: eio_fsync, enospc; the disk's
    first fired rule in `out.disk`) did not stop with an error naming the failure and a file
    of `home`; None when it did, or when it was silenced (see there)."""
    fired = out.disk["rules"][0]["fired"]
    text = out.stdout + out.stderr
    stopped = out.code not in (0, None) or out.status not in ("completed", None)
    if silenced(out) or (stopped and ERRNO_TEXT[kind] in text and home in text):
        return None
    if cache_only(fired[0]):
        return None
    cls = "eio-unclear" if kind == "eio_fsync" else "enospc-unclear"
    return (
        f"{cls}: {fired[0]['op']} of {fired[0]['path']} failed ({ERRNO_TEXT[kind]}); the run "
        f"exited {out.code} ({out.status}) saying: {_tail(text)}"
    )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _where(cut: Cut | None) -> str:
    if cut is None:
        return "?"
    what = {"event": cut.kind, "fs": f"{cut.kind} {cut.pattern} {cut.timing}"}.get(cut.phase, "")
    return f"{cut.phase} {what} #{cut.nth} ({cut.data}/{cut.dirs})".replace("  ", " ")


def _tail(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return json.dumps(lines[-1][:300] if lines else "")
