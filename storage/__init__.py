"""Files shared by several dagnet processes (nonce store, validator state, embedded chain)."""

from .home import dagnet_home
from .sqlite import make_private, open_shared

__all__ = ["dagnet_home", "make_private", "open_shared"]
