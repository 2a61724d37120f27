"""Parsers of real command output and files. Pure functions: text in, typed facts out; no host access here."""


class FactError(Exception):
    """A fact the station cannot give: output of an unknown shape, a missing file or command. The message says what
    was seen; `fix`, where the cause is known, says what to do (a missing prestart script: install it). `cause` names
    the root cause when several facts fail for one (every nvidia-smi query on a station without nvidia-smi): the first
    check that meets it fails, the others are not checked because of it (golive.run.outcomes)."""

    def __init__(self, message: str, fix: str | None = None, cause: str | None = None):
        super().__init__(message)
        self.fix = fix
        self.cause = cause or message
