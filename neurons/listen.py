"""Binding a server's listening socket, so a port in use is an error that names the port.

Every dagnet server (miner, validator) binds its socket here before it starts
anything else, and its command turns :class:`PortInUse` into
``error: port N is in use (--port)`` with exit 2, before any file is written.
"""

from __future__ import annotations

import errno
import socket


class PortInUse(OSError):
    """Another process listens on ``port`` (``host`` as given)."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} is in use")
        self.host = host
        self.port = port


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (``port`` 0 picks a free one), not yet listening,
    inheritable by worker processes. Raises :class:`PortInUse`, or ``OSError`` for any
    other reason the address cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUse(host, port) from None
        raise
    sock.set_inheritable(True)
    return sock
