"""Each decision as one Jev `choice` question, judged by the policy and recorded first.

The tool question has id `tool`; a parameter question `<tool>.<parameter>`, with a page
question `<tool>.<parameter>.page` before it when the domain does not fit one request. A single
tool or a single option is chosen in code (method `single_option`, no Jev call). Questions go
through the session's router slot (kernel/supervision/router.py), as the agent loop's do: a
router found dead is replaced, a question lost to a death is sent once more, and an answer that
breaks the API's rules ends the run `error` before any policy sees it. A refusal ends the run:
below the threshold `needs_input`, an inconsistent answer `error`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from kernel.harness.paging import RequestTooLarge, page_options, pages, size
from kernel.harness.policy import Decision, by_caller, decide, single_option
from kernel.run.ledger import RunEnded
from kernel.supervision.router import Router
from kernel.supervision.supervisor import Cancelled, WorkerFailed
from protocol.events import ParameterData, RouteData
from protocol.harness import OptionSpec, ParameterSpec, ToolInfo
from protocol.messages import Routed

TOOL_INSTRUCTIONS = (
    "Choose the tool whose operation best advances the goal in `state.goal`, given the "
    "captures, records and limits in `state`. Each option is one tool that is offered now."
)
PAGE_INSTRUCTIONS = (
    "The options for {question} are split into pages. Choose the page most likely to hold the "
    "option that best advances the goal in `state.goal`."
)


def parameter_instructions(tool: ToolInfo, parameter: ParameterSpec) -> str:
    return (
        f"Choose the `{parameter.name}` for the tool `{tool.name}` ({tool.description}). "
        f"{parameter.description} Pick the option that best advances the goal in `state.goal`."
    )


class Decider:
    """Puts questions to Jev (or takes them in code) and writes route/parameter records."""

    def __init__(
        self,
        session: Any,
        router: Router | None,
        remaining: Callable[[], float],
        cancel: threading.Event,
    ) -> None:
        self.session, self.router, self.remaining, self.cancel = session, router, remaining, cancel

    def tool(self, offered: list[ToolInfo], selection: str, state: str) -> ToolInfo:
        """The next tool: single offer in code, else Jev's accepted choice."""
        by_name = {t.name: t for t in offered}
        if len(offered) == 1:
            decision, routed, used = single_option(offered[0].name, selection), None, 0
        else:
            options = [OptionSpec(id=t.name, description=t.description) for t in offered]
            if len(pages(options, size(state) + size(TOOL_INSTRUCTIONS))) > 1:
                raise RequestTooLarge(  # tools are not paged: the offer itself is too large
                    f"the tool question ({len(options)} tools) does not fit one request"
                )
            decision, routed, used = self._ask("tool", TOOL_INSTRUCTIONS, options, selection, state)
        self.record_tool(decision, list(by_name), routed, used)
        self._refuse_unless_accepted(decision, "tool")
        return by_name[decision.choice]

    def parameter(
        self, tool: ToolInfo, parameter: ParameterSpec, options: list[OptionSpec], state: str
    ) -> str:
        """The option id for one parameter, paging the domain when it does not fit."""
        question = f"{tool.name}.{parameter.name}"
        instructions = parameter_instructions(tool, parameter)
        domain = len(options)
        if len(options) > 1:
            chunks = pages(options, size(state) + size(instructions))
            if len(chunks) > 1:
                page = self._page(tool, parameter, chunks, state, domain)
                options = chunks[page]
        if len(options) == 1:
            decision, routed, used = single_option(options[0].id, parameter.selection), None, 0
        else:
            decision, routed, used = self._ask(
                question, instructions, options, parameter.selection, state
            )
        self.record_parameter(
            tool.name, parameter.name, question, decision, routed, used, len(options), domain
        )
        self._refuse_unless_accepted(decision, question)
        return decision.choice

    def _page(
        self,
        tool: ToolInfo,
        parameter: ParameterSpec,
        chunks: list[list[OptionSpec]],
        state: str,
        domain: int,
    ) -> int:
        question = f"{tool.name}.{parameter.name}.page"
        instructions = PAGE_INSTRUCTIONS.format(question=f"{tool.name}.{parameter.name}")
        options = page_options(chunks)
        decision, routed, used = self._ask(question, instructions, options, "explore", state)
        self.record_parameter(
            tool.name, parameter.name, question, decision, routed, used, len(options), domain
        )
        self._refuse_unless_accepted(decision, question)
        return int(decision.choice.removeprefix("page")) - 1

    def _ask(
        self,
        question: str,
        instructions: str,
        options: list[OptionSpec],
        selection: str,
        state: str,
    ) -> tuple[Decision, Routed, int]:
        if self.router is None:
            raise RunEnded("error", "no router: this session was opened direct-only")
        left = self.remaining()
        if left <= 0:
            raise RunEnded("blocked", "timeout before the next decision")
        used = (
            size(state)
            + size(instructions)
            + sum(size(o.id) + size(o.description) for o in options)
        )
        offered = {o.id: o.description for o in options}
        try:
            routed = self.router.ask(
                "route", question, instructions, offered, state, self.cancel, timeout_s=left
            )
        except Cancelled:
            raise RunEnded("cancelled", f"cancelled while Jev decided {question}") from None
        except WorkerFailed as exc:
            if exc.code == "timeout":
                raise RunEnded("blocked", f"timeout while Jev decided {question}") from None
            if exc.code == "invalid_answer":  # the API's rules (kernel/supervision/jev_answer)
                why = f"Jev's answer to {question} was refused: {exc.detail}"
                raise RunEnded("error", why) from exc
            raise
        labels = [o.id for o in options]
        return decide(selection, labels, routed.choice, routed.probabilities), routed, used

    def _refuse_unless_accepted(self, decision: Decision, question: str) -> None:
        if decision.accepted:
            return
        if decision.reason == "inconsistent":
            raise RunEnded(
                "error",
                f"Jev's answer to {question} was inconsistent: choice {decision.choice!r} is not "
                f"the most probable of the offered options ({decision.describe()})",
            )
        raise RunEnded(
            "needs_input",
            f"{question}: no option reached the {decision.selection} threshold (top "
            f"{decision.top:.2f}, margin {decision.margin:.2f}); top options: "
            f"{decision.describe()}",
        )

    # --- records ----------------------------------------------------------------

    def record_tool(
        self, decision: Decision, offered: list[str], routed: Routed | None, used: int
    ) -> None:
        self.session.append(
            RouteData(
                choice=decision.choice,
                confidence=routed.confidence if routed else 1.0,
                context_bytes=used,
                probabilities=dict(routed.probabilities) if routed else decision.probabilities,
                offered=offered,
                floor=_floor(decision.selection),
                model=routed.usage.model if routed else "",
                question="tool",
                selection=decision.selection,
                top=decision.top,
                margin=decision.margin,
                accepted=decision.accepted,
                method=decision.method,
            )
        )

    def record_parameter(
        self,
        tool: str,
        parameter: str,
        question: str,
        decision: Decision,
        routed: Routed | None,
        used: int,
        offered: int,
        domain: int,
    ) -> None:
        self.session.append(
            ParameterData(
                tool=tool,
                parameter=parameter,
                question=question,
                choice=decision.choice,
                selection=decision.selection,
                accepted=decision.accepted,
                method=decision.method,
                probabilities=decision.probabilities,
                top=decision.top,
                margin=decision.margin,
                confidence=routed.confidence if routed else None,
                offered=offered,
                domain=domain,
                context_bytes=used,
                model=routed.usage.model if routed else "",
            )
        )

    def caller_tool(self, tool: str, offered: list[str], selection: str) -> None:
        """A direct caller's tool choice, recorded with method `caller`."""
        self.record_tool(by_caller(tool, selection), offered, None, 0)

    def caller_parameter(
        self, tool: str, parameter: str, choice: str, selection: str, domain: int
    ) -> None:
        decision = by_caller(choice, selection)
        question = f"{tool}.{parameter}"
        self.record_parameter(tool, parameter, question, decision, None, 0, domain, domain)


def _floor(selection: str) -> float:
    from kernel.harness.policy import THRESHOLDS

    return THRESHOLDS.get(selection, (0.0, 0.0))[0]
