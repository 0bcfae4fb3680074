"""jmp as an Agent Client Protocol agent on stdin/stdout (`jmp --acp`): a front end beside cli/.

Built on the ACP Python SDK (`acp`); the kernel never imports it.
"""
