"""The kernel side of jev-harness: selection policy, paging, the run loop (docs/HARNESS.md 3).

Vendor-free like the rest of the kernel: the task script lives in the harness worker
(`workers/harness/__main__.py`), decisions go to Jev through the router worker.
"""
