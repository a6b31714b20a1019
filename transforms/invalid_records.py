"""Invalid records: one rule per synthesizer family finds them, the mode says what happens.

A family's rule (the panels' :func:`~continual_synth.transforms.validate.validate_panel_batch`,
the tabular :func:`~continual_synth.transforms.tabular.encode_stream_batch`, the points'
:func:`~continual_synth.transforms.privhp.read_point_batches`) runs its checks in order over
a whole batch, each giving a mask of the records it finds invalid (Arrow and numpy masks,
nothing per record but the invalid ones).  What is invalid is what concerns one record: a
value outside the alphabet or domain, an empty id or value, a period out of range or not a
whole number, a point outside the bounds or not finite.  What is not about one record (a
missing column, an unreadable or empty file) is refused in either mode.

* ``refuse`` (:data:`REFUSE`, the default of ``run`` and ``step``): the first check that
  finds an invalid record stops the job with its error, naming the file, column and row;
  nothing is written.
* ``drop`` (:data:`DROP`, a stream's only mode): each invalid record is dropped alone and the
  period is released from the valid ones.  Dropping is a function of each record alone, so
  neighbouring inputs stay neighbours.  The dropped records are counted in the Beam counter
  ``records_rejected`` and, in a ``step`` or a stream, written to the private dead letter
  ``STATE/rejected/dropped-PPPP-<token>.json`` (one document per period: each record's file,
  row, reason and values) with a line per file on stderr; a ``run``, which has no state
  directory, logs them on stderr.  Nothing about them reaches stdout or a manifest.
"""
from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from continual_synth.mechanisms.record_checks import (DROP, MODES, REFUSE,  # noqa: F401
                                                     Problems, check_mode)
from continual_synth.transforms import monitoring, storage

__all__ = ["DEAD_LETTER", "PARTS", "SHOWN_REASONS", "LOGGER", "state_mode", "DropSink",
           "sink_for", "parts_folder", "file_dead_letter"]

#: ``STATE/rejected/``: the dead letter (private: file names, reasons and records)
DEAD_LETTER = "rejected"
#: a step's run folder keeps its workers' parts of the period's dead letter here
PARTS = "dropped"
#: how many reasons a log line shows
SHOWN_REASONS = 3
#: the columns a validated panel batch carries in drop mode, where each record came from
#: (the file's position in the input's list of files, the row counted from 1), for a
#: record a shard drops later (a duplicate, an id new after period 1)
ORIGIN_FILE, ORIGIN_ROW = "origin_file", "origin_row"
LOGGER = logging.getLogger("continual_synth")


def state_mode(state: Dict) -> str:
    """The ``--invalid-records`` a state was made with (a state saved before the option
    existed refuses, as every step did then)."""
    return state.get("invalid_records", REFUSE)


@dataclass(frozen=True)
class DropSink:
    """Where a job's dropped records go.  ``dead_letter``: a step's folder for the parts
    of its period's dead letter (in its private run folder; filed by
    :func:`file_dead_letter` once the step commits), None for a ``run`` (no state
    directory: the records are logged on stderr).  ``command``: whose lines a worker
    prints (:func:`monitoring.command`, read on the driver).  ``on_driver``: counted into
    the command's totals directly (a pass over the input outside any pipeline), not as
    a Beam counter.  ``also_read``: counted as read too, where the job counts the
    records it keeps as read (the points' reader validates as it reads)."""

    dead_letter: Optional[str] = None
    command: Optional[str] = None
    on_driver: bool = False
    also_read: bool = False

    def report(self, entries: List[Dict]) -> None:
        if not entries:
            return
        counts = {monitoring.RECORDS_REJECTED: len(entries)}
        if self.also_read:
            counts[monitoring.RECORDS_READ] = len(entries)
        if self.on_driver:
            from continual_synth.pipelines.release import logs
            logs.add_totals(counts)
        else:
            for name, amount in counts.items():
                monitoring.count(name, amount)
        if self.dead_letter is None:
            monitoring.worker_lines(self.command)
            for line in _log_lines(entries):
                LOGGER.warning("%s", line)
            return
        part = storage.join(self.dead_letter, f"part-{uuid.uuid4().hex}.json")
        storage.write_bytes(part, json.dumps(entries, default=str).encode("utf-8"))


def sink_for(mode: str, dead_letter: Optional[str] = None, on_driver: bool = False,
             also_read: bool = False) -> Optional[DropSink]:
    """The sink of a job in ``mode`` (None: it refuses; the rest: see :class:`DropSink`)."""
    if mode != DROP:
        return None
    return DropSink(dead_letter, monitoring.command(), on_driver, also_read)


def parts_folder(run_dir: str) -> str:
    """The folder of a step's dead-letter parts in its run folder."""
    return storage.join(run_dir, PARTS)


def _log_lines(entries: Sequence[Dict], document: Optional[str] = None) -> List[str]:
    """One line per file: how many of its records were dropped, and the first reasons."""
    by_file: Dict[str, List[Dict]] = {}
    for entry in entries:
        by_file.setdefault(entry["file"], []).append(entry)
    lines = []
    for path, dropped in by_file.items():
        shown = "; ".join(f"row {e['row']}: {e['reason']}" for e in dropped[:SHOWN_REASONS])
        more = " …" if len(dropped) > SHOWN_REASONS else ""
        where = f" (dead letter {document})" if document else ""
        lines.append(f"dropped {len(dropped)} invalid record(s) of {path}: {shown}{more}"
                     f"{where}")
    return lines


def file_dead_letter(state_dir: str, run_dir: str, period: int,
                     input_path: Optional[str]) -> Optional[str]:
    """After a step in drop mode commits period ``period``: gather the parts its workers
    wrote into one document ``STATE/rejected/dropped-PPPP-<token>.json`` (the records, in
    file and row order), log a line per file, remove the parts; return the document's
    path, or None if no record was dropped."""
    folder = parts_folder(run_dir)
    if not storage.exists(folder):
        return None
    entries = []
    for part in sorted(storage.list_files(folder)):
        entries.extend(json.loads(storage.read_bytes(part)))
    storage.remove_tree(folder)
    if not entries:
        return None
    entries.sort(key=lambda entry: (str(entry["file"]), entry["row"]))
    document = storage.join(state_dir, DEAD_LETTER,
                            f"dropped-{period:04d}-{uuid.uuid4().hex[:12]}.json")
    from continual_synth.pipelines.release import release_dir
    release_dir.write_json_atomic(document, {
        "period": period, "input": input_path,
        "reason": "invalid records dropped (--invalid-records drop); the period was released "
                  "from the valid ones",
        "dropped": len(entries), "records": entries,
        "dropped_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    for line in _log_lines(entries, document):
        LOGGER.warning("%s", line)
    return document
