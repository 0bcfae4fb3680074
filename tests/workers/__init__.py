"""Tests of `workers/`."""
