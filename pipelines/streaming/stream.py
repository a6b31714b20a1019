"""Streaming jobs: ``<synthesizer> stream --watch DIR --state STATE --output OUT``.

A streaming job is the incremental release of :mod:`continual_synth.pipelines.release.lifecycle`
driven by arrivals instead of a scheduler: files land in a watched directory or prefix,
each holding one period's records; a period is *complete* when its file has landed, and
complete periods are released in order, each by exactly the write-ahead step
(:func:`~continual_synth.pipelines.release.lifecycle.incremental_step`) that ``step`` runs::

    Ticks(--poll-interval)                              the watcher's clock (Beam's
                                                        PeriodicImpulse, paced:
                                                        transforms/ticks.py)
      ─ key every tick to one key ("stream")
      ─ ReleaseCompletePeriods (stateful DoFn)          lists DIR/* and the folders'
                                                        files: a file or folder new or
                                                        changed arrives when it is
                                                        unchanged one listing later
                                                        (hidden ".x", "_x": still being
                                                        written); a bag holds the files of
                                                        periods not yet released; releases
                                                        next = seen + 1 while a file of it
                                                        is waiting

Every tick first publishes a period the state holds computed but unpublished (a step or
stream killed after its commit: the saved plan, no data read, no noise drawn, nothing
spent) and takes a waiting file whose period is next (a ``step`` may have released the
one before).  Arrivals, for a state that has ingested periods 1..s (taken in by a step;
the window synthesizer releases nothing before period k, so ingested is not released):

* a file already ingested (the lifecycle's fingerprint: path and bytes) — a restart
  re-lists every file, a file touched — is a **duplicate**: logged and ignored; so is a
  file rejected before (its fingerprint is in the dead letter), and a second copy (same
  bytes) of a waiting file;
* a file for period p > s + 1 **waits** in the bag until p − 1 is ingested; a second,
  different file for a waiting period waits behind it: when the period's turn comes its
  files are tried in the order they landed — the listing that first saw each file as it
  is now, then its modification time, then its path (files that settle at one listing
  were first seen at the same one, so time and then path order them) — the first the
  step accepts is ingested and the others are rejected; a file landed again under the
  same name replaces the waiting one, in its place (a corrected file);
* a file for an ingested period p ≤ s (or the file or folder period p was taken from,
  changed since: a part landed late, a rewrite), with the same bytes as another period's
  file (a copy is never a second period), beyond the horizon, without a readable period,
  or refused by the step's validation as a whole (unreadable, no data file, wrong
  columns: the lifecycle leaves state and output byte-identical) goes to the **dead
  letter** ``STATE/rejected/`` — one JSON document per file naming the file, the period
  and the reason, in the private state directory (a reason may quote a value; the
  records are not copied and the file stays where it landed): never silently dropped,
  never counted in a later period.  An invalid *record* does not reject its file: a
  stream steps with ``--invalid-records drop``, so the period is released from the valid
  records and the dropped ones go to ``STATE/rejected/dropped-PPPP-*.json``
  (:mod:`~continual_synth.transforms.invalid_records`); a panel stream therefore needs
  ``--missing-value``.

A file's period is in its name (``period_07.parquet``, ``wave-7.csv``: the last
``period``/``wave`` number) or else in its period column (one value per file).  A folder
in DIR (``period_07/part-*.parquet``) is one period's input, as ``step --input`` takes a
folder: its data files together (hidden and ``_`` names inside are skipped, as ``step``
skips them), its period in the folder's name or else in their period column; a folder
that holds no data file is rejected like an unreadable file.

**Why the synthesizer's state is in the state directory, not in Beam state.** Per-person
history and counters could live in stateful DoFns keyed by shard.  Here they
stay where ``step`` keeps them — the state directory's versioned document and its
per-shard Arrow/numpy files, updated by the sharded Beam pipelines of the step — and
the stateful DoFn holds only the arrival buffer.  That is what makes two promises exact:
(1) ``step`` ↔ ``stream`` interchange: both commit the very same state format, the same
way (write-ahead, fenced), so a team can alternate monthly steps and a stream; (2)
restart on any runner, including a killed DirectRunner whose Beam state is gone: the
restarted stream reads the last committed version and resumes after the last released
period without re-spending or re-drawing noise.  Beam state held the history would be
lost with the runner (DirectRunner) or tied to one runner's checkpoints (Flink,
Dataflow), and would have to be copied back to the state directory after every period
anyway.  The same per-period seeds (:func:`~continual_synth.mechanisms.synthesizer.
period_sampler`) make the stream release exactly what ``run`` and ``init`` + ``step``
release.  The event-time form (Pub/Sub, Kafka) is :mod:`continual_synth.transforms.
stream_sources` and :class:`ReleaseClosedPeriods`: it releases every period 1..T when the
watermark passes its end, whether or not any record arrived, on a schedule no record
sets (so it needs a horizon, and a panel needs ``--missing-value``).

The watcher runs in-process on Beam's DirectRunner in streaming mode (it only lists
files); each period's computation runs on the runner ``run``'s options name.
One stream per state: a stream holds the state's *stream* ownership (:class:`~continual_
synth.pipelines.release.lifecycle.Ownership`, ``role="stream"``) for as long as it runs, so a
second one is refused at start; its steps take the state's step ownership as any ``step``
does.  ``--until-period P`` stops cleanly after releasing P; SIGTERM stops after the step in
progress (the lifecycle's write-ahead commit makes any other stop, kill -9 included,
recoverable too).  Any :class:`~continual_synth.pipelines.release.lifecycle.IncrementalJob`
can be streamed: :func:`watch` takes the job and the document its ``init`` would create
(:func:`~continual_synth.pipelines.commands.family.drive` does so for every family).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import apache_beam as beam
import numpy as np
import pyarrow as pa
from apache_beam.coders import PickleCoder, VarIntCoder
from apache_beam.io.filesystems import FileSystems
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
from apache_beam.transforms.userstate import BagStateSpec, ReadModifyWriteStateSpec, on_timer

from continual_synth.mechanisms.errors import InputError, StateBusy, StateError, one_line
from continual_synth.pipelines.release import lifecycle, logs, release_dir
from continual_synth.pipelines.release.lifecycle import (IncrementalJob, StateDir,
                                                         check_same_settings)
from continual_synth.pipelines.commands.options import pipeline_options
from continual_synth.transforms import storage
from continual_synth.transforms.files import count_records, read_dataset, read_file, write_file
from continual_synth.transforms.invalid_records import DEAD_LETTER, DROP, state_mode
from continual_synth.transforms.monitoring import RECORDS_READ, RECORDS_REJECTED
from continual_synth.transforms.periods import period_values
from continual_synth.transforms.ticks import Ticks
from continual_synth.transforms.stream_sources import (STREAM_KEY, EventPeriods, PeriodClock,
                                                       PeriodSchedule, ScheduleStart,
                                                       UnreadableBatch, check_event_source,
                                                       read_event_records,
                                                       with_schedule_start)

__all__ = ["MIN_POLL_SECONDS", "DEFAULT_POLL_SECONDS", "REJECTED", "SPOOL",
           "PERIOD_IN_NAME", "LOGGER", "StreamStopped", "add_stream_command",
           "add_stream_arguments", "open_state", "file_period", "reject", "count_rejected",
           "rejected_fingerprints", "ingested_reason", "ReleaseCompletePeriods",
           "release_period", "ReleaseClosedPeriods", "write_late_records", "event_pipeline",
           "step_arguments", "consumer_group", "follow_events", "name_dataflow_job",
           "run_stream", "watch", "start_state"]

MIN_POLL_SECONDS = 0.01
DEFAULT_POLL_SECONDS = 5.0  # --poll-interval
REJECTED = DEAD_LETTER  # STATE/rejected/: the dead letter (private: names and reasons)
SPOOL = "spool"  # STATE/spool/<token>/: an event-time period's records while its step runs
#: the period in a file's name: the number after the last "period" or "wave"
PERIOD_IN_NAME = re.compile(r"(?:period|wave)[_\-. ]?0*(\d+)(?!.*(?:period|wave))", re.I)
_STOP_MESSAGE = "continual-synth stream stopped"
LOGGER = logging.getLogger("continual_synth")


class StreamStopped(Exception):
    """Raised inside the pipeline to end a stream cleanly (``--until-period``, SIGTERM)."""

    def __init__(self, reason: str):
        super().__init__(f"{_STOP_MESSAGE}: {reason}")


def add_stream_command(actions, add_options) -> None:
    """``continual-synth FAMILY stream``: the family's sub-parsers ``actions`` get a
    ``stream`` command with :func:`add_stream_arguments` and the synthesizer's options
    (``add_options(parser)``, those of ``run`` without its input and output)."""
    from continual_synth.pipelines.commands.options import HelpFormatter, group_advanced
    description = ("release each period when its file lands in a watched directory (the "
                   "state as init/step keep it)")
    stream = actions.add_parser("stream", help=description, description=description,
                                formatter_class=HelpFormatter)
    add_stream_arguments(stream)
    add_options(stream)
    group_advanced(stream)


def add_stream_arguments(parser) -> None:
    """The options every ``stream`` command adds to its synthesizer's (``run``'s) options."""
    from continual_synth.pipelines.commands.options import POSITIVE_INT, POSITIVE_REAL
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--watch",
                        help="directory or object-store prefix where period files land "
                             "(one file, or one folder of files, per period; land them "
                             "atomically: write a hidden '.name' and rename)")
    source.add_argument("--pubsub-subscription", default=None,
                        help="read JSON records from this Pub/Sub subscription "
                             "(projects/P/subscriptions/S; event time from --timestamp-col)")
    source.add_argument("--kafka-topic", default=None,
                        help="read JSON records from this Kafka topic (with "
                             "--kafka-bootstrap-servers; event time from --timestamp-col)")
    parser.add_argument("--kafka-bootstrap-servers", default=None, metavar="HOST:PORT",
                        help="the Kafka brokers of --kafka-topic (comma-separated)")
    parser.add_argument("--timestamp-col", default=None,
                        help="event sources: the record field holding its event time "
                             "(seconds since the epoch or ISO 8601)")
    parser.add_argument("--period-length", type=POSITIVE_REAL, default=None, metavar="SECONDS",
                        help="event sources: the length of a period in event time")
    parser.add_argument("--origin", type=float, default=None, metavar="SECONDS",
                        help="event sources: the start of period 1 (seconds since the "
                             "epoch, default 0)")
    parser.add_argument("--state", required=True,
                        help="state directory (created from the options if absent; the same "
                             "format as init/step)")
    parser.add_argument("--output", required=True, help="release directory")
    parser.add_argument("--input-format", default=None, choices=["parquet", "csv", "avro"],
                        help="format of the watched files (default: from each file's "
                             "extension)")
    parser.add_argument("--until-period", type=POSITIVE_INT, default=None,
                        help="stop cleanly after releasing this period (default: run until "
                             "cancelled)")
    parser.add_argument("--poll-interval", type=POSITIVE_REAL, default=None, metavar="SECONDS",
                        help="--watch: how often the watched directory is listed (default 5)")
    parser.add_argument("--wait", type=float, default=0.0, metavar="SECONDS",
                        help="if a step owns the state when a period is due, wait up to this "
                             "long for it at once (default 0); a --watch stream then looks "
                             "again at every poll until the step has finished, and an event "
                             "stream at its next period's end")


# ------------------------------------------------------------------ the state


def open_state(state_dir: str, document: Dict,
               canonical: Callable[[Dict], Dict] = lambda document: document) -> Dict:
    """The current state of ``state_dir``, created from ``document`` (what ``init`` would
    write) if there is none; refused if the options given differ from the state's (both
    compared in ``canonical`` form: :meth:`IncrementalJob.canonical`)."""
    store = StateDir(state_dir)
    if not store.exists():
        store.create(document)
        return store.read(document["kind"])[1]
    state = store.read(document["kind"])[1]
    # a stream always drops invalid records: what the state's steps do is not its option
    document = {**document, "invalid_records": state_mode(state)}
    check_same_settings(state_dir, state, document, canonical)
    return state


def file_period(path: str, period_col: str, in_format: Optional[str]) -> int:
    """The period a landed file (or folder of files) holds: from its name, else its
    period column."""
    match = PERIOD_IN_NAME.search(os.path.basename(path.rstrip("/")))
    if match:
        return int(match.group(1))
    table = read_dataset(path, in_format) if storage.is_dir(path) else read_file(path, in_format)
    if period_col not in table.column_names:
        raise InputError(f"{path}: no period in the file name (as in period_07.parquet) and "
                         f"no {period_col!r} column")
    periods = np.unique(period_values(table, period_col, path))
    if len(periods) != 1:
        raise InputError(f"{path}: a watched file holds one period; column {period_col!r} "
                         f"holds {len(periods)} different values")
    return int(periods[0])


def reject(state_dir: str, path: str, period: Optional[int], reason: str,
           fingerprint: Optional[str] = None, name: Optional[str] = None) -> str:
    """Dead-letter one file: ``STATE/rejected/<time>-<name>.json`` with the reason (in the
    private state directory: a reason may quote a value of the file); return that
    document's path, which the ``rejected`` event names (``dead_letter``).
    ``fingerprint`` (:func:`~continual_synth.pipelines.release.lifecycle.fingerprint`) lets a
    restarted stream recognise the file instead of rejecting it again; ``name`` is the
    document's name after its time (default: the file's), for what is not a file (an
    event-time period: ``period-7``)."""
    reason = one_line(reason)
    document = storage.join(state_dir, REJECTED,
                            f"{time.strftime('%Y%m%dT%H%M%S')}-{lifecycle.new_token()[-6:]}-"
                            f"{name or os.path.basename(path.rstrip('/'))}.json")
    release_dir.write_json_atomic(
        document,
        {"file": path, "period": period, "reason": reason, "fingerprint": fingerprint,
         "rejected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    _event("rejected", file=path, period=period, reason=reason, dead_letter=document)
    return document


def count_rejected(records: Optional[int]) -> None:
    """Add the records the dead letter took to the command's counters, as read and
    rejected: the step that refused them lost its own counters with its failed pipeline
    (or no step saw them: late records, a file of a period already taken)."""
    if records:
        logs.add_totals({RECORDS_READ: records, RECORDS_REJECTED: records})


def rejected_fingerprints(state_dir: str) -> set:
    """The fingerprints of the files the dead letter holds."""
    found = set()
    for path in storage.list_files(storage.join(state_dir, REJECTED)):
        document = release_dir.read_json(path) or {}
        if document.get("fingerprint"):
            found.add(document["fingerprint"])
    return found


def ingested_reason(state: Dict, path: str, period: int) -> str:
    """Why a landed file or folder of period ``period`` ≤ s (the periods the state has
    ingested, ``job.periods_seen``) goes to the dead letter.  Ingested is not released:
    the window synthesizer takes periods 1..k−1 in and releases nothing until period k,
    so the reason names what is true of every synthesizer — the period was taken from a
    file (``state["inputs"]``: resolved location → the period last taken from it; absent
    from states written before it was recorded) — and whether it was this very location,
    since changed (a part landed in the folder, the file was rewritten in place)."""
    inputs = state.get("inputs", {})
    if inputs.get(storage.resolved(path)) == period:
        if storage.is_dir(path):
            return (f"the folder changed after period {period} was taken from it (a part "
                    f"landed or changed in it late): period {period} counts the parts it "
                    f"held then; the new contents are not counted, and a late part is never "
                    f"counted in a later period")
        return (f"the file was rewritten in place after period {period} was taken from it: "
                f"period {period} counts the bytes it held then; the new ones are not "
                f"counted, in period {period} or in a later one")
    sources = [source for source, taken in inputs.items() if taken == period]
    source = f" (taken from {sources[-1]})" if sources else ""
    return (f"period {period} was already ingested{source}; a late file is never counted "
            f"in a later period")


def _event(event: str, **fields) -> None:
    """One JSON line on stderr per arrival or release (the stream's log)."""
    print(json.dumps({"event": event, **fields}, default=str), file=sys.stderr, flush=True)


# ------------------------------------------------------------- the stateful DoFn


class _Stop:
    """SIGTERM while a step runs: finish it, then stop (process-wide, in-process runner)."""

    requested = threading.Event()
    busy = threading.Lock()


class ReleaseCompletePeriods(beam.DoFn):
    """``("stream", tick)`` in (one key, every poll interval): lists the watched
    directory, takes the files that are new or changed since the last listing as
    arrivals, and releases complete periods in order through the lifecycle's step; the
    bag holds the files of periods not yet released (see the module docstring for every
    case).  A tick without a new file still looks at the state: a period a step left
    computed but unpublished is published, a file waiting for a period a step has since
    released is taken."""

    WAITING = BagStateSpec("waiting", PickleCoder())
    LISTED = BagStateSpec("listed", PickleCoder())  # {path: (mark, settled, first seen)}

    def __init__(self, job: IncrementalJob, watch_dir: str, state_dir: str, output_dir: str,
                 *, in_format: Optional[str], period_col: str, until_period: Optional[int],
                 beam_args: Sequence[str], wait: float):
        super().__init__()
        self.job, self.watch_dir = job, watch_dir
        self.state_dir, self.output_dir = state_dir, output_dir
        self.in_format, self.period_col, self.until_period = in_format, period_col, until_period
        self.beam_args, self.wait = list(beam_args), wait

    def setup(self):
        self.busy = False  # a step owned the state at the last tick (logged once)
        # one fingerprint per dead-letter document: as many as STATE/rejected/ holds (it
        # grows with the files rejected, as the dead letter itself does, never with the
        # files listed); ``known`` (LISTED) holds the last listing's entries, and the bag
        # (WAITING) the files of periods not yet ingested
        self.rejected = rejected_fingerprints(self.state_dir)

    def process(self, element, waiting=beam.DoFn.StateParam(WAITING),
                listed=beam.DoFn.StateParam(LISTED)):
        with _Stop.busy:
            arrived: Dict[int, List[Tuple[str, str, str]]] = {}
            for period, *candidate in waiting.read():
                arrived.setdefault(period, []).append(tuple(candidate))
            known = next(iter(listed.read()), {})
            landed = self._landed(known)
            self._withdraw_removed(known, arrived)
            try:
                state = self._resume_pending()
                for path in landed:
                    self._arrive(path, arrived, state)
                self._release_ready(arrived)
                self._announce_waiting(landed, arrived)
            except StateBusy as exc:  # a step owns the state: its files wait for the next tick
                if not self.busy:
                    _event("busy", message=f"{one_line(exc)}; the stream waits for it to "
                                           f"finish and goes on")
                self.busy = True
            else:
                self.busy = False
            finally:
                waiting.clear()
                for period, candidates in sorted(arrived.items()):
                    for candidate in candidates:
                        waiting.add((period, *candidate))
                listed.clear()
                listed.add(known)
        if _Stop.requested.is_set():
            raise StreamStopped("stop requested (SIGTERM or Ctrl-C)")
        return ()

    def _landed(self, known: Dict) -> List[str]:
        """The watched files and folders (not hidden: ``.name`` or ``_name``) that have
        settled since the last listing, in landing order; ``known`` ({path: (mark,
        settled, first seen)}) updated.  A file's mark is its size and time, a folder's
        the names, sizes and times of every file under it (hidden ones included: a part
        still being written).  An entry new or changed at this listing waits for the next
        one and is taken when its mark is the same there: a file copied in place (not
        landed atomically, as docs/streaming.md asks) is not read half-written unless its
        writer pauses for a whole poll interval.  Landing order: the listing that first
        saw the entry as it is now, then its modification time (a folder's: its newest
        file's), then its path; as every entry is taken one listing after it was first
        seen unchanged, the entries of one listing differ by time and path only.

        A path no longer listed (removed, renamed away) is forgotten: ``known`` holds the
        entries of the last listing only, not every path a long-running stream ever saw,
        and a file removed and landed again — even with the same size and time — is new
        and goes through every check of :meth:`_arrive` (ingested, rejected, a copy)."""
        now = time.time()
        landed = []
        entries = self._entries()
        for gone in set(known) - set(entries):
            del known[gone]
        for path, (mark, modified) in sorted(entries.items()):
            old_mark, settled, first_seen = known.get(path, (None, False, now))
            if old_mark != mark:
                known[path] = (mark, False, now)
            elif not settled:
                known[path] = (mark, True, first_seen)
                landed.append((first_seen, modified, path))
        return [path for _, _, path in sorted(landed)]

    @staticmethod
    def _withdraw_removed(known: Dict, arrived: Dict) -> None:
        """Forget the waiting files no longer listed (removed or renamed away before
        their period's turn), each with a ``withdrawn`` event: never taken, so neither
        counted nor dead-lettered (kept queued, it would be dead-lettered as unreadable
        at its period's turn)."""
        for period in sorted(arrived):
            kept = [candidate for candidate in arrived[period] if candidate[0] in known]
            for path, *_ in arrived[period]:
                if path not in known:
                    _event("withdrawn", file=path, period=period,
                           reason="removed from the watched folder before its period's "
                                  "turn; not counted")
            if kept:
                arrived[period] = kept
            else:
                del arrived[period]

    def _entries(self) -> Dict[str, Tuple[tuple, float]]:
        """{path: (mark, modification time)} of the watched directory's files and folders
        that are not hidden (a folder on an object store: a prefix holding objects)."""
        pattern = FileSystems.join(self.watch_dir, "**")
        folders: Dict[str, list] = {}
        entries = {}
        for metadata in FileSystems.match([pattern])[0].metadata_list:
            parts = storage.relative_parts(self.watch_dir, metadata.path)
            if not parts[0] or parts[0].startswith((".", "_")):
                continue
            if len(parts) == 1:
                entries[metadata.path] = ((metadata.size_in_bytes,
                                           metadata.last_updated_in_seconds),
                                          metadata.last_updated_in_seconds)
            else:
                folders.setdefault(parts[0], []).append(
                    ("/".join(parts[1:]), metadata.size_in_bytes,
                     metadata.last_updated_in_seconds))
        for name, files in folders.items():
            entries[storage.join(self.watch_dir, name)] = (tuple(sorted(files)),
                                                           max(f[2] for f in files))
        return entries

    def _state(self) -> Dict:
        return lifecycle.load_state(self.state_dir, self.job.kind or None)

    def _reject(self, path: str, period: Optional[int], reason: str, fingerprint: str) -> None:
        reject(self.state_dir, path, period, reason, fingerprint)
        self.rejected.add(fingerprint)
        count_rejected(count_records(path, self.in_format))

    def _resume_pending(self) -> Dict:
        """A period committed but not published (a step or stream killed after its commit)
        is published from its saved plan: no file is read, no noise drawn, nothing spent.
        Returns the state then current."""
        state = self._state()
        if state["pending"] is None:
            return state
        self._step(None, state["pending"]["period"], resumed=True)
        return self._state()

    def _arrive(self, path: str, arrived: Dict, state: Dict) -> None:
        """Sort one landed file (``state``: the current state; arriving changes none)."""
        if not storage.exists(path):  # removed since it was listed
            return
        seen = self.job.periods_seen(state)
        located, content = lifecycle.input_digests(path)
        if located in self.rejected:
            _event("duplicate", file=path, reason="this file was rejected before (see "
                                                  "STATE/rejected/); ignored")
            return
        ingested = state["fingerprints"].get(located)
        if ingested is not None:
            _event("duplicate", file=path, period=ingested,
                   reason="this file was already ingested; ignored")
            return
        try:
            period = file_period(path, self.period_col, self.in_format)
        except InputError as exc:
            self._reject(path, None, str(exc), located)
            return
        horizon = self.job.horizon(state)
        copied = state.get("contents", {}).get(content)
        candidates = arrived.setdefault(period, [])
        twin = next((other for other, _, digest in candidates if digest == content), None)
        copy_waiting = next((waiting for waiting, others in arrived.items() if waiting != period
                             and any(digest == content for _, _, digest in others)), None)
        if period < 1 or (horizon is not None and period > horizon):
            self._reject(path, period, f"period {period} is outside 1..{horizon or '∞'} "
                                       f"(the horizon)", located)
        elif period <= seen:
            self._reject(path, period, ingested_reason(state, path, period), located)
        elif copied is not None or copy_waiting is not None:
            self._reject(path, period, f"holds the same bytes as the file of period "
                                       f"{copied or copy_waiting}: a copy is not taken as "
                                       f"period {period}", located)
        elif twin is not None:
            _event("duplicate", file=path, period=period,
                   reason=f"same bytes as {twin}, waiting; ignored")
        else:
            rewritten = [i for i, (other, _, _) in enumerate(candidates) if other == path]
            if rewritten:  # the same name landed again with other bytes: the new ones
                candidates[rewritten[0]] = (path, located, content)
            else:
                candidates.append((path, located, content))
            if len(candidates) > 1 and not rewritten:
                _event("waiting", file=path, period=period,
                       reason=f"period {period} already has a file waiting ({candidates[0][0]}); "
                              f"this one is used only if that one is refused")
        if not candidates:
            del arrived[period]

    def _announce_waiting(self, landed: Sequence[str], arrived: Dict) -> None:
        """A ``waiting`` event for each period whose first file landed at this listing
        and waits for an earlier period of which no file is waiting either, naming those
        periods.  Only once the whole listing has been sorted and the ready periods
        ingested: a listing sorts its files in landing order, so a later period's file
        can be sorted before the file of the period it would otherwise wait for."""
        new = set(landed)
        if not any(candidates[0][0] in new for candidates in arrived.values()):
            return
        seen = self.job.periods_seen(self._state())
        for period, candidates in sorted(arrived.items()):
            missing = [p for p in range(seen + 1, period) if p not in arrived]
            if candidates[0][0] in new and missing:
                listed = ", ".join(str(p) for p in missing[:5]) + (" …" if len(missing) > 5
                                                                  else "")
                _event("waiting", file=candidates[0][0], period=period,
                       reason=(f"period {listed} has not landed yet" if len(missing) == 1
                               else f"periods {listed} have not landed yet"))

    def _release_ready(self, arrived: Dict) -> None:
        """Release the next period while its file is waiting: its files in the order they
        landed (:meth:`_landed`), the first the step accepts (the others are rejected)."""
        while not _Stop.requested.is_set():
            state = self._state()
            seen = self.job.periods_seen(state)
            if state["pending"] is not None:  # published at the next tick
                return
            if self.until_period is not None and seen >= self.until_period:
                raise StreamStopped(f"--until-period {self.until_period} reached")
            candidates = arrived.pop(seen + 1, [])
            if not candidates:
                return
            for index, (path, located, _) in enumerate(candidates):
                try:
                    self._step(path, seen + 1, resumed=False)
                except InputError as exc:  # the lifecycle left state and output unchanged
                    self._reject(path, seen + 1, str(exc), located)
                    continue
                except StateBusy:  # a step owns the state: these files wait, in order
                    arrived[seen + 1] = candidates[index:]
                    raise
                for other, other_located, _ in candidates[index + 1:]:
                    self._reject(other, seen + 1, f"period {seen + 1} was taken from {path} "
                                                  f"(landed first); this file is not counted",
                                 other_located)
                break

    def _step(self, path: Optional[str], period: int, resumed: bool) -> None:
        release_period(self.job, self.state_dir, self.output_dir, path, period,
                       in_format=self.in_format, beam_args=self.beam_args, wait=self.wait,
                       resumed=resumed)


def release_period(job: IncrementalJob, state_dir: str, output_dir: str,
                   path: Optional[str], period: int, *, in_format: Optional[str],
                   beam_args: Sequence[str], wait: float, resumed: bool = False) -> Dict:
    """One period through the lifecycle's write-ahead step, logged (``path`` None: resume
    the period the state holds computed but unpublished).  A stream drops each invalid
    record alone (:data:`DROP`): one record must not decide whether a period is
    published."""
    started = time.time()
    summary = lifecycle.incremental_step(job, state_dir, path, output_dir,
                                         in_format=in_format, period=period,
                                         beam_args=beam_args, wait=wait,
                                         invalid_records=DROP)
    _event(summary.get("status", "released"), file=path, period=period,
           resumed=resumed or summary.get("resumed", False),
           seconds=round(time.time() - started, 3), message=summary.get("message"))
    return summary


class ReleaseClosedPeriods(beam.DoFn):
    """The event-time form: ``("stream", (period, pa.Table))`` batches in; when the
    watermark passes a period's end, every period up to it is released in order through
    the lifecycle's step, its records spooled first to ``STATE/spool/<token>/`` on the
    state's own store (the step reads files; the spool is removed after the step, and a
    killed stream's spool when the next one starts).

    When a period is released does not depend on the data: the watermark timer follows
    :class:`~continual_synth.transforms.stream_sources.PeriodSchedule` (armed by the
    :class:`~continual_synth.transforms.stream_sources.ScheduleStart` element, never by
    a record; re-armed by each firing at the next period's end up to the horizon; a
    drain's firing, for a period that ends after the wall clock's now, releases nothing
    and ends the chain).  A period in which no record arrived (a quiet period) is
    released through the same step as any other, as the job's 0-row table
    (:meth:`~continual_synth.pipelines.release.lifecycle.IncrementalJob.empty_period`): the
    same ledger charge, state and release as ``step`` on an empty period file (a panel's
    quiet period is every person's report missing, filled with ``--missing-value``).  A
    quiet period the job cannot release (a panel's period 1: no people at all) stops
    the stream with the job's :class:`InputError`.  A period the step refuses
    whole (its invalid records alone are dropped: :func:`release_period`) goes to the
    dead letter once, saying so, and holds the later periods back.
    A period committed but not published (a step or stream killed after its commit) is
    published first, from its saved plan.  Never beyond ``until_period`` nor beyond the
    period the watermark has closed."""

    BATCHES = BagStateSpec("batches", PickleCoder())
    REFUSED = ReadModifyWriteStateSpec("refused_period", VarIntCoder())
    CLOSED, CLOSE = PeriodSchedule.specs()

    def __init__(self, job: IncrementalJob, state_dir: str, output_dir: str, *,
                 clock: PeriodClock, horizon: int, released_through: int,
                 drop_columns: Sequence[str], distinct_rows: bool,
                 until_period: Optional[int], beam_args: Sequence[str], wait: float):
        super().__init__()
        self.job, self.state_dir, self.output_dir, self.clock = job, state_dir, output_dir, clock
        self.schedule = PeriodSchedule(clock, horizon, released_through)
        self.drop_columns, self.distinct_rows = list(drop_columns), distinct_rows
        self.until_period, self.beam_args, self.wait = until_period, list(beam_args), wait

    def setup(self):
        # A spool left by a stream that was killed mid-step holds private records: gone
        # before this stream spools anything (one stream per state: the launcher holds the
        # stream's ownership, and on Dataflow the job is named after the state).
        storage.remove_tree(storage.join(self.state_dir, SPOOL))

    def process(self, element, batches=beam.DoFn.StateParam(BATCHES),
                closed_state=beam.DoFn.StateParam(CLOSED), close=beam.DoFn.TimerParam(CLOSE)):
        _, batch = element
        if isinstance(batch, ScheduleStart):
            self.schedule.start(closed_state, close)
        else:
            batches.add(batch)

    @on_timer(CLOSE)
    def on_close(self, fire_time=beam.DoFn.TimestampParam,
                 batches=beam.DoFn.StateParam(BATCHES), refused=beam.DoFn.StateParam(REFUSED),
                 closed_state=beam.DoFn.StateParam(CLOSED), close=beam.DoFn.TimerParam(CLOSE)):
        closed = self.schedule.close(fire_time, closed_state, close)
        if closed is None:
            _event("drain", period=self.clock.period(fire_time) - 1,
                   message="the watermark passed the end of a period that has not ended "
                           "yet (a drain, or the end of the source): nothing more is "
                           "released; a restarted stream resumes from the state")
            return
        _event("closed", period=closed)
        waiting: Dict[int, list] = {}
        for period, table in batches.read():
            waiting.setdefault(period, []).append(table)
        batches.clear()
        with _Stop.busy:
            state = lifecycle.load_state(self.state_dir, self.job.kind or None)
            period = self.job.periods_seen(state) + (state["pending"] is None)
            try:
                if state["pending"] is not None:  # resumed from its plan: nothing spent
                    release_period(self.job, self.state_dir, self.output_dir, None, period,
                                   in_format=None, beam_args=self.beam_args, wait=self.wait,
                                   resumed=True)
                    period += 1
                while period <= closed and period != refused.read() and \
                        (self.until_period is None or period <= self.until_period) and \
                        not _Stop.requested.is_set():
                    if not self._release(period, waiting.pop(period, []), state):
                        refused.write(period)  # dead-lettered once; it holds the rest back
                        break
                    period += 1
            except StateBusy as exc:  # a step owns the state past --wait: the next firing
                _event("busy", period=period, message=one_line(exc))
            for earlier in sorted(p for p in waiting if p < period):  # released already
                tables = waiting.pop(earlier)
                if earlier in _RELEASED_HERE.get(self.state_dir, ()):
                    continue  # a retried firing: these records are the period's release
                for table in tables:  # a step released the period meanwhile
                    self._late(earlier, table, f"period {earlier} was ingested before "
                                               f"these records arrived")
            for later, tables in waiting.items():
                for table in tables:
                    batches.add((later, table))
        if self.until_period is not None and period > self.until_period:
            raise StreamStopped(f"--until-period {self.until_period} reached")
        if _Stop.requested.is_set():
            raise StreamStopped("stop requested (SIGTERM or Ctrl-C)")

    def _late(self, period: int, table, reason: str) -> None:
        if isinstance(table, UnreadableBatch):
            return
        for record in table.to_pylist():
            write_late_records(self.state_dir, (period, record, reason))

    def _release(self, period: int, tables, state: Dict) -> bool:
        where = f"period {period} (event time {self.clock.start(period).to_rfc3339()} to " \
                f"{self.clock.end(period).to_rfc3339()})"
        if not tables:  # a period without records, as step takes it (the job's rule)
            table = self.job.empty_period(state, period)
            _event("empty", period=period, message=f"{where}: no records arrived before the "
                                                   f"watermark passed its end; released as a "
                                                   f"period without records")
        else:
            unreadable = [t.reason for t in tables if isinstance(t, UnreadableBatch)]
            if unreadable:
                reject(self.state_dir, where, period, unreadable[0])
                return False
            table = pa.concat_tables(tables, promote_options="default")
            table = table.drop_columns([c for c in self.drop_columns
                                        if c in table.column_names])
            if self.distinct_rows:  # a redelivered message: the same report twice
                table = table.group_by(table.column_names, use_threads=False).aggregate([])
        # The step reads files: the period's records are spooled next to the state, on
        # the state's own store (on Dataflow or Flink the step's workers read them there,
        # not on this worker's disk), and removed whatever happens.
        spool = storage.join(self.state_dir, SPOOL, lifecycle.new_token())
        path = storage.join(spool, f"period_{period:04d}.parquet")
        try:
            write_file(table, path, "parquet")
            release_period(self.job, self.state_dir, self.output_dir, path, period,
                           in_format="parquet", beam_args=self.beam_args, wait=self.wait)
            _RELEASED_HERE.setdefault(self.state_dir, set()).add(period)
            return True
        except InputError as exc:  # the lifecycle left state and output unchanged
            reject(self.state_dir, where, period, str(exc).replace(path, where))
            count_rejected(table.num_rows)
            return False
        finally:
            storage.remove_tree(spool)


# Periods this process released from a stream's own records, per state directory: a
# firing that stops the stream (--until-period, SIGTERM) fails its bundle on purpose, and
# the runner retries it with the records it had buffered, which were released already.
_RELEASED_HERE: Dict[str, set] = {}


def write_late_records(state_dir: str, late) -> None:
    """Dead-letter late records, ``STATE/rejected/late-<period>-….json``, and messages
    refused before they had a period, ``STATE/rejected/invalid-….json`` (private data,
    in the private state directory)."""
    period, record, reason = late
    name = "invalid" if period is None else f"late-{period:04d}"
    release_dir.write_json_atomic(
        storage.join(state_dir, REJECTED, f"{name}-{lifecycle.new_token()}.json"),
        {"period": period, "reason": reason, "record": record})
    _event("late" if period is not None else "invalid", period=period, reason=reason)
    count_rejected(1)


def event_pipeline(pipeline, job: IncrementalJob, state_dir: str, output_dir: str, *,
                   clock: PeriodClock, timestamp_col: str, horizon: int, records=None,
                   pubsub_subscription: Optional[str] = None,
                   kafka_topic: Optional[str] = None, kafka_bootstrap: Optional[str] = None,
                   distinct_rows: bool = False, until_period: Optional[int] = None,
                   beam_args: Sequence[str] = (), wait: float = 0.0,
                   released_through: int = 0):
    """Build the event-time stream on ``pipeline`` (``records``: a PCollection of JSON
    records or messages, e.g. a ``TestStream``'s, instead of Pub/Sub or Kafka;
    ``horizon``: T, the last period the schedule releases; ``released_through``: the
    periods the state had released when the stream started)."""
    if records is None:
        records = read_event_records(pipeline, pubsub_subscription=pubsub_subscription,
                                     kafka_topic=kafka_topic, kafka_bootstrap=kafka_bootstrap,
                                     consumer_group=consumer_group(state_dir))
    streams = records | "EventPeriods" >> EventPeriods(clock, timestamp_col, horizon=horizon,
                                                       released_through=released_through)
    _ = streams["late"] | "DeadLetter" >> beam.Map(lambda late: write_late_records(state_dir,
                                                                                     late))
    batches = streams["periods"] | "OneKey" >> beam.WithKeys(lambda _: STREAM_KEY)
    return (with_schedule_start(batches, "Schedule")
            | "ReleaseClosed" >> beam.ParDo(ReleaseClosedPeriods(
                job, state_dir, output_dir, clock=clock, horizon=horizon,
                released_through=released_through, drop_columns=[timestamp_col],
                distinct_rows=distinct_rows, until_period=until_period,
                beam_args=beam_args, wait=wait)))


def step_arguments(beam_args: Sequence[str]) -> List[str]:
    """The Beam arguments of the steps an event stream runs inside its release DoFn: the
    job's (the stores' settings — ``--s3_endpoint_url`` … — which every Beam pipeline
    hands to ``FileSystems`` when it is built: with none, a step's pipeline reset them and
    the step and the next spool went to the default endpoint), as batch pipelines on the
    DirectRunner of the worker that runs the DoFn whatever runner the stream uses."""
    kept = [arg for arg in beam_args
            if arg != "--streaming" and not arg.startswith("--streaming=")]
    return [*kept, "--runner", "DirectRunner"]


def consumer_group(state_dir: str) -> str:
    """Kafka's consumer group of the stream releasing into ``state_dir``: one per state,
    the same across restarts (so the committed offsets are this stream's); also the
    Dataflow job's default name (:func:`name_dataflow_job`)."""
    digest = hashlib.sha256(storage.absolute(state_dir).encode()).hexdigest()[:16]
    return f"continual-synth-{digest}"


def follow_events(job: IncrementalJob, document: Dict, state_dir: str, output_dir: str, *,
                  clock: PeriodClock, timestamp_col: str, beam_args: Sequence[str] = (),
                  until_period: Optional[int] = None, wait: float = 0.0,
                  distinct_rows: bool = False, **source) -> Dict:
    """Run the event-time stream on the runner ``beam_args`` name (streaming); return a
    summary.  ``source``: ``pubsub_subscription``, or ``kafka_topic`` and
    ``kafka_bootstrap`` (checked before anything is written); ``distinct_rows`` for
    panels."""
    check_event_source(source.get("pubsub_subscription"), source.get("kafka_topic"),
                       source.get("kafka_bootstrap"))
    job.check_event_stream(document)  # a horizon, and quiet periods the job releases
    options = pipeline_options(beam_args)
    if until_period is not None and not _in_process(options):
        raise InputError("--until-period stops an event stream on the DirectRunner only: "
                         "the stop is raised inside the pipeline, which Dataflow and Flink "
                         "retry without end; stop the job there with a drain (Dataflow) or "
                         "a stop with savepoint (Flink)")
    start_state(job, document, state_dir, output_dir, until_period, wait)
    with lifecycle.Ownership(StateDir(state_dir), wait, role="stream"):
        state = lifecycle.load_state(state_dir, job.kind or None)
        if state["pending"] is not None:  # at once, from its plan, as --watch does
            release_period(job, state_dir, output_dir, None, state["pending"]["period"],
                           in_format=None, beam_args=step_arguments(beam_args), wait=wait,
                           resumed=True)
            state = lifecycle.load_state(state_dir, job.kind or None)
        released = job.periods_seen(state)
        if until_period is not None and released >= until_period:
            return _summary(job, state_dir, output_dir)  # a retried task: nothing to do
        options.view_as(StandardOptions).streaming = True
        name_dataflow_job(options, state_dir)
        with _stopping():
            with beam.Pipeline(options=options) as pipeline:
                event_pipeline(pipeline, job, state_dir, output_dir, clock=clock,
                               timestamp_col=timestamp_col, until_period=until_period,
                               beam_args=step_arguments(beam_args), wait=wait,
                               distinct_rows=distinct_rows,
                               horizon=job.horizon(document), released_through=released,
                               **source)
    return _summary(job, state_dir, output_dir)


def name_dataflow_job(options, state_dir: str) -> None:
    """On Dataflow, name the job after its state (:func:`consumer_group`) unless
    ``--job_name`` is given: Dataflow refuses a second running job of the same name, so a
    second stream on one state is refused there even after the launching process (which
    holds the stream's lock) has gone, and ``--update`` finds the job by that name."""
    from apache_beam.options.pipeline_options import GoogleCloudOptions
    runner = options.view_as(StandardOptions).runner or ""
    cloud = options.view_as(GoogleCloudOptions)
    if "dataflow" in str(runner).lower() and not cloud.job_name:
        cloud.job_name = consumer_group(state_dir)


def _in_process(options) -> bool:
    """Whether ``options`` (from :func:`pipeline_options`, which names the DirectRunner
    by its class path) run the pipeline on the in-process DirectRunner."""
    from continual_synth.runners.direct import CLASS_PATH
    return options.view_as(StandardOptions).runner == CLASS_PATH


# --------------------------------------------------------------------- the job


def run_stream(job: IncrementalJob, document: Dict, args, beam_args: Sequence[str], *,
               period_col: str = "period", distinct_rows: bool = False) -> Dict:
    """The ``stream`` command of any synthesizer family (``args`` from
    :func:`add_stream_arguments`): watched files, or an event source."""
    if args.watch is not None:
        for name in ("timestamp_col", "period_length", "origin", "kafka_bootstrap_servers"):
            if getattr(args, name) is not None:
                raise InputError(f"--{name.replace('_', '-')} is for --pubsub-subscription "
                                 f"or --kafka-topic, not --watch")
        poll = DEFAULT_POLL_SECONDS if args.poll_interval is None else args.poll_interval
        return watch(job, document, args.watch, args.state, args.output,
                     until_period=args.until_period, poll_seconds=poll,
                     in_format=args.input_format, period_col=period_col,
                     beam_args=beam_args, wait=args.wait)
    lifecycle.Ownership(StateDir(args.state), args.wait)  # checks --wait; owns nothing yet
    for name in ("timestamp_col", "period_length"):
        if getattr(args, name) is None:
            raise InputError(f"--pubsub-subscription and --kafka-topic need "
                             f"--{name.replace('_', '-')}")
    for name in ("poll_interval", "input_format"):
        if getattr(args, name, None) is not None:
            raise InputError(f"--{name.replace('_', '-')} is for --watch, not "
                             f"--pubsub-subscription or --kafka-topic")
    if args.pubsub_subscription is not None and args.kafka_bootstrap_servers is not None:
        raise InputError("--kafka-bootstrap-servers is for --kafka-topic, not "
                         "--pubsub-subscription")
    return follow_events(job, document, args.state, args.output,
                         clock=PeriodClock(args.period_length, args.origin or 0.0),
                         timestamp_col=args.timestamp_col, beam_args=beam_args,
                         until_period=args.until_period, wait=args.wait,
                         pubsub_subscription=args.pubsub_subscription,
                         kafka_topic=args.kafka_topic,
                         kafka_bootstrap=args.kafka_bootstrap_servers,
                         distinct_rows=distinct_rows)



def watch(job: IncrementalJob, document: Dict, watch_dir: str, state_dir: str,
          output_dir: str, *, until_period: Optional[int] = None,
          poll_seconds: float = DEFAULT_POLL_SECONDS,
          in_format: Optional[str] = None, period_col: str = "period",
          beam_args: Sequence[str] = (), wait: float = 0.0) -> Dict:
    """Release every period whose file lands in ``watch_dir`` (see the module docstring)
    until ``until_period`` is released, SIGTERM, or cancellation; return a summary."""
    if not poll_seconds >= MIN_POLL_SECONDS:
        raise InputError(f"--poll-interval must be at least {MIN_POLL_SECONDS} seconds, "
                         f"not {poll_seconds}")
    if storage.is_file(watch_dir):
        raise InputError(f"--watch {watch_dir} is a file: give the directory (or prefix) "
                         f"where the period files land")
    if storage.is_local(watch_dir):
        if not os.path.isdir(watch_dir):
            raise InputError(f"--watch {watch_dir}: no such directory")
    else:  # a prefix exists only once it holds an object: the bucket must
        storage.check_bucket("watch", watch_dir)
    start_state(job, document, state_dir, output_dir, until_period, wait)
    with lifecycle.Ownership(StateDir(state_dir), wait, role="stream"):
        state = lifecycle.load_state(state_dir, job.kind or None)
        if until_period is None or job.periods_seen(state) < until_period:
            _run_watcher(job, watch_dir, state_dir, output_dir, until_period, poll_seconds,
                         in_format, period_col, beam_args, wait)
    return _summary(job, state_dir, output_dir)


def start_state(job: IncrementalJob, document: Dict, state_dir: str, output_dir: str,
                until_period: Optional[int], wait: float) -> None:
    """Create the stream's state from ``document`` if absent, or check it against it,
    after refusing what could never work, before anything is written: a bad ``--wait``,
    an ``--until-period`` beyond the horizon, an ``--output`` that holds another release
    or other files (for a state that has published nothing yet: anything; for one that
    has: anything besides its own release).  The caller reads the state once it holds
    the stream's ownership."""
    lifecycle.Ownership(StateDir(state_dir), wait)  # checks --wait; owns nothing yet
    job.check_invalid_records(document, DROP, why=f"a {job.kind or document['kind']} stream, "
                                                 f"which drops each invalid record alone "
                                                 f"(one record must not decide whether a "
                                                 f"period is published),")
    horizon = job.horizon(document)
    if until_period is not None and horizon is not None and until_period > horizon:
        raise InputError(f"--until-period {until_period} is beyond the horizon T={horizon}: "
                         f"the stream would never stop")
    if not StateDir(state_dir).exists():
        lifecycle.check_fresh_output(output_dir)
    state = open_state(state_dir, document, job.canonical)
    lifecycle.check_release_target(state, output_dir)
    if state["output_dir"] is None:
        lifecycle.check_fresh_output(output_dir)
    else:
        lifecycle.check_release_alone(output_dir)


def _summary(job: IncrementalJob, state_dir: str, output_dir: str) -> Dict:
    """What ``stream`` prints when it stops: the periods released (the published
    manifest's list) and how many were ingested (under ``window`` periods 1..k−1 are
    ingested before anything is released)."""
    state = lifecycle.load_state(state_dir, job.kind or None)
    manifest = release_dir.read_json(storage.join(output_dir, lifecycle.MANIFEST))
    dead_letters = len(storage.list_files(storage.join(state_dir, REJECTED)))
    if dead_letters:  # the operator's log: what was refused depends on the data
        LOGGER.info("the dead letter %s holds %d document(s)",
                    storage.join(state_dir, REJECTED), dead_letters)
    return {"status": "stopped",
            "periods_released": release_dir.periods_released(manifest, output_dir),
            "periods_ingested": job.periods_seen(state),
            "pending": state["pending"] is not None,
            "state": state_dir, "output": output_dir}


def _run_watcher(job, watch_dir, state_dir, output_dir, until_period, poll_seconds,
                 in_format, period_col, beam_args, wait) -> None:
    # the job's options (the stores' settings: --s3_endpoint_url …, which the listing and
    # the state's reads in the DoFn need), on the in-process DirectRunner whatever runner
    # the periods' steps use
    options = pipeline_options([*beam_args, "--runner", "DirectRunner"])
    options.view_as(StandardOptions).streaming = True
    direct = options.view_as(DirectOptions)
    direct.direct_running_mode, direct.direct_num_workers = "in_memory", 1
    release = ReleaseCompletePeriods(job, watch_dir, state_dir, output_dir, in_format=in_format,
                                     period_col=period_col, until_period=until_period,
                                     beam_args=beam_args, wait=wait)
    with _stopping(), beam.Pipeline(options=options) as pipeline:
        _ = (pipeline
             | "Tick" >> Ticks(poll_seconds)
             | "OneKey" >> beam.WithKeys(lambda _: "stream")
             | "ListAndRelease" >> beam.ParDo(release))


@contextmanager
def _stopping() -> Iterator[None]:
    """SIGTERM handling around a stream; a :class:`StreamStopped` raised in the pipeline
    (Beam wraps it) ends the stream cleanly; a library error comes out unwrapped."""
    previous = {number: signal.signal(number, _on_stop_signal)
                for number in (signal.SIGTERM, signal.SIGINT)}
    _Stop.requested.clear()
    try:
        yield
    except Exception as exc:
        if not _is_stop(exc):
            raise _unwrap(exc) from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        _stop_state_samplers()


def _stop_state_samplers() -> None:
    """Stop any Beam state sampler still running.  A stop raised by the SIGTERM handler
    inside a bundle, or inside a sampler's ``start`` while it waits for its thread, leaves
    the ``StateSampler`` thread (not a daemon) running, and the process would never exit
    after its summary (seen in about half of the runs of
    ``test_sigterm_stops_cleanly_between_periods`` on a loaded machine)."""
    import gc

    from apache_beam.runners.worker import statesampler
    for obj in gc.get_objects():
        if isinstance(obj, statesampler.StateSampler) and not obj.finished:
            try:  # the stop may have come inside ``start`` (``started`` not yet set)
                obj.stop()
            except Exception:  # never started: nothing runs
                pass


def _on_stop_signal(signum, frame) -> None:
    """SIGTERM or Ctrl-C (SIGINT): stop at once if no step is running (the state is
    clean), else after the step; a second Ctrl-C interrupts at once."""
    name = signal.Signals(signum).name
    _Stop.requested.set()
    if signum == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        LOGGER.info("Ctrl-C: stopping after the period in progress (again to interrupt it)")
    if _Stop.busy.acquire(blocking=False):
        raise StreamStopped(name)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the errors it was raised from or while handling (Beam re-raises an
    error inside a bundle with its own message: a SIGTERM that lands while a bundle
    decodes its input becomes "Error decoding input stream …" from the stop)."""
    while exc is not None:
        yield exc
        exc = exc.__cause__ or exc.__context__


def _is_stop(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, a :class:`StreamStopped`."""
    return any(isinstance(seen, StreamStopped) or _STOP_MESSAGE in str(seen)
               for seen in _chain(exc))


def _unwrap(exc: BaseException) -> BaseException:
    """The library error a DoFn raised, out of Beam's wrapping (for a clean exit 2)."""
    return next((seen for seen in _chain(exc) if isinstance(seen, (InputError, StateError))),
                exc)
