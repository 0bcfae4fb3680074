"""The command line: parse, talk to the kernel, print."""
