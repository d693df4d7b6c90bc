"""Files shared by several dagnet processes (nonce store, validator state, embedded chain)."""

from .sqlite import open_shared

__all__ = ["open_shared"]
