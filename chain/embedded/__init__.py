"""The embedded development chain: a node process over a SQLite state file, and the
``bittensor.Substrate`` the SDK talks to it through (docs/chain.md)."""
