"""EvidenceTask: read captures, record labelled passages, save a report; completion in code.

Tools (beside the toolkits'): `read_evidence(ref, window)`, `evidence_page(ref, page)`,
`record_evidence(label, passage)` and `save_report()`. A passage counts as read once it lay
wholly inside a window that any operation returned. A label is offered only while it has no
record and some read passage passes its strict check. `save_report` is offered once a record
exists and the records differ from the last saved report. The task is complete when the saved
file, re-read now, equals the report of the current records and `verifier(records)` is True.
Under a driver that redacts (the harness worker's kernel), save_report hands the report over
and `write_pending_report(document)` writes it as the driver redacted it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from jev_harness import report
from jev_harness.evidence_store import EvidenceStore, Passage
from jev_harness.model import Option, Outcome, Parameter, Tool, Toolkit
from jev_harness.task import Task
from jev_harness.text import clip, opening

Record = dict[str, Any]
Check = Callable[[str], bool]


class EvidenceTask(Task):
    """A task that ends in a verified JSON report of labelled quotes (tool choice: explore)."""

    tool_selection = "explore"

    def __init__(
        self,
        store: EvidenceStore,
        toolkits: Sequence[Toolkit],
        labels: Iterable[str] | Mapping[str, str],
        record_checks: Mapping[str, Check],
        output: str | Path,
        verifier: Callable[[list[Record]], bool],
    ) -> None:
        if not isinstance(store, EvidenceStore):
            raise TypeError("EvidenceTask(store=...): an EvidenceStore is required")
        self.labels = _labels(labels)
        unchecked = [label for label in self.labels if not callable(record_checks.get(label))]
        stray = sorted(set(record_checks) - set(self.labels))
        if unchecked or stray:
            raise ValueError(f"record_checks: labels without a check {unchecked}, unknown {stray}")
        if not callable(verifier):
            raise TypeError("EvidenceTask(verifier=...): a callable verifier(records) is required")
        self.record_checks = dict(record_checks)
        self.output = Path(output).expanduser().absolute()  # relative to the cwd at build time
        self.records: list[Record] = []
        self.saved = report.ReportFile(self.output)
        self.driver_redacts = False  # True: save_report hands the report to the driver first
        self._checked: dict[tuple[str, str, int], bool] = {}
        super().__init__(toolkits, None, store=store)
        self.records_verifier = verifier
        for tool in self._evidence_tools():
            self.register(tool)

    # -- the four tools -----------------------------------------------------------------

    def _evidence_tools(self) -> list[Tool]:
        ref = "a captured source to look at"
        return [
            Tool(
                "read_evidence",
                "Read a window (1,200 characters) of a captured source not read yet.",
                (
                    Parameter("ref", ref, self._unread_window_refs, "explore"),
                    Parameter("window", "which window", self._unread_windows, "explore", ("ref",)),
                ),
                self._read_evidence,
            ),
            Tool(
                "evidence_page",
                "Read a page of whole passages of a captured source not read yet.",
                (
                    Parameter("ref", ref, self._unread_page_refs, "explore"),
                    Parameter("page", "which page", self._unread_pages, "explore", ("ref",)),
                ),
                self._evidence_page,
            ),
            Tool(
                "record_evidence",
                "Record a read passage as the evidence for a label.",
                (
                    Parameter("label", "the label to record", self._open_labels),
                    Parameter("passage", "the quote", self._passing, depends_on=("label",)),
                ),
                self._record_evidence,
            ),
            Tool(
                "save_report",
                "Save the report of the records so far.",
                (),
                self._save_report,
                effect="write",
                available=lambda task: bool(self.records) and self.records != self.saved.records,
            ),
        ]

    def _ref_option(self, ref: str) -> Option:
        return Option(ref, self.store_().describe(ref)["summary"], ref)

    def store_(self) -> EvidenceStore:
        assert self.store is not None
        return self.store

    def _unread(self, ref: str, spans: list[tuple[int, int]]) -> list[tuple[int, tuple[int, int]]]:
        return [(i, span) for i, span in enumerate(spans) if not self.was_read(ref, *span)]

    def _unread_window_refs(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        store = self.store_()
        return [self._ref_option(r) for r in store if self._unread(r, store.windows(r))]

    def _unread_windows(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        ref = parents["ref"].value
        return [
            self._span_option(ref, f"w{i + 1}", "chars", span)
            for i, span in self._unread(ref, self.store_().windows(ref))
        ]

    def _unread_page_refs(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        store = self.store_()
        return [self._ref_option(r) for r in store if self._unread(r, store.pages(r))]

    def _unread_pages(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        ref = parents["ref"].value
        return [
            self._span_option(ref, f"page{i + 1}", f"page {i + 1},", span)
            for i, span in self._unread(ref, self.store_().pages(ref))
        ]

    def _span_option(self, ref: str, oid: str, what: str, span: tuple[int, int]) -> Option:
        start, end = span
        source = self.store_().describe(ref)["source"]
        words = opening(self.store_().read(ref, start, min(end - start, 200)), 100)
        return Option(oid, f"{what} {start}-{end} of {source}: {words}", (ref, start, end))

    def _show(self, chosen: Mapping[str, Option], key: str, verb: str) -> Outcome:
        ref, start, end = chosen[key].value
        store = self.store_()
        source = store.describe(ref)["source"]
        return Outcome(
            "ok",
            f"{verb} {source} chars {start}-{end}",
            text=store.read(ref, start, end - start),
            source=source,
            target=ref,
            window=(ref, start, end),
        )

    def _read_evidence(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        return self._show(chosen, "window", "read")

    def _evidence_page(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        return self._show(chosen, "page", "paged")

    # -- records ------------------------------------------------------------------------

    def passes(self, label: str, passage: Passage) -> bool:
        """The label's check on the full passage text; only a literal True passes."""
        key = (label, passage.ref, passage.index)
        if key not in self._checked:
            try:
                self._checked[key] = self.record_checks[label](self.store_().text(passage)) is True
            except Exception:  # a check that raises does not pass
                self._checked[key] = False
        return self._checked[key]

    def passing_passages(self, label: str) -> list[Passage]:
        """Read passages that pass `label`'s check, in capture order."""
        store = self.store_()
        return [
            p
            for ref in store
            for p in store.passages(ref)
            if self.was_read(ref, p.start, p.end) and self.passes(label, p)
        ]

    def _open_labels(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        recorded = {r["label"] for r in self.records}
        return [
            Option(label, clip(f"{label}: {about}" if about else label), label)
            for label, about in self.labels.items()
            if label not in recorded and self.passing_passages(label)
        ]

    def _passing(self, task: Task, parents: Mapping[str, Option]) -> list[Option]:
        label = parents["label"].value
        return [self.store_().passage_option(p) for p in self.passing_passages(label)]

    def _record_evidence(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        label, passage = chosen["label"].value, chosen["passage"].value
        if any(r["label"] == label for r in self.records):
            raise ValueError(f"label {label!r} already has a record")
        if not (
            self.was_read(passage.ref, passage.start, passage.end) and self.passes(label, passage)
        ):
            raise ValueError(f"passage {chosen['passage'].id} is unread or fails {label!r}")
        info = self.store_().describe(passage.ref)
        quote = self.store_().text(passage)
        self.records.append(
            {
                "label": label,
                "quote": quote,
                "source": info["source"],
                "ref": passage.ref,
                "start": passage.start,
                "end": passage.end,
                "digest": info["digest"],
            }
        )
        return Outcome(
            "ok",
            f"recorded {label} from {info['source']}",
            text=quote,
            source=info["source"],
            target=passage.ref,
        )

    # -- the report ---------------------------------------------------------------------

    def report_document(self) -> dict[str, Any]:
        """The report the current records make (redacted, as it would be written now)."""
        return report.report_document(self.goal, self.records, self.redact_value)

    def _save_report(self, task: Task, chosen: Mapping[str, Option]) -> Outcome:
        document, records = self.report_document(), [dict(r) for r in self.records]
        if not self.driver_redacts:
            return self._write(document, records)
        self.saved.pending = (document, records)
        summary = f"report of {len(records)} records handed over for redaction"
        return Outcome("ok", summary, target=str(self.output), data={"pending": True})

    def write_pending_report(self, document: dict[str, Any]) -> Outcome:
        """Write the report the last save_report handed over, as the driver redacted it."""
        records = self.saved.take_pending()
        try:
            outcome = self._write(document, records)
        except Exception as exc:  # a refused or failed write is the operation's outcome
            outcome = Outcome("error", f"save_report failed: {type(exc).__name__}: {exc}")
        self.errors += outcome.status == "error"
        self.last_summary = f"save_report: {outcome.summary}"
        return outcome

    def _write(self, document: dict[str, Any], records: list[Record]) -> Outcome:
        self.saved.write(document, records)
        receipt, verdict = self.artifact_receipt(), self.complete()
        summary = f"saved {len(records)} records to {self.output.name}; verified: {verdict}"
        data = {"verdict": verdict, "path": str(self.output)}
        return Outcome("ok", summary, target=str(self.output), data=data, receipt=receipt)

    def artifact_receipt(self) -> dict[str, Any]:
        """{path, exists, match, record_count, digest, sources} of the file on disk now."""
        return self.saved.receipt(self.records, self.report_document)

    def receipt(self) -> dict[str, Any] | None:
        return self.artifact_receipt()

    def complete(self) -> bool:
        """The saved file equals the current records' report and the verifier accepts them."""
        if not self.records or not self.artifact_receipt()["match"]:
            return False
        try:
            return self.records_verifier([dict(r) for r in self.records]) is True
        except Exception:  # a verifier that raises does not accept
            return False

    # -- state --------------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        counts = super().counts()
        counts["records"] = len(self.records)
        counts["labels_open"] = len(self.labels) - len(self.records)
        return counts

    def observation(self) -> dict[str, Any]:
        obs = super().observation()
        obs["records"] = [
            clip(f"{r['label']}: {r['source']}: {opening(r['quote'], 100)}")
            for r in self.records[-8:]
        ]
        obs["saved"] = self.saved.records is not None and self.saved.records == self.records
        return obs


def _labels(labels: Iterable[str] | Mapping[str, str]) -> dict[str, str]:
    pairs = list(labels.items()) if isinstance(labels, Mapping) else [(x, "") for x in labels]
    if not pairs:
        raise ValueError("EvidenceTask(labels=...): give at least one label")
    out: dict[str, str] = {}
    for name, about in pairs:
        if not isinstance(name, str) or not name.strip() or name in out:
            raise ValueError(f"labels: {name!r} is empty, not a string, or repeated")
        out[name] = str(about or "")
    return out
