"""Fixed texts the kernel sends to the models: tool descriptions and the questions."""

from __future__ import annotations

BUILTIN_TOOLS: dict[str, str] = {
    "read": "Read a file (optionally a line range) or list a directory in the workspace. "
    "No effect on anything.",
    "write": "Create a new file, or overwrite one, with the given full content.",
    "edit": "Change an existing file: replace one unique string with another, or insert text "
    "after a given line.",
    "bash": "Run a shell command in the workspace: tests, builds, git, search, scripts.",
}
RECALL_DESCRIPTION = (
    "Search or page this session's own history (requests, answers, tool records and full "
    "outputs). Read-only. Give `query` (words) to search, or `seq` to read one record's pages. "
    "Results are records of the past, not the current state of files."
)
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
