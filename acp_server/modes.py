"""ACP session modes: `auto` (effects run unasked, the CLI's behaviour) and `ask` (each effect
waits for the person's answer), and the approver that asks.

The approver is the session's `Agent(approve=...)` hook (kernel/loop/approval.py), called on
the run's thread right before an effect would start: in `ask` mode it shows the call as
`pending`, sends `session/request_permission` (allow once / always for this session / reject)
and waits; the kernel records the answer before `tool_started`. "Always" covers that tool for
the rest of the session, in this process and the next (it is read back from the `approval`
records, as the mode is from the `mode` records).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from typing import TYPE_CHECKING, Protocol

from acp import RequestError
from acp.helpers import update_current_mode
from acp.schema import (
    AllowedOutcome,
    ConfigOptionUpdate,
    CurrentModeUpdate,
    PermissionOption,
    SessionConfigOptionBoolean,
    SessionConfigOptionSelect,
    SessionConfigSelectOption,
    SessionMode,
    SessionModeState,
    ToolCallUpdate,
)

from acp_server.errors import INVALID_PARAMS
from acp_server.updates import proposed, title, tool_kind
from kernel.loop.approval import Approval, ProposedCall
from protocol.events import SessionMode as ModeId

if TYPE_CHECKING:
    from collections.abc import Callable

    from acp_server.sender import Sender
    from acp_server.sessions import Handle
    from acp_server.translator import Translator
    from acp_server.updates import Update
    from kernel.store.session import Session


class Shows(Protocol):
    """What the approver needs of its session's sink (acp_server/sink.py): the handle once
    bound, its translator, the sender, and updates shown from the run's thread in log order."""

    handle: Handle | None
    translator: Translator | None
    sender: Sender

    def from_run(self, updates: Callable[[Translator], list[Update]]) -> None: ...


AUTO: ModeId = "auto"
ASK: ModeId = "ask"
MODES = (
    SessionMode(
        id=AUTO,
        name="Run without asking",
        description="Writes, edits, commands and MCP calls run as jmp chooses them (as the CLI).",
    ),
    SessionMode(
        id=ASK,
        name="Ask before changes",
        description="Each write, edit, command and MCP call waits for your answer first: allow "
        "once, always for this session, or reject.",
    ),
)
ALLOW, ALWAYS, REJECT = "allow", "always", "reject"
CANCELLED_REQUEST = -32800  # the schema's "request cancelled": our waiting request is over
WAIT_POLL_S = 0.25
CANCEL_GRACE_S = 10.0  # after a cancel, how long a client has to answer `cancelled` itself


def state(current: ModeId) -> SessionModeState:
    return SessionModeState(current_mode_id=current, available_modes=list(MODES))


CONFIG_ID = "mode"  # the one session config option: the mode, kept equal to `modes`


ConfigOptions = list[SessionConfigOptionSelect | SessionConfigOptionBoolean]


def config_options(current: ModeId) -> ConfigOptions:
    """The session's config options (ACP "Session Config Options"): the mode as a `select` of
    category `mode`, the same two modes as `modes` (clients that know config options use these,
    the others `modes`; both always say the same)."""
    options: ConfigOptions = [
        SessionConfigOptionSelect(
            id=CONFIG_ID,
            name="Mode",
            description="Whether writes, edits, commands and MCP calls wait for your answer",
            category="mode",
            type="select",
            current_value=current,
            options=[
                SessionConfigSelectOption(value=m.id, name=m.name, description=m.description)
                for m in MODES
            ],
        )
    ]
    return options


def changed(current: ModeId) -> list[CurrentModeUpdate | ConfigOptionUpdate]:
    """The updates that tell a client the mode changed, in both of ACP's ways."""
    return [
        update_current_mode(current),
        ConfigOptionUpdate(
            session_update="config_option_update", config_options=list(config_options(current))
        ),
    ]


def check_option(config_id: str, value: object) -> ModeId:
    """The mode a `session/set_config_option` asks for; invalid params for anything else."""
    if config_id != CONFIG_ID:
        reason = f"no config option {config_id!r}: jmp has {CONFIG_ID!r}"
        raise RequestError(INVALID_PARAMS, reason, {"errorClass": "UsageError"})
    if not isinstance(value, str):
        reason = f"config option {CONFIG_ID!r} is a select: its value is a mode id, not {value!r}"
        raise RequestError(INVALID_PARAMS, reason, {"errorClass": "UsageError"})
    return check(value)


def check(mode_id: str) -> ModeId:
    if mode_id == AUTO:
        return AUTO
    if mode_id == ASK:
        return ASK
    known = ", ".join(m.id for m in MODES)
    reason = f"no mode {mode_id!r}: jmp has {known}"
    raise RequestError(INVALID_PARAMS, reason, {"errorClass": "UsageError"})


def options(tool: str) -> list[PermissionOption]:
    return [
        PermissionOption(option_id=ALLOW, name="Allow once", kind="allow_once"),
        PermissionOption(
            option_id=ALWAYS, name=f"Always allow {tool} in this session", kind="allow_always"
        ),
        PermissionOption(option_id=REJECT, name="Reject (jmp is told)", kind="reject_once"),
    ]


class Approver:
    """A session's mode and its "always" answers, and the hook that asks (module doc)."""

    def __init__(self, sink: Shows) -> None:
        self.sink = sink
        self.mode: ModeId = AUTO
        self.always: set[str] = set()

    def load(self, session: Session) -> None:
        """The mode and the "always" answers its log recorded (a session opened again; see
        acp_server/remembered.py for how a long log is read)."""
        from acp_server.remembered import recall

        self.mode, self.always = recall(session, self.mode)

    def __call__(self, call: ProposedCall) -> Approval | None:
        if self.mode != ASK:
            return None  # nothing asked, nothing recorded: as without a hook
        if call.tool in self.always:
            return Approval("allowed", scope="session", asked=False)
        sink, handle = self.sink, self.sink.handle
        if handle is None or sink.translator is None:
            return Approval("rejected")
        sink.from_run(lambda t: t.asking(call.call_id, call.tool, call.target, call.arguments))
        answer = self._ask(call)
        if answer == ALWAYS:
            self.always.add(call.tool)
            return Approval("allowed", scope="session")
        if answer == ALLOW:
            return Approval("allowed")
        return Approval("cancelled" if answer is None else "rejected")

    def _ask(self, call: ProposedCall) -> str | None:
        """The option chosen; None when the turn was cancelled or the client is gone."""
        sender, handle = self.sink.sender, self.sink.handle
        loop, client = sender.loop, sender.client
        if loop is None or client is None or handle is None:
            return None
        workspace = handle.session.workspace
        shown = proposed(call.call_id, call.tool, call.target, call.arguments, workspace)
        request = ToolCallUpdate(
            tool_call_id=call.call_id,
            title=title(call.tool, call.target, workspace),
            kind=tool_kind(call.tool),
            status="pending",
            content=shown.content,
            locations=shown.locations,
        )
        coroutine = client.request_permission(
            session_id=handle.id, tool_call=request, options=options(call.tool)
        )
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
        cancelled_at: float | None = None
        while True:
            try:
                reply = future.result(timeout=WAIT_POLL_S)
            except concurrent.futures.TimeoutError:
                if handle.agent.cancel.is_set():
                    cancelled_at = cancelled_at or time.monotonic()
                    if time.monotonic() - cancelled_at > CANCEL_GRACE_S:
                        future.cancel()
                        return None
                continue
            except RequestError as exc:
                # Ours at shutdown (the request is over), or a client that cannot ask: the safe
                # answer is that nothing runs.
                return None if exc.code == CANCELLED_REQUEST else REJECT
            except (ConnectionError, concurrent.futures.CancelledError, RuntimeError):
                return None
            outcome = reply.outcome
            if isinstance(outcome, AllowedOutcome) and outcome.option_id in (ALLOW, ALWAYS):
                return str(outcome.option_id)
            return REJECT if isinstance(outcome, AllowedOutcome) else None
