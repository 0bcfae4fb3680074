"""Tests of `protocol/`."""
