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


# ---- what the serving core refuses (no HTTP here: api/errors.py maps each kind to a status) ----

class RequestError(ColiError):
    """A request the serving core refuses or cannot finish: `code` is the stable name clients
    see, `param` the field it names (when one is to blame)."""

    def __init__(self, code: str, message: str, *, param: str | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.param = param


class InvalidRequest(RequestError):
    """The request asks for something this model or server cannot do as asked."""


class ContextExceeded(InvalidRequest):
    def __init__(self, n_prompt: int, n_ctx: int, param: str):
        super().__init__("context_length_exceeded",
                         f"This model's maximum context length is {n_ctx} tokens, however your {param} resulted in "
                         f"{n_prompt} tokens, which leaves no room to generate. Please shorten the {param}.",
                         param=param)


class Overloaded(RequestError):
    """Every slot is taken for now; worth retrying after `retry_after_s`."""

    retry_after_s = 1


class Unavailable(RequestError):
    """The server is shutting down (or the engine stopped the work)."""


class ModelFileChanged(Unavailable):
    """The model file shrank or could not be read while serving (a re-download over it, a drive that
    dropped): the engine lives on but refuses every generation until the server is restarted on a
    whole file."""

    def __init__(self, message: str):
        super().__init__("model_file_changed", message)


class EngineFailed(RequestError):
    """The engine failed the request: a server fault, not the client's."""


class ModelOutputRefused(RequestError):
    """The model answered, but not in a form the request allows (a strict tool call that cannot run)."""


class NotSupported(RequestError):
    """What the backend serving this server cannot do (an upstream engine without prompt log-probs)."""


class UpstreamFailed(EngineFailed):
    """The upstream engine behind `coli serve --upstream` failed the request, or could not be reached;
    `status` is the HTTP status the edge answers with (the upstream's own 4xx, else 502)."""

    def __init__(self, code: str, message: str, status: int = 502, *, param: str | None = None):
        super().__init__(code, message, param=param)
        self.status = status
