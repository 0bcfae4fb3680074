"""Worker processes: router (Jev), generator (Flash), tool (OpenHands executors and MCP).

Vendor SDKs are imported only here, each in its own subprocess.

The one import-time effect, on purpose: `python -m workers.<kind>` runs this first, so every
worker turns non-dumpable (PR_SET_DUMPABLE 0) before it imports anything or reads a key. A
model worker holds its key in its environment, the tool worker the MCP secrets in memory: no
same-user process (a shell the model started among them) may read /proc/PID/environ or mem of
them. Dumpability resets on exec, so the shells the tool worker starts stay ordinary processes.
"""

from protocol.inspection import forbid_inspection as _forbid_inspection

_forbid_inspection()
