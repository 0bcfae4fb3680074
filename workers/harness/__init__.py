"""The harness worker (`python -m workers.harness`, in `__main__.py`): holds one jev-harness
task and answers the kernel through the task's driver API; `script` loads the task script by
its sha256 and shapes tool and receipt messages."""
