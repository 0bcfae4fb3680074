"""The contract's vocabulary (CONTRACT.md section 5), for black-box tests that check records."""

from __future__ import annotations

import re

HEX32 = re.compile(r"^[0-9a-f]{32}$")
TOOLS = {"read", "write", "edit", "bash", "recall", "ask", "done"}
STAGES = {"route", "completion_review", "generate", "respond", "tool", "compaction", "recall"}
# CONTRACT.md section 5, with the names jmp gives the contract's prose fields (docs/EVENTS.md).
REQUIRED = {
    "session": {"workspace", "session_id"},
    "user": {"text"},
    "run_started": {"model", "thinking", "listing"},
    "route": {"choice", "confidence", "context_bytes", "probabilities"},
    "model_started": {"stage", "model"},
    "model_progress": {"stage", "characters"},
    "usage": {"provider", "stage", "model", "seconds", "usage"},
    "argument_offload": {
        "backend",
        "tool",
        "policy",
        "generation_call_skipped",
        "generator",
        "flash_call_skipped",
    },
    "tool_started": {"call_id", "tool", "target", "request"},
    "tool_finished": {
        "call_id",
        "tool",
        "status",
        "exit_code",
        "text",
        "arguments",
        "artifact",
        "full_output",
    },
    "tool_uncertain": {"call_id", "tool", "cause", "acknowledged", "note"},
    "compaction": {"audience", "through", "checkpoint", "method"},
    "final": {"status", "summary"},
    "error": {"stage", "error_class", "message"},
    "cleanup_warning": {"error_class"},
}
