"""jmp's lab: what a user runs to see jmp work and to test it, with no model keys.

`servers/` are loopback stand-ins speaking the real wire protocols (Jev, Flash, a web site, a
Camofox REST server, a stdio MCP server); `demo.py` is `jmp-demo` (`make demo`); `chaos/` is
`jmp-chaos` (`make chaos`), the kill -9 / power-cut runner, with its FUSE disk in
`chaos/powercut/`. Installed with jmp (the wheel ships no `tests` package); the kernel and the
workers never import it.
"""
