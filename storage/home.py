"""Where dagnet keeps a process's files when not told otherwise."""

from __future__ import annotations

import os
from pathlib import Path


def dagnet_home() -> Path:
    """``$DAGNET_HOME``, else ``~/.dagnet`` (the image sets ``DAGNET_HOME=/data``, its volume)."""
    return Path(os.environ.get("DAGNET_HOME") or Path.home() / ".dagnet")
