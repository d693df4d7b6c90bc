"""Files shared by several dagnet processes (nonce store, validator state, embedded chain)."""

from .sqlite import make_private, open_shared

__all__ = ["make_private", "open_shared"]
