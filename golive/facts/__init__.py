"""Parsers of real command output and files. Pure functions: text in, typed facts out; no host access here."""


class FactError(Exception):
    """Output that does not have the shape the parser knows; the message says what was seen."""
