"""The session's durable store: lock, event log, artifacts, redaction, the session catalog and
the pending calls."""
