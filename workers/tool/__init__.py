"""The tool worker (`python -m workers.tool`, in `__main__.py`): OpenHands' file editor and
terminal executors, confined to the workspace, and the MCP tools (`workers/mcp/`).

`binding` binds each built-in tool name to its executor and checks its paths; `shell` runs bash
commands (time limit, output cap, full output); `terminal` starts the terminal; `live_output`
streams a running command's output; `output` turns an executor's observation into a
`ToolResult`; `editor` is the workspace's file editor and its undo history.
"""
