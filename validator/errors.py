"""What can go wrong when the validator asks a peer (a miner or a tool provider): one type per failure.

The signed client (:mod:`validator.client`) never raises these at its callers: it
hands them back in :attr:`~validator.client.Reply.error`, so one bad peer costs only
its own answer. Callers decide by type (``isinstance(err, PeerTimeout)``), never by
the wording; ``str(err)`` is the one-line message records and logs show. Each error
holds its evidence: the peer it came from (``url``, ``hotkey``), the limit it broke
or what the peer sent, and the underlying transport exception as ``__cause__``.
"""

from __future__ import annotations

from typing import Self


class PeerError(Exception):
    """One request to one peer failed. ``retryable``: a fresh request may succeed
    (the time was not spent waiting)."""

    retryable = False
    ours = False
    """The validator caused it (its own standing on the chain, its own request), not the
    peer: an outcome charged to no one (docs/scoring.md)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.url: str | None = None
        self.hotkey: str | None = None

    def of_peer(self, url: str | None, hotkey: str | None) -> Self:
        """This error, attributed to the peer at ``url`` with ``hotkey``."""
        self.url, self.hotkey = url, hotkey
        return self


class PeerTimeout(PeerError):
    """The peer did not answer in time; ``limit_s`` is the time it had, when the
    whole request ran out (else ``detail`` says which phase did)."""

    def __init__(self, limit_s: float | None, detail: str | None = None) -> None:
        super().__init__(f"timeout after {limit_s:g}s" if detail is None else f"timeout: {detail}")
        self.limit_s = limit_s


class PeerRefused(PeerError):
    """No connection to the peer: refused, unreachable, or not made within the connect timeout."""

    retryable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"connect error: {detail}")


class PeerClosed(PeerError):
    """The connection broke before a whole answer arrived (often a keep-alive race)."""

    retryable = True

    def __init__(self, detail: str) -> None:
        super().__init__(f"connection closed: {detail}")


class PeerOversize(PeerError):
    """The answer is over ``limit_bytes``; ``declared`` is its ``Content-Length`` when
    that gave it away before a byte of the body was read."""

    def __init__(self, limit_bytes: int, declared: int | None = None) -> None:
        suffix = f" (content-length {declared})" if declared is not None else ""
        super().__init__(f"response over {limit_bytes} bytes{suffix}")
        self.limit_bytes, self.declared = limit_bytes, declared


class PeerBadEncoding(PeerError):
    """The answer declares a ``Content-Encoding`` the client did not ask for; its body
    is never read."""

    def __init__(self, encoding: str) -> None:
        super().__init__(f"unrequested content-encoding {encoding}")
        self.encoding = encoding


CALLER_REFUSALS = frozenset({"no_validator_permit", "unregistered"})
"""The reasons (``reason``) of a miner's 403 that are about the caller's standing on the chain:
the validator has no permit yet, or the miner cannot yet see it on its metagraph."""


class PeerBadStatus(PeerError):
    """The peer answered a status outside 2xx (a 401 when it rejects the signature);
    ``excerpt`` is the start of its body, ``reason`` the refusal's short code when the
    body is dagnet's error JSON. A 5xx is worth another request."""

    def __init__(self, status: int, excerpt: str, reason: str | None = None) -> None:
        super().__init__(f"http {status}: {excerpt}")
        self.status, self.excerpt, self.reason = status, excerpt, reason

    @property
    def retryable(self) -> bool:  # type: ignore[override]
        return self.status >= 500

    @property
    def ours(self) -> bool:  # type: ignore[override]
        return self.status == 403 and self.reason in CALLER_REFUSALS


class PeerBadPayload(PeerError):
    """The answer arrived whole but is not what was asked for: ``evidence`` says where
    it breaks the schema (or that it is not JSON)."""

    def __init__(self, what: str, evidence: str) -> None:
        super().__init__(f"malformed {what}: {evidence}")
        self.evidence = evidence


class PeerTransportError(PeerError):
    """Any other transport failure (a malformed URL, an OS error)."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"transport error: {detail}")


class RequestOversize(PeerError):
    """Ours, not the peer's: the request body is over ``limit_bytes`` and was not sent."""

    def __init__(self, size: int, limit_bytes: int) -> None:
        super().__init__(f"request body of {size} bytes over the {limit_bytes}-byte limit; not sent")
        self.ours = True
        self.size, self.limit_bytes = size, limit_bytes
