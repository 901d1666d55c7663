"""Network checks the end-to-end tests share."""
from __future__ import annotations

import socket


def refused(host: str, port: int) -> bool:
    """True when nothing listens at host:port any more (a stopped server)."""
    try:
        socket.create_connection((host, port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    except OSError:
        return False
    return False
