"""Test support: the CLI harness, loopback-session builders, worker and pool helpers."""
