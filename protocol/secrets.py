"""The redaction vocabulary shared by the kernel, the workers and jev_harness: pure data.

Which environment variables hold credentials, which token formats are redacted wherever they
appear, and the one marker that replaces them. The kernel's `Redactor`
(kernel/store/redact.py) and jev_harness (inside the harness worker, which must not import the
kernel) both read these, so a new key variable or token format is added here once.
"""

from __future__ import annotations

REDACTED = "[REDACTED]"
MIN_SECRET_CHARS = 6  # shorter values would redact ordinary words and numbers

# Every variable whose value is a credential: a secret whenever it is set, used or not
# (DEEPSEEK_API_KEY stays one when FLASH_API_KEY wins). None of them reaches the tool worker.
KEY_VARIABLES = ("TYPESAFE_API_KEY", "FLASH_API_KEY", "DEEPSEEK_API_KEY", "CAMOFOX_ACCESS_KEY")

# Variables of the kernel's own that no worker's environment carries: the kernel pid (a shell
# would find the kernel's environment through it) and the legacy MCP-config variable; and
# none inherited as the kernel-pidfd number, which only a cold spawn sets (host/spawn.py).
KERNEL_ONLY_VARIABLES = ("JMP_KERNEL_PID", "JMP_MCP_SERVERS", "JMP_KERNEL_PIDFD")

# Formats no prose or code contains by accident. Kept short on purpose: a broad pattern would
# eat hashes, ids and file contents the agent needs to see verbatim.
TOKEN_PATTERNS = (
    r"sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}",  # OpenAI, DeepSeek, Anthropic style keys
    r"gh[pousr]_[A-Za-z0-9]{30,}",  # GitHub tokens
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"xox[abposr]-[A-Za-z0-9-]{10,}",  # Slack tokens
    r"AKIA[0-9A-Z]{16}",  # AWS access key ids
    r"(?<=[Bb]earer )[A-Za-z0-9._~+/=-]{20,}",  # the token only: "Bearer" stays readable
)
