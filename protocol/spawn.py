"""The spawn contract: names both the kernel and its workers read.

Pure data. The kernel sets these when it starts a worker (kernel/supervision/), the worker reads
them (workers/); neither side spells the names itself.
"""

from __future__ import annotations

# Every process of a worker's tree carries this token: the kernel finds and kills the whole tree
# by it, and an MCP server the tool worker starts inherits it.
TOKEN_ENV = "JMP_WORKER_TOKEN"
