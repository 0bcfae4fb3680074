"""Fixed texts the kernel sends to the models: the instructions and the questions.

Tool descriptions live in protocol/catalog.py.
"""

from __future__ import annotations

from protocol import catalog

INSTRUCTIONS = """\
You are jmp, a careful local coding agent working in the user's workspace.
Work step by step with the tools offered: read files before editing them, make the smallest
change that does what the user asked, and run the project's own commands to check your work.
Facts come only from tool results in this session; earlier answers are conversation, not
evidence. A call whose outcome is uncertain (interrupted) was not re-run: check its effect
before relying on it. Never invent tool output. When the request is done, or when you need
the user, say so plainly. Paths are relative to the workspace unless absolute inside it."""


def instructions() -> str:
    """The system instructions given to both models."""
    return INSTRUCTIONS


BUILTIN_TOOLS: dict[str, str] = {t.name: t.description for t in catalog.WORKER_TOOLS}
RECALL_DESCRIPTION = catalog.RECALL.description
ASK_DESCRIPTION = "Ask the user a question, because the request is ambiguous or needs a decision."
DONE_DESCRIPTION = "The user's current request is fully handled: write the final answer."

ROUTE_QUESTION = (
    "Which single next step should the coding agent take toward the user's CURRENT REQUEST, "
    "given the session state? Pick the tool to use next."
)
REVIEW_QUESTION = (
    "The agent proposes that the user's CURRENT REQUEST is complete. Judged only from the "
    "evidence in the session state, is it complete, does work remain, or is it blocked?"
)
REVIEW_OPTIONS: dict[str, str] = {
    "complete": "Everything the current request asked for is done and verified where it can be.",
    "work_remains": "Some of the current request is not done or not yet verified.",
    "blocked": "The request cannot go on without the user (missing access, a decision, a fact).",
}

GENERATE_TASK = (
    "The router chose the tool `{tool}` as the next step. Call `selected_action` with its "
    "arguments for that step (and only that step). Paths are relative to the workspace."
)
RESPOND_TASK = (
    "Write the final answer to the user's CURRENT REQUEST: what was done and what the tool "
    "results showed, and anything left open. Quote facts only from tool results."
)
ASK_TASK = (
    "You need the user before going on. Write one short, concrete question that lets the work "
    "continue, and nothing else."
)


def route_options(mcp: dict[str, str]) -> dict[str, str]:
    """The route question's options: built-in tools, MCP tools, recall, ask, then done."""
    return {
        **BUILTIN_TOOLS,
        **mcp,
        "recall": RECALL_DESCRIPTION,
        "ask": ASK_DESCRIPTION,
        "done": DONE_DESCRIPTION,
    }


def reserved_bytes(question: str, options: dict[str, str]) -> int:
    """What a Jev request's question and options take from the router's budget."""
    return len((question + "".join(k + v for k, v in options.items())).encode())
