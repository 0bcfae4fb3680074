"""The `jev-harness` command line (docs/HARNESS.md section 6): `main` runs check-task, run and
inspect; `output` prints them; `check_launch` starts the check-task probe, decides whether it
is confined and builds the verdict from its strictly decoded finding; `options` holds the run
options that this CLI and the MCP server both take.

A front end: it drives kernel objects (imported lazily) and is never imported by the harness
worker or by a task script.
"""
