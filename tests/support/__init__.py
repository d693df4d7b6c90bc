"""Helpers shared by test suites (import as ``support.<module>``: pytest puts ``tests/`` on sys.path)."""
