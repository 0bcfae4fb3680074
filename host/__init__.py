"""What jmp's processes do with their host, shared by the kernel, the workers and the front
ends (none of which may import another's code): how jmp starts a Python process of its own
(`spawn`), where the warm pool lives and what it runs with (`pool`), the confinement view a
process runs in (`confinement`), turning non-dumpable (`inspection`), and opening its own files
without following a planted link (`own_files`).

The second shared leaf beside `protocol/` (pure types and codecs): it imports the stdlib,
`protocol/` and itself, nothing else (tests/test_import_graph.py).
"""
