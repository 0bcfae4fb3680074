"""Worker processes: router (Jev), generator (Flash), tool (OpenHands executors and MCP).

Vendor SDKs are imported only here, each in its own subprocess.
"""
