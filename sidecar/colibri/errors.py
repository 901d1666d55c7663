"""Errors the command line reports as one clear line instead of a traceback."""
from __future__ import annotations


class ColiError(Exception):
    """A failure with a message meant for the user."""

    exit_code = 1


class EngineError(ColiError):
    """The C engine refused: `code` is its stable name (e.g. "truncated", "corrupt")."""

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}" if not message.startswith(code) else message)
        self.code = code
        self.message = message


class ModelNotFound(ColiError):
    exit_code = 2
