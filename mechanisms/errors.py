"""Errors that the jobs turn into clear messages."""


class InputError(ValueError):
    """Bad input: the message says what is wrong and where.  Nothing has been written."""


class StateError(RuntimeError):
    """A state directory that is missing, mismatched or asked for an impossible step."""
