"""The rules about one record, run over a whole batch: :class:`Problems` holds, for each
check of a family's rule in order, the mask of the records it finds invalid, and either
refuses the batch at the first (``--invalid-records refuse``) or marks them to be dropped
(``drop``; what happens to them: :mod:`continual_synth.transforms.invalid_records`).
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional

import numpy as np

from continual_synth.mechanisms.errors import InputError

__all__ = ["MODES", "check_mode", "Problems"]

#: ``--invalid-records``: refuse a batch at its first invalid record, or drop each one
#: (:mod:`continual_synth.transforms.invalid_records`)
REFUSE, DROP = "refuse", "drop"
MODES = (REFUSE, DROP)


def check_mode(mode: str) -> str:
    """``mode`` if it is one of :data:`MODES`; else a clear error."""
    if mode not in MODES:
        raise InputError(f"--invalid-records {mode!r}: choose refuse or drop")
    return mode


class Problems:
    """The invalid records of one batch of ``num_rows`` records, as a family's rule finds
    them.  Each check adds the mask of the records it finds invalid, the message that
    refuses the first of them (naming the file, column and row) and the reason a dropped
    one is listed with.  In refuse mode the first check that finds one raises its
    message at once, as the checks always did."""

    def __init__(self, num_rows: int, mode: str = REFUSE):
        self.mode = mode
        self.invalid = np.zeros(int(num_rows), dtype=bool)
        self._checks: List = []

    def add(self, mask, message: Callable[[int], str],
            reason: Optional[Callable[[int], str]] = None) -> None:
        """Record the rows ``mask`` (bool per row) finds invalid: ``message(row)`` refuses
        the batch at the first of them, ``reason(row)`` (default: the message) says why
        one is dropped."""
        mask = np.asarray(mask, dtype=bool)
        if not mask.any():
            return
        if self.mode == REFUSE:
            raise InputError(message(int(np.flatnonzero(mask)[0])))
        self._checks.append((mask, reason or message))
        self.invalid |= mask

    def any(self) -> bool:
        return bool(self.invalid.any())

    def reasons(self) -> List[str]:
        """Why each invalid row (in row order) is dropped: the first check that found it."""
        out = []
        for row in np.flatnonzero(self.invalid):
            mask, reason = next(check for check in self._checks if check[0][row])
            out.append(reason(int(row)))
        return out

    def entries(self, table, where: str, first_row: int) -> List[Dict]:
        """The dead letter's entries of the invalid rows of ``table`` (the records of file
        ``where`` from its record ``first_row`` on): file, row (from 1), reason, values."""
        rows = np.flatnonzero(self.invalid)
        if rows.size == 0:
            return []
        records = table.take(rows).to_pylist()
        return [{"file": where, "row": int(row) + int(first_row) + 1, "reason": reason,
                 "record": record}
                for row, reason, record in zip(rows, self.reasons(), records)]
