"""Tests of `kernel/`."""
