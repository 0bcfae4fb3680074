"""jmp's errors as JSON-RPC errors: the message is the redacted text the CLI would print."""

from __future__ import annotations

from acp import RequestError

from kernel.errors import JmpError, SessionNotFound, UsageError, WorkspaceMismatch
from kernel.store.redact import Redactor, debug_traceback

JMP_ERROR = -32001  # a named jmp error (missing key, session in use, ...): see DECISIONS
NOT_FOUND = -32002  # the ACP spec's "resource not found"
INVALID_PARAMS = -32602
INTERNAL = -32603


def as_request_error(exc: BaseException, redactor: Redactor) -> RequestError:
    """A RequestError whose message names the problem; keys never leave, even here."""
    message = redactor.text(str(exc))
    data = {"errorClass": type(exc).__name__}
    if isinstance(exc, SessionNotFound):
        return RequestError(NOT_FOUND, message, data)
    if isinstance(exc, UsageError | WorkspaceMismatch):
        return RequestError(INVALID_PARAMS, message, data)
    if isinstance(exc, JmpError):
        return RequestError(JMP_ERROR, message, data)
    debug_traceback(exc, redactor)
    return RequestError(INTERNAL, f"internal error: {type(exc).__name__}: {message}", data)
