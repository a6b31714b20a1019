"""``init --exists-ok`` of every family: create a state, or keep the one already there
if it was made with the same settings (a state made with others is refused, naming them)."""
from __future__ import annotations

from typing import Callable

from continual_synth.mechanisms.errors import StateError
from continual_synth.pipelines.release.lifecycle import StateDir, check_same_settings

__all__ = ["initialise", "kept_state"]


def _holds_same_state(state_dir: str, document: dict, canonical=None) -> bool:
    """Whether ``state_dir`` holds a state (False: none yet) made by ``init`` with the
    settings of ``document`` (the state document this ``init`` would create), however many
    steps it has taken since; a state made with other settings is a :class:`StateError`
    naming them (``init --exists-ok`` of every family; :func:`lifecycle.check_same_settings`)."""
    store = StateDir(state_dir)
    if not store.exists():
        return False
    check_same_settings(state_dir, store.read(document["kind"])[1], document, canonical)
    return True


def initialise(exists_ok: bool, state_dir: str, document: dict, init: Callable[[], None],
               canonical=None) -> bool:
    """``init`` (which creates ``state_dir`` holding ``document``), or, with
    ``exists_ok``, keep a state already there made with the same settings: True if kept.
    Two ``init --exists-ok`` started together with the same options both succeed: the
    one whose exclusive create loses finds the winner's state and keeps it."""
    if exists_ok and _holds_same_state(state_dir, document, canonical):
        return True
    try:
        init()
    except StateError:
        if exists_ok and _holds_same_state(state_dir, document, canonical):
            return True  # another init created it meanwhile, with these settings
        raise
    return False


def kept_state(state_dir: str) -> dict:
    """The summary of ``init --exists-ok`` on a state it keeps."""
    return {"status": "kept", "state": state_dir,
            "message": "the state exists with these options; kept as it is"}
