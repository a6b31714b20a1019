"""The ``continual-synth bounded`` commands (PrivHP, Holland et al. 2025).

Wired into :mod:`continual_synth.pipelines.cli` through :func:`add_commands`
(register sub-commands) and :func:`dispatch` (run one; None when the parsed
command belongs to another family).
"""
from __future__ import annotations

from typing import List, Optional


def add_commands(commands, evaluate) -> None:
    """Add this family's sub-commands to ``commands`` and ``evaluate``'s sub-parsers."""


def dispatch(args, beam_args: List[str]) -> Optional[dict]:
    """Run the parsed command if it is ours; otherwise return None."""
    return None
