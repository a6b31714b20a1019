"""Errors that the jobs turn into clear messages."""


class InputError(ValueError):
    """Bad input: the message says what is wrong and where.  Nothing has been written."""


class StateError(RuntimeError):
    """A state directory that is missing, mismatched or asked for an impossible step."""


def check_next_period(period: int, last_seen: int, horizon: int) -> None:
    """Refuse a period beyond the horizon or out of order (both synthesizers' contract)."""
    if period > horizon:
        raise ValueError(f"period {period} is beyond the horizon T={horizon}")
    if period != last_seen + 1:
        raise ValueError(f"period {period} is out of order: the state has seen periods "
                         f"1..{last_seen}, so the next period is {last_seen + 1}")
