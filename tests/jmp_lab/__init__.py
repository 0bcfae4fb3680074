"""Tests of `jmp_lab/`."""
