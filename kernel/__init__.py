"""The jmp kernel: session lock, event log, artifacts, context policy, recall, supervision.

It never imports openhands, openai, typesafe_sdk or mcp: those live in worker processes.
"""
