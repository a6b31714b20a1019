"""The release lifecycle every synthesizer's jobs share.

Two forms, both all-or-nothing:

* :func:`release_whole_run` — a batch job (``run``): the pipeline writes every file into
  a private staging directory inside the output; only when it has succeeded are the
  files moved into place, ``manifest.json`` last.
* :func:`incremental_step` — one period of an incremental release (``step``),
  write-ahead:

  1. **own** the state (:class:`Ownership`: refused at once, or ``--wait``), before
     reading any data;
  2. **check** order, horizon and budget, and the input's fingerprint (a re-run of an
     ingested file reads nothing and spends nothing; without ``--period``, an input whose
     location was ingested before with other contents is refused: ``inputs``);
  3. **compute** the period from the data, writing private intermediates only into
     this run's own folder ``runs/<token>/`` (removed on every failure path);
  4. **commit** the next state version with the ledger charged and the period's
     release *pending* — by exclusive creation of version N+1 (fencing: a run whose
     state was superseded can never commit, hence never publish);
  5. **publish** the pending release (staged, moved into place, manifest last), each
     action only while no later version exists (a run paused past its ownership — a
     stopped process, an expired lease — while another resumed and went on publishes
     nothing, :meth:`StateDir.check_current`);
  6. **commit** version N+2 with nothing pending.

  A crash before 4 leaves the old state; after 4 a re-run of the step reads no data,
  draws no noise and spends nothing: it re-emits the same records from the saved plan.

:class:`StateDir` owns every path of a state directory; transforms receive paths.
``CONTINUAL_SYNTH_CRASH_AT=<phase>`` kills the process (SIGKILL) at one of
:data:`PHASES` — the fault-injection hook of the crash tests.
"""
from __future__ import annotations

import errno
import logging
import fcntl
import hashlib
import json
import math
import os
import signal
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, Union

from continual_synth.mechanisms.errors import InputError, StateBusy, StateError
from continual_synth.mechanisms.record_checks import check_mode
from continual_synth.pipelines.release import conditional_create, publication, release_dir
from continual_synth.transforms import packed_json, storage
from continual_synth.transforms.files import (ACCURACY_FILE_PREFIX, accuracy_file_names,
                                              digest_data_files, release_file_names)
from continual_synth.transforms.invalid_records import file_dead_letter, state_mode

__all__ = ["MANIFEST", "LOGGER", "CRASH_VARIABLE", "PHASES", "crash_point", "new_token",
           "REQUIRED_FIELDS", "CHAIN", "FILE_DIGESTS", "RESTORE", "ledger_totals", "sealed",
           "COMMAND_OF_KIND", "StateDir", "BUSY", "busy_message", "Lease", "Ownership",
           "RELEASE_FILE_PREFIX", "RELEASE_PREFIXES", "RELEASE_GLOBS", "release_listing",
           "check_fresh_output", "release_around", "check_release_alone", "staging",
           "release_whole_run", "period_span", "fingerprint", "IncrementalJob",
           "input_digests", "check_release_target", "check_release_intact",
           "incremental_step", "unrecorded_inputs", "NOT_RECORDED", "recorded",
           "PROGRESS_FIELDS", "check_same_settings", "new_state_document", "load_state",
           "relocate"]

MANIFEST = "manifest.json"
LOGGER = logging.getLogger("continual_synth")
CRASH_VARIABLE = "CONTINUAL_SYNTH_CRASH_AT"
#: phase boundaries of a step, in order (see the module docstring)
PHASES = ("owned", "computed", "committed", "staged", "published", "manifested", "done")


def crash_point(phase: str) -> None:
    """Fault injection: SIGKILL this process if ``$CONTINUAL_SYNTH_CRASH_AT`` names ``phase``."""
    if os.environ.get(CRASH_VARIABLE) == phase:
        os.kill(os.getpid(), signal.SIGKILL)


def new_token() -> str:
    """A run's identity: names its private folders and staging directories."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:12]}"


# ----------------------------------------------------------------------- the state


#: the fields every state version holds (a version without one is refused, named)
REQUIRED_FIELDS = ("kind", "state_id", "pending", "output_dir", "files", "fingerprints",
                   "synthesizer_state")
#: a version's record of its history (:func:`sealed`)
CHAIN = "chain"
#: the SHA-256 of every private file a version names (:meth:`StateDir.verify_files`)
FILE_DIGESTS = "file_digests"
#: what to do about a damaged or edited state (every such refusal ends with it)
RESTORE = ("it was damaged or edited outside continual-synth; restore the state directory "
           "from a backup (docs/object_stores.md, Backups)")


def ledger_totals(state: Dict) -> Tuple[float, int]:
    """(budget spent, number of charges) of a state version's ledger."""
    ledger = (state.get("synthesizer_state") or {}).get("ledger") or {}
    entries = ledger.get("entries") or []
    return float(sum(entry["amount"] for entry in entries)), len(entries)


def sealed(state: Dict, previous: Optional[bytes]) -> Dict:
    """``state`` with its ``chain``: the SHA-256 of the version committed before it
    (``previous``, its bytes; None for version 0) and its ledger's running total (spent,
    charges).  :meth:`StateDir.read` verifies both, so a ledger edited by hand — entries
    emptied, a charge removed, an older version copied over the newest — is refused
    instead of resetting the budget.  It protects against accidents and careless edits,
    not against someone who rewrites the whole chain (the state is private: guard it
    as such)."""
    spent, entries = ledger_totals(state)
    chain = {"previous_sha256": None if previous is None else
             hashlib.sha256(previous).hexdigest(), "spent": spent, "entries": entries}
    return {**{key: value for key, value in state.items() if key != CHAIN}, CHAIN: chain}


# The command family of a state's ``kind`` (for messages: "run 'continual-synth privhp init'").
COMMAND_OF_KIND = {"continual-privhp": "privhp"}


class StateDir:
    """Every path of an incremental release's state directory (private data), local or
    on an object store (``s3://``, ``gs://``)::

        STATE/lock                 ownership, local (an advisory lock; holder's pid and
                                   host inside)
        STATE/leases/NNNNNN.json   ownership, object store (a lease: see :class:`Lease`)
        STATE/stream-lock          the same two, held by a ``stream`` for as long as it
        STATE/stream-leases/       runs (one stream per state; its steps take the
                                   state's own ownership, as any step does)
        STATE/versions/vNNNNNN.json  the state, one file per committed version; the
                                   current state is the highest version
        STATE/runs/<token>/        private files one run wrote (people's history,
                                   synthetic people's codes, the baseline's increments);
                                   a version names the runs' folders it uses
        STATE/spool/<token>/       an event-time stream's period records while its step
                                   runs (:mod:`~continual_synth.pipelines.streaming.stream`)

    A version is created exclusively (:mod:`~continual_synth.pipelines.
    release.conditional_create`: a hard link locally, ``If-None-Match: *`` on S3,
    ``ifGenerationMatch=0`` on GCS), so of two runs that read version N at most one
    commits N + 1.  A store without conditional create (``hdfs://`` …) is refused.
    """

    def __init__(self, root: str):
        self.root = storage.absolute(root)
        self.local = storage.is_local(self.root)
        self.lock = storage.join(self.root, "lock")
        self.leases = storage.join(self.root, "leases")
        self.stream_lock = storage.join(self.root, "stream-lock")
        self.stream_leases = storage.join(self.root, "stream-leases")
        self.versions = storage.join(self.root, "versions")
        self.runs = storage.join(self.root, "runs")
        self._conditional = None

    def conditional_create(self) -> conditional_create.ConditionalCreate:
        """This store's conditional create (refused on a store without one)."""
        if self._conditional is None:
            self._conditional = conditional_create.for_path(self.root)
        return self._conditional

    def version_path(self, version: int) -> str:
        return storage.join(self.versions, f"v{version:06d}.json")

    def run_dir(self, token: str) -> str:
        return storage.join(self.runs, token)

    def path(self, relative: str) -> str:
        """Absolute path of a file a state version names relative to the root."""
        return storage.join(self.root, relative)

    def relative(self, path: str) -> str:
        if self.local:
            return os.path.relpath(path, self.root)
        return path[len(self.root) + 1:]

    def exists(self) -> bool:
        return bool(self._version_numbers())

    def _version_sizes(self) -> Dict[int, int]:
        """``{version number: bytes}`` of the versions, from one listing (an object store's
        LIST returns the sizes: no request per version)."""
        return {int(storage.basename(path)[1:-5]): size
                for path, size in storage.file_sizes(self.versions, "v*.json").items()}

    def _version_numbers(self):
        return sorted(self._version_sizes())

    def create(self, state: Dict) -> None:
        """Initialise: version 0 (exclusive: of two ``init`` runs one fails)."""
        create = self.conditional_create()  # refuses a store without conditional create
        if self._foreign_children() or storage.is_file(self.root):
            raise StateError(f"{self.root} already holds a state or other files; "
                             f"use a new directory")
        if self.local:
            storage.makedirs(self.runs)
            storage.makedirs(self.versions)
            open(self.lock, "a").close()
        if not create.create(self.version_path(0), packed_json.dumps(sealed(state, None))):
            raise StateError(f"{self.root} already holds a state (another init created it "
                             f"first); use a new directory")

    def _foreign_children(self) -> List[str]:
        """What the root holds besides another ``init``'s work in progress (its folders,
        its lock file, its store's conditional-create probe): with those alone the
        exclusive create of version 0 decides which ``init`` wins, and the loser is told
        so (``init --exists-ok`` then keeps the winner's state if it has its options)."""
        own = {storage.basename(self.runs), storage.basename(self.versions),
               storage.basename(self.lock)}
        return [name for name in storage.children(self.root)
                if name not in own and not name.startswith(conditional_create.PROBE_PREFIX)]

    def read(self, kind: Optional[str] = None) -> Tuple[int, Dict]:
        """``(version, state)`` of the current state; ``kind`` must match if given."""
        numbers = self._version_numbers()
        if not numbers:
            if storage.is_file(storage.join(self.root, "state.json")):
                raise StateError(f"{self.root}: holds a state in the old single-file format "
                                 f"(state.json), which this version does not resume; "
                                 f"finish it with the version that wrote it")
            raise StateError(f"{self.root}: no state here; run 'continual-synth "
                             f"{COMMAND_OF_KIND.get(kind, kind or 'window')} init' first")
        version = numbers[-1]
        if storage.size(self.version_path(version)) == 0:  # retired while listed?
            if self._version_numbers()[-1] == version:  # no: emptied by hand
                raise StateError(f"{self.version_path(version)} is empty: the state was "
                                 f"damaged outside continual-synth; restore it from a backup")
            return self.read(kind)
        path = self.version_path(version)
        state = release_dir.read_json(path)
        missing = [key for key in REQUIRED_FIELDS if key not in state] if \
            isinstance(state, dict) else list(REQUIRED_FIELDS)
        if missing:
            raise StateError(f"{path}: not a complete state (no {', '.join(missing)}): "
                             f"{RESTORE}")
        self._verify_chain(version, state)
        if kind is not None and state.get("kind") != kind:
            raise StateError(f"{self.root}: holds a {state.get('kind')} synthesizer state, "
                             f"not a {kind} one")
        return version, state

    def _verify_chain(self, version: int, state: Dict) -> None:
        """Refuse a current version whose ledger does not match its own record of it or
        the version before (see :func:`sealed`): a ledger edited by hand (its entries
        emptied, a charge removed) would otherwise reset the budget."""
        path = self.version_path(version)
        chain = state.get(CHAIN)
        previous_path = self.version_path(version - 1) if version > 0 else None
        previous_bytes = storage.read_bytes(previous_path) if previous_path and \
            storage.is_file(previous_path) else b""
        previous = packed_json.loads(previous_bytes) if previous_bytes else None
        if chain is None:
            if previous is not None and CHAIN in previous:
                raise StateError(f"the ledger of {path} does not match its history (the "
                                 f"version has no chain; the one before has): {RESTORE}")
            return  # a state written before versions were chained
        spent, entries = ledger_totals(state)
        if entries != chain["entries"] or not math.isclose(spent, chain["spent"],
                                                           rel_tol=1e-9, abs_tol=1e-12):
            raise StateError(f"the ledger of {path} does not match its history (its entries "
                             f"spend {spent:.6g} in {entries} charges; the version records "
                             f"{chain['spent']:.6g} in {chain['entries']}): {RESTORE}")
        if previous is None:  # the first version, or the one before retired (emptied)
            return
        if hashlib.sha256(previous_bytes).hexdigest() != chain["previous_sha256"]:
            raise StateError(f"the ledger of {path} does not match its history ("
                             f"{previous_path} is not the version it was committed after): "
                             f"{RESTORE}")
        before = previous.get(CHAIN, {}).get("spent", ledger_totals(previous)[0])
        if spent + 1e-12 < before:
            raise StateError(f"the ledger of {path} does not match its history (it spends "
                             f"{spent:.6g}, less than the {before:.6g} of the version before): "
                             f"{RESTORE}")

    def commit(self, read_version: int, state: Dict) -> int:
        """Create version ``read_version + 1`` holding ``state``; refuse if another run
        created it first (this run's view is stale: it must publish nothing)."""
        version = read_version + 1
        previous = storage.read_bytes(self.version_path(read_version))
        state = self.with_file_digests(state)
        if not self.conditional_create().create(self.version_path(version),
                                                packed_json.dumps(sealed(state, previous))):
            raise StateError(f"{self.root}: another step committed state version {version} "
                             f"first; this run read version {read_version} and stops "
                             f"without publishing")
        return version

    def check_current(self, read_version: int) -> None:
        """Refuse, as :meth:`commit` would, if another run committed a version after
        ``read_version``: this run's view is stale (it was paused or its ownership
        lapsed), so it must not touch the release either.  Called right before each
        publishing action; what is left unfenced is the moment between this check and
        that action."""
        newest = self._version_numbers()[-1]
        if newest > read_version:
            raise StateError(f"{self.root}: another step committed state version {newest} "
                             f"after the version {read_version} this run holds; it stops "
                             f"without publishing")

    def named_files(self, state: Dict) -> Dict[str, str]:
        """{path relative to the state: full path} of every file under the paths a
        version names (``files``: a run's folders and files)."""
        out = {}
        for relative in state["files"].values():
            full = self.path(relative)
            if storage.is_file(full):
                out[relative] = full
                continue
            for path in storage.list_files(full):
                out[self.relative(path)] = path
        return out

    def with_file_digests(self, state: Dict) -> Dict:
        """``state`` with the SHA-256 of every file it names (``file_digests``), so that
        a later run trusts none of them unchecked (:meth:`verify_files`).  A file named
        by the version before keeps the digest recorded when it was written (read only
        once)."""
        known = state.get(FILE_DIGESTS) or {}
        digests = {relative: known.get(relative) or
                   hashlib.sha256(storage.read_bytes(full)).hexdigest()
                   for relative, full in sorted(self.named_files(state).items())}
        return {**state, FILE_DIGESTS: digests}

    def verify_files(self, version: int, state: Dict) -> None:
        """Refuse, before anything is read or charged, a state whose private files are
        missing or are not what its version recorded (garbage in a pending period's
        saved people, a history file truncated): every step would otherwise fail on it
        after charging its period, or publish from damaged files.  States written before
        the digests were recorded are not checked."""
        for relative, digest in sorted((state.get(FILE_DIGESTS) or {}).items()):
            full = self.path(relative)
            if not storage.is_file(full):
                problem = "is missing"
            elif hashlib.sha256(storage.read_bytes(full)).hexdigest() != digest:
                problem = "does not hold the bytes it was written with"
            else:
                continue
            pending = state.get("pending")
            held = (f"period {pending['period']} is charged and waits for it: once it is "
                    f"restored, the same step publishes it without charging again"
                    if pending else "nothing was read or charged")
            raise StateError(f"{full} {problem} (state version "
                             f"{self.version_path(version)} names it): restore the state "
                             f"directory from a backup (docs/object_stores.md, Backups); "
                             f"{held}")

    @staticmethod
    def named_runs(state: Dict) -> set:
        """The run folders (tokens) a state version names."""
        return {relative.split("/")[1] for relative in state["files"].values()}

    def retire_old_versions(self) -> None:
        """Empty every version before the previous one, after a step has completed (never
        on a refused or failed step, which must leave the state byte-identical).

        A retired version is emptied, not removed: its name must stay taken, or a stale
        run that read it long ago could still create the next one (fencing).  So the
        state directory grows by two empty files per step, not by two states.  The sizes
        come from the one listing (a request per version made a step on an object store
        cost two more requests for every step before it)."""
        sizes = self._version_sizes()
        for number in sorted(sizes)[:-2]:
            if sizes[number]:
                self.conditional_create().put(self.version_path(number), b"")

    def collect_garbage(self, state: Dict) -> None:
        """Remove the run folders the current state does not name (left by runs that
        crashed or were superseded).  Only the state's owner calls this; every run
        writes only while it owns the state, so no live run's files are removed."""
        used = self.named_runs(state)
        for name in storage.children(self.runs):
            if name not in used and not name.startswith("."):
                storage.remove_tree(storage.join(self.runs, name))


BUSY = {  # role → (who holds the state, what to do)
    "step": ("another step owns this state", "retry when it has finished"),
    "stream": ("another stream is releasing into this state",
               "run one stream per state (a second would take some of the periods' files or "
               "records and release those periods without them): stop that one first"),
}


def busy_message(root: str, role: str, holder: str) -> str:
    """The refusal when ``role``'s ownership of the state at ``root`` is held."""
    holder_is, advice = BUSY[role]
    return (f"{root}: {holder_is} ({holder}); nothing was read or written — {advice}, or "
            f"pass --wait SECONDS")


class Lease:
    """Exclusive ownership of a folder on an object store, where there is no ``flock``:
    numbered lease objects created by conditional create::

        DIR/NNNNNN.json      lease N: the owner's token, pid, host, and when it expires
        DIR/NNNNNN.released  lease N given back

    The lease is free when the highest-numbered one is released or expired; a run takes
    it by creating lease N + 1 (of several, exactly one succeeds).  The new owner tidies
    leases N − 1 and N away, so a run that listed long ago (paused between its listing
    and its create) can create a number that was tidied; the highest lease is never
    tidied, so such a run finds a higher lease when it lists again after its create, and
    gives its own back (:meth:`_outbid`).  The owner renews its
    lease every ``seconds / 3`` from a thread, so a live step keeps it however long it
    runs while a killed one (kill -9, a lost VM) blocks others for at most ``seconds``.
    An expired owner that still runs cannot do harm: the state's commits are fenced.
    """

    SECONDS = 120.0
    POLL_SECONDS = 2.0  # a LIST and a GET of the store per look: not 5 a second
    PUBLISH_WAIT = 3600.0  # a whole run waits this long for another one's publication

    def __init__(self, directory: str, create: conditional_create.ConditionalCreate,
                 wait: float = 0.0, seconds: Optional[float] = None, role: str = "step"):
        self.directory, self._create, self.wait = directory, create, wait
        self.role = role
        self.seconds = self.SECONDS if seconds is None else seconds
        self.number = None
        self._stop = threading.Event()
        self._renewer = None

    def _path(self, number: int, suffix: str = "json") -> str:
        return storage.join(self.directory, f"{number:06d}.{suffix}")

    def _document(self) -> bytes:
        holder = (f"pid {os.getpid()} on {socket.gethostname()} since "
                  f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
        return release_dir.json_bytes({"holder": holder,
                                       "expires": time.time() + self.seconds})

    def _holder(self, number: int) -> Optional[str]:
        """Who holds lease ``number``, or None if it is released, expired or gone."""
        if storage.is_file(self._path(number, "released")):
            return None
        try:
            lease = release_dir.read_json(self._path(number))
        except StateError:  # being written: held
            return "another process"
        if lease is None or lease["expires"] < time.time():
            return None
        until = time.strftime("%H:%M:%SZ", time.gmtime(lease["expires"]))
        return f"{lease['holder']}; its lease runs to {until} unless renewed, so a " \
               f"{self.role} that died frees the state then"

    def acquire(self, what: str) -> "Lease":
        deadline = time.monotonic() + self.wait
        while True:
            names = [storage.basename(p) for p in storage.list_files(self.directory, "*.json")]
            highest = max((int(name[:-5]) for name in names), default=0)
            holder = self._holder(highest) if highest else None
            if holder is None:
                if self._create.create(self._path(highest + 1), self._document()):
                    if not self._outbid(highest + 1):
                        self.number = highest + 1
                        break
                    storage.remove(self._path(highest + 1))  # a stale listing's number
                continue  # another run took it first: look again
            if time.monotonic() >= deadline:
                raise StateBusy(busy_message(what, self.role, holder))
            time.sleep(self.POLL_SECONDS)
        for old in range(max(highest - 1, 1), highest + 1):  # only the owner tidies
            storage.remove(self._path(old))
            storage.remove(self._path(old, "released"))
        self._renewer = threading.Thread(target=self._renew, daemon=True)
        self._renewer.start()
        return self

    def _outbid(self, number: int) -> bool:
        """Whether a lease above ``number`` exists: ``number`` was created from a stale
        listing, after an owner of a higher lease had tidied it away."""
        return any(int(storage.basename(p)[:-5]) > number
                   for p in storage.list_files(self.directory, "*.json"))

    def _renew(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            self._create.put(self._path(self.number), self._document())

    def release(self) -> None:
        self._stop.set()
        self._renewer.join()
        self._create.put(self._path(self.number, "released"), b"")


class Ownership:
    """Exclusive ownership of a state directory while one step runs (``role="step"``),
    or while one ``stream`` runs (``role="stream"``: a lock of its own, so the stream's
    steps still take the step ownership and a manual ``step`` meanwhile waits for it).

    Locally, an advisory ``flock`` on ``STATE/lock``: the kernel releases it when the
    holder exits, however it dies (kill -9 included), so a lock is never left behind.
    The holder writes its pid, host and start time into the file for the refusal
    message and empties it on release.  On an object store, a :class:`Lease` in
    ``STATE/leases/``.  Ownership alone does not make a commit safe (a lock can be
    lost: a file system without locks, an expired lease, an operator removing it); the
    fencing of :meth:`StateDir.commit` does.
    """

    POLL_SECONDS = 0.05

    def __init__(self, state_dir: StateDir, wait: float = 0.0, role: str = "step"):
        if wait is None or not wait >= 0 or wait == float("inf"):
            raise InputError(f"--wait must be a finite number of seconds ≥ 0, not {wait}")
        if role not in BUSY:
            raise ValueError(f"role must be one of {sorted(BUSY)}, not {role!r}")
        self.state_dir, self.wait, self.role = state_dir, float(wait), role
        self._handle = None
        self._lease = None

    def __enter__(self) -> "Ownership":
        stream = self.role == "stream"
        if not self.state_dir.local:
            leases = self.state_dir.stream_leases if stream else self.state_dir.leases
            self._lease = Lease(leases, self.state_dir.conditional_create(), self.wait,
                                role=self.role).acquire(self.state_dir.root)
            return self
        path = self.state_dir.stream_lock if stream else self.state_dir.lock
        if stream and os.path.isdir(self.state_dir.root):
            open(path, "a").close()  # a state made before streams had a lock of their own
        if not os.path.exists(path):
            raise StateError(f"{self.state_dir.root}: no state here (no lock file); run "
                             f"'continual-synth ... init' first")
        handle = open(path, "r+")
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    handle.close()
                    raise
                if time.monotonic() >= deadline:
                    holder = handle.read().strip() or "another process"
                    handle.close()
                    raise StateBusy(busy_message(self.state_dir.root, self.role, holder))
                time.sleep(self.POLL_SECONDS)
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()} since "
                     f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc) -> None:
        if self._lease is not None:
            lease, self._lease = self._lease, None
            lease.release()
            return
        handle, self._handle = self._handle, None
        handle.seek(0)
        handle.truncate()
        handle.flush()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


# ----------------------------------------------------------------------- the output


#: the names a release's data files start with (every synthesizer's: ``synthetic-t0001-
#: s00000.parquet``, a one-shot ``privhp run``'s ``synthetic-s00000.parquet``)
RELEASE_FILE_PREFIX = "synthetic-"
#: the names of everything a release directory holds besides its manifest: the data
#: files and the accuracy files of a tabular release (``accuracy-t0001.json``)
RELEASE_PREFIXES = (RELEASE_FILE_PREFIX, ACCURACY_FILE_PREFIX)
#: the globs of a whole run's files that a killed publication may have left in place
RELEASE_GLOBS = tuple(f"{prefix}*" for prefix in RELEASE_PREFIXES)


def release_listing(output_dir: str) -> Dict:
    """The manifest's lists of a release directory's files: ``files``, the data files,
    and ``accuracy_files``, the accuracy files, where there are any."""
    accuracy = accuracy_file_names(output_dir)
    return {"files": release_file_names(output_dir),
            **({"accuracy_files": accuracy} if accuracy else {})}


def _hidden(name: str) -> bool:
    """A hidden entry: a job's staging folder (``.staging-*``), lease (``.leases``), probe
    or temporary file.  Readers skip them and a manifest never lists them."""
    return name.startswith(".")


def _some(names: List[str], shown: int = 3) -> str:
    """``a, b, c and 4 more`` (what a message names of a long list)."""
    more = len(names) - shown
    return ", ".join(names[:shown]) + (f" and {more} more" if more > 0 else "")


def check_fresh_output(output_dir: str, replaces_leftovers: bool = False) -> None:
    """Refuse an ``--output`` that is not new or empty (nothing written, nothing read):
    one that holds a release (``manifest.json``) or anything but hidden entries (a killed
    job's ``.staging-*`` folder, which readers skip and which may be a live run's).  A
    whole run (``replaces_leftovers``) also takes the ``synthetic-*`` and ``accuracy-*``
    files that a run killed while publishing moved into place before its manifest: it
    replaces them.  A
    step's first release does not (they are another release's; its manifest would list
    them), nor does the ``demo``."""
    if storage.is_file(storage.join(output_dir, MANIFEST)):
        raise InputError(f"{output_dir} already holds a release (manifest.json); "
                         f"choose an empty output directory")
    strangers = [name for name in storage.children(output_dir) if not _hidden(name) and not (
        replaces_leftovers and name.startswith(RELEASE_PREFIXES))]
    if strangers:
        raise InputError(f"--output {output_dir} is not empty: it holds {_some(strangers)}; "
                         f"a release goes into a new or empty directory, so that nothing "
                         f"else is published with it")


def release_around(path: str) -> Optional[str]:
    """The release directory that ``path`` is or lies inside (the nearest folder, ``path``
    included, that holds a ``manifest.json``; symbolic links followed), or None.  One
    existence check per folder up to the root or the bucket."""
    for folder in storage.folder_and_parents(path):
        if storage.is_file(storage.join(folder, MANIFEST)):
            return folder
    return None


def check_release_alone(output_dir: str) -> None:
    """Refuse to step on when the release directory a state publishes into holds anything
    besides the release: its ``manifest.json``, its ``synthetic-*`` files (those of an
    interrupted publication included, which the re-run publishes) and hidden entries
    (staging folders, temporary files).  A data file put there would be listed in the
    next manifest's ``files`` as the release's; a report or notes would be published
    with it."""
    strangers = [name for name in storage.children(output_dir)
                 if not (_hidden(name) or name == MANIFEST
                         or name.startswith(RELEASE_PREFIXES))]
    if strangers:
        raise StateError(f"--output {output_dir} holds {_some(strangers)}, not files of the "
                         f"release this state publishes there (a release directory holds "
                         f"only its {MANIFEST}, {RELEASE_FILE_PREFIX}* and "
                         f"{ACCURACY_FILE_PREFIX}* files, and the "
                         f"next manifest would list a data file there as the release's); "
                         f"move them out, then run the step again")


@contextmanager
def staging(output_dir: str, prefix: str = "") -> Iterator[str]:
    """A private staging directory inside ``output_dir`` (hidden, skipped by readers),
    removed if the block fails — with ``output_dir`` itself if this call made it and it
    is empty again, so a failed first run leaves nothing; on success the caller
    publishes it."""
    made = not storage.exists(output_dir)
    storage.makedirs(output_dir)
    path = storage.join(output_dir, f".staging-{prefix}{new_token()}")
    try:
        storage.makedirs(path)
        # a hidden marker: on an object store the prefix exists from now on even if the
        # job writes nothing, so that its removal by another run is visible
        # (publish_staged_files); a full disk may refuse even this
        storage.write_bytes(storage.join(path, ".staged"), b"staging\n")  # (S3: not empty)
        yield path
    except BaseException:
        storage.remove_tree(path)
        if made:
            storage.remove_if_empty(output_dir)
        raise


@contextmanager
def _output_claim(output_dir: str) -> Iterator[None]:
    """Serialise whole-run publications into one output directory: locally an advisory
    lock on the directory itself (nothing is added to the release); on an object store
    a :class:`Lease` in the hidden ``OUTPUT/.leases/``, removed once the output holds a
    manifest, whichever run published it (later runs are refused by the manifest).  On
    a store without conditional create (``hdfs://``) publications are not serialised."""
    if not storage.is_local(output_dir):
        try:
            create = conditional_create.for_path(output_dir)
        except StateError:
            yield
            return
        leases = storage.join(output_dir, ".leases")
        lease = Lease(leases, create, wait=Lease.PUBLISH_WAIT).acquire(output_dir)
        try:
            yield
        finally:
            lease.release()
            if storage.exists(storage.join(output_dir, MANIFEST)):
                storage.remove_tree(leases)  # also when this run lost the race to publish
        return
    fd = os.open(output_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def release_whole_run(output_dir: str, write: Callable[[str, str], None],
                      extras: Dict, empty_message: str) -> Dict:
    """The staged whole-run release of a batch job.

    ``write(staging_dir, plan_path)`` runs the job's pipeline: it writes the data files
    into ``staging_dir`` and the manifest as a JSON document at ``plan_path`` (hidden,
    inside the staging directory), or no manifest if the input held no records
    (``empty_message``).  The files are published only if it succeeded, then
    ``manifest.json`` (its document updated by ``extras`` and finished by
    :func:`continual_synth.pipelines.release.publication.manifest`), last.  Of two runs into
    one output directory, the second to publish is refused and publishes nothing.
    """
    publication.source_date()  # the manifest's time, checked before the data is read
    check_fresh_output(output_dir, replaces_leftovers=True)
    with staging(output_dir) as staged:
        plan_path = storage.join(staged, ".manifest.json")
        write(staged, plan_path)
        manifest = release_dir.read_json(plan_path)
        if manifest is None:
            raise InputError(empty_message)
        storage.remove(plan_path)
        crash_point("staged")
        with _output_claim(output_dir):
            check_fresh_output(output_dir, replaces_leftovers=True)
            # files without a manifest are a crashed publication's: never a release
            release_dir.publish_staged_files(staged, output_dir, replace_glob=RELEASE_GLOBS)
            crash_point("published")
            manifest = publication.manifest(
                {**manifest, **extras, **release_listing(output_dir)})
            release_dir.write_json_atomic(storage.join(output_dir, MANIFEST), manifest)
    LOGGER.info("released %s → %s", _periods_text(manifest), output_dir)
    return manifest


def _periods_text(manifest: Dict) -> str:
    """``periods 1..12`` of a whole-run manifest, or ``the synthetic data``."""
    periods = release_dir.periods_released(manifest, MANIFEST)
    if periods:
        return period_span(periods)
    return "the synthetic data"


def period_span(periods: List[int]) -> str:
    """``period 3`` or ``periods 1..3`` (the first and last of ``periods``)."""
    if len(periods) == 1:
        return f"period {periods[0]}"
    return f"periods {periods[0]}..{periods[-1]}"


# ------------------------------------------------------------------- the step


def fingerprint(path: str) -> str:
    """SHA-256 of the input's absolute path and bytes: recognises a re-run of a step (the
    same file again).  Identical contents at another path are another period's file;
    ``--period`` settles any doubt."""
    return digest_data_files(hashlib.sha256(storage.absolute(path).encode()),
                             path).hexdigest()


class IncrementalJob:
    """What a synthesizer family supplies to :func:`incremental_step` (subclass it).

    ``state`` is the saved JSON document; its common fields are ``kind``, ``seed``,
    ``sampler``, ``format``, ``fingerprints``, ``pending``, ``output_dir`` and
    ``files`` (name → path relative to the state root of the private files in use);
    ``contents`` (content digest → period) and ``inputs`` (resolved input location →
    the last period ingested from it) are added by the steps (absent from older states;
    ``inputs_from``, the first period ``inputs`` recorded, when it is not 1:
    :func:`unrecorded_inputs`).
    """

    kind: str = ""

    def empty_period_valid(self, state: Dict) -> bool:
        """Whether a period without records is a valid period of this state: its
        ``step`` takes a file with the columns of :meth:`empty_period` and no rows and
        releases the period like any other (the event-time stream releases a period in
        which no record arrived through that same step).  False for a synthesizer
        whose every period needs records."""
        return False

    def empty_period(self, state: Dict, period: int):
        """A table with no rows that this job's step takes as ``period`` without
        records: the columns the step requires; an :class:`InputError` saying why for a
        period the job cannot release without records."""
        raise InputError(f"period {period}: no records arrived, and a "
                         f"{self.kind or state.get('kind')} period needs records")

    def check_event_stream(self, state: Dict) -> None:
        """Refuse, before the stream writes anything, a state (or the document ``init``
        would write) that an event-time stream cannot release.  The stream releases
        every period 1..T when the watermark passes its end, whether or not any record
        arrived (so that when a period is released never depends on the data): it needs
        the horizon T, and a period without records must be one the step takes."""
        if self.horizon(state) is None:
            raise InputError("an event-time stream (--pubsub-subscription, --kafka-topic) "
                             "releases every period 1..T when the watermark passes its "
                             "end, so it needs --horizon T (--watch needs none)")
        if not self.empty_period_valid(state):
            raise InputError(f"an event-time stream releases every period when the "
                             f"watermark passes its end, records or not, and a "
                             f"{self.kind or state.get('kind')} period needs records")

    def canonical(self, document: Dict) -> Dict:
        """``document`` (a saved state or what ``init`` would write) with its options in
        today's form, so that a state saved by an earlier version compares equal to the
        same options given now (a family whose configuration gained fields overrides it)."""
        return document

    def synthesizer(self, state: Dict) -> Tuple:
        """``(synthesizer, its state)`` of a saved state (the protocol of
        :mod:`continual_synth.mechanisms.synthesizer`)."""
        raise NotImplementedError

    def periods_seen(self, state: Dict) -> int:
        return self.synthesizer(state)[1].period

    def horizon(self, state: Dict) -> Optional[int]:
        return self.synthesizer(state)[0].horizon

    def check_step(self, state: Dict, period: int) -> None:
        """Budget (and any synthesizer rule) before reading data."""
        synthesizer, synthesizer_state = self.synthesizer(state)
        synthesizer.check_step(synthesizer_state, period)

    def check_invalid_records(self, state: Dict, mode: str, why: str = "") -> None:
        """Refuse, before anything is read, a mode (``--invalid-records``) this state's
        synthesizer cannot step in (``why``: how the job came to that mode)."""

    def compute(self, state: Dict, input_path: str, in_format: Optional[str], period: int,
                store: StateDir, run_dir: str, beam_args, invalid_records: str = "refuse"
                ) -> Dict:
        """Read the period, draw its noise: the new state, with ``pending`` set (the
        release to publish) and ``files`` naming paths under ``run_dir``; an invalid
        record refuses the period or is dropped (``invalid_records``: refuse, drop; the
        dropped records' dead-letter parts go to
        :func:`~continual_synth.transforms.invalid_records.parts_folder` of ``run_dir``).
        The two halves: :meth:`period_statistics`, then :meth:`advance`."""
        statistics, files = self.period_statistics(state, input_path, in_format, period,
                                                   store, run_dir, beam_args, invalid_records)
        return self.advance(state, period, statistics, files, store, run_dir)

    def period_statistics(self, state: Dict, input_path: str, in_format: Optional[str],
                          period: int, store: StateDir, run_dir: str, beam_args,
                          invalid_records: str) -> Tuple[Any, Dict[str, str]]:
        """The period's exact statistics from its input (a Beam pipeline; no noise), and
        the private files it wrote under ``run_dir`` (the state's ``files`` entries they
        replace, as paths relative to the state directory)."""
        raise NotImplementedError

    def advance(self, state: Dict, period: int, statistics: Any, files: Dict[str, str],
                store: StateDir, run_dir: str) -> Dict:
        """The synthesizer's step on the period's ``statistics`` (the protocol's
        :meth:`~continual_synth.mechanisms.synthesizer.Synthesizer.step_period`: its noise,
        its charge to the ledger): the new state, ``files`` merged in, ``pending`` set."""
        raise NotImplementedError

    def emit(self, state: Dict, staging_dir: str, store: StateDir, run_dir: str,
             beam_args) -> Tuple[Union[str, Tuple[str, ...], None], Dict]:
        """Write the pending release's files into ``staging_dir``; return (the glob or
        globs of output files they replace, or None if nothing is emitted; the state's ``files``
        updated with anything written under ``run_dir``)."""
        raise NotImplementedError

    def manifest(self, state: Dict) -> Dict:
        raise NotImplementedError

    def published_periods(self, state: Dict) -> List[int]:
        """The periods whose records the pending release publishes: its own period (a
        synthesizer whose first release covers earlier periods too says so)."""
        return [state["pending"]["period"]]

    def summary(self, state: Dict, pending: Dict, released: bool, resumed: bool) -> Dict:
        """What the command prints: ``state`` is the committed one, ``pending`` the
        release just published."""
        raise NotImplementedError

    @staticmethod
    def budget_spent(state: Dict) -> float:
        """The privacy budget ``state``'s ledger has spent (the manifest's figure), read
        from the ledger alone, not the whole synthesizer state."""
        from continual_synth.mechanisms.accounting import BudgetLedger
        return BudgetLedger.from_dict(state["synthesizer_state"]["ledger"]).spent


def _already_released(period: int) -> Dict:
    return {"status": "already-released", "period": period,
            "message": f"period {period} was already ingested; nothing read, nothing spent"}


class _Tee:
    """Feeds one pass over the bytes into several hashlib digests."""

    def __init__(self, *digests):
        self.digests = digests

    def update(self, block: bytes) -> None:
        for digest in self.digests:
            digest.update(block)


def input_digests(path: str) -> Tuple[str, str]:
    """``(fingerprint, content digest)`` of an input in one pass: :func:`fingerprint` (its
    path and bytes: a re-run of the same file) and the SHA-256 of its bytes alone (the
    same records under another path)."""
    located = hashlib.sha256(storage.absolute(path).encode())
    content = hashlib.sha256()
    digest_data_files(_Tee(located, content), path)
    return located.hexdigest(), content.hexdigest()


def check_release_target(state: Dict, output_dir: str) -> None:
    """Refuse ``output_dir`` if the state already releases somewhere else."""
    if state["output_dir"] not in (None, storage.absolute(output_dir)):
        raise StateError(f"this state releases into {state['output_dir']}, not {output_dir}")


def check_release_intact(job: "IncrementalJob", state: Dict, output_dir: str) -> None:
    """Refuse to step on if a step of this state completed (its manifest written) but
    the release directory has since lost its manifest or a file it lists: the next
    manifest would announce periods whose records are gone."""
    completed = job.periods_seen(state) - (state["pending"] is not None)
    if state["output_dir"] is None or completed < 1:
        return
    manifest = release_dir.read_json(storage.join(output_dir, MANIFEST))
    if manifest is None:
        raise StateError(f"{output_dir}: the release this state published there has no "
                         f"{MANIFEST} (removed or moved?); restore the release directory "
                         f"before the next step")
    listed = set(manifest.get("files", [])) | set(manifest.get("accuracy_files", []))
    missing = sorted(listed - set(release_file_names(output_dir))
                     - set(accuracy_file_names(output_dir)))
    if missing:
        raise StateError(f"{output_dir}: {len(missing)} file(s) of the published release "
                         f"are missing ({missing[0]} …); restore them before the next step")


def incremental_step(job: IncrementalJob, state_dir: str, input_path: str, output_dir: str,
                     *, in_format: Optional[str] = None, period: Optional[int] = None,
                     beam_args=(), wait: float = 0.0,
                     invalid_records: Optional[str] = None) -> Dict:
    """Ingest the next period (see the module docstring); return a summary whose
    ``status`` says what happened.  ``invalid_records``: refuse the period at its first
    invalid record or drop each one (the records dropped go to the dead letter once the
    period is committed: :func:`~continual_synth.transforms.invalid_records.
    file_dead_letter`); default the state's."""
    publication.source_date()  # the manifest's time, checked before anything is charged
    store = StateDir(state_dir)
    store.read(job.kind)  # a clear message for a missing or mismatched state
    if invalid_records is not None:
        check_mode(invalid_records)
    with Ownership(store, wait):
        crash_point("owned")
        version, state = store.read(job.kind)
        store.verify_files(version, state)
        if state["output_dir"] is None:
            check_fresh_output(output_dir)
        check_release_target(state, output_dir)
        check_release_intact(job, state, output_dir)
        if state["output_dir"] is not None:
            check_release_alone(output_dir)
        pending = state["pending"]
        digests = input_digests(input_path) if input_path is not None and \
            storage.exists(input_path) else None
        seen = state["fingerprints"].get(digests[0]) if digests else None
        if pending is not None:
            # resume only the step that was interrupted: its file (same path and bytes) or
            # its period given explicitly; any other input is another period's
            if pending["period"] not in (period, seen) or period not in (None, pending["period"]):
                raise StateError(f"period {pending['period']} was computed but not published "
                                 f"(interrupted run); re-run the step with that period's file "
                                 f"(or with --period {pending['period']}) to publish it first")
            return _publish(job, store, version, state, output_dir, beam_args, resumed=True)
        target = _check_order(job, state, period, seen)  # seen: this same file's period
        if isinstance(target, dict):
            return target
        if period is None:
            _check_not_rerun(state, input_path, target)
            _warn_unrecorded_inputs(job, state)
        job.check_step(state, target)  # horizon and budget, before reading any data
        mode = invalid_records or state_mode(state)
        job.check_invalid_records(state, mode)
        digests = digests or input_digests(input_path)  # a missing input: named here
        copied = state.get("contents", {}).get(digests[1])
        if period is None and copied is not None:
            raise StateError(f"{input_path} holds the same bytes as the file ingested as "
                             f"period {copied} (from another path): not taken as period "
                             f"{target}; if it really is period {target}'s, pass "
                             f"--period {target}")
        LOGGER.info("reading %s as period %d of %s", input_path, target,
                    job.horizon(state) or "an open horizon")
        token = new_token()
        run_dir = store.run_dir(token)
        store.collect_garbage(state)
        try:
            storage.makedirs(run_dir)
            new_state = job.compute(state, input_path, in_format, target, store, run_dir,
                                    beam_args, invalid_records=mode)
            new_state["fingerprints"] = {**state["fingerprints"], digests[0]: target}
            new_state["contents"] = {**state.get("contents", {}), digests[1]: target}
            new_state["inputs"] = {**state.get("inputs", {}),
                                   storage.resolved(input_path): target}
            unrecorded = unrecorded_inputs(job, state)
            if unrecorded:
                new_state["inputs_from"] = unrecorded + 1
            new_state["output_dir"] = storage.absolute(output_dir)
            crash_point("computed")
            _check_unchanged(input_path, digests)
            version = store.commit(version, new_state)  # commit point: ledger charged
        except BaseException:
            storage.remove_tree(run_dir)
            raise
        file_dead_letter(state_dir, run_dir, target, input_path)
        if token not in store.named_runs(new_state):  # scratch only
            storage.remove_tree(run_dir)
        crash_point("committed")
        return _publish(job, store, version, new_state, output_dir, beam_args, resumed=False)


def _check_unchanged(input_path: str, digests: Tuple[str, str]) -> None:
    """Refuse to commit a period whose input changed while the step read it (a part landed
    in the folder, a file was rewritten): what was read is not what the fingerprint
    names, so a re-run could not tell it from a new period.  Nothing is committed; the
    step run again once the input is complete reads it whole."""
    if input_digests(input_path) != digests:
        raise StateError(f"{input_path} changed while this step read it (a file landed or was "
                         f"rewritten): nothing was committed or spent; run the step again "
                         f"once the input is complete")


def _check_not_rerun(state: Dict, input_path: str, target: int) -> None:
    """Refuse, when no ``--period`` is given, an input whose location (resolved: absolute,
    links followed) was ingested as an earlier period with other contents: most likely the
    same step run again after its file or folder changed (a part landed in the folder
    while the first run read it), not the next period; its records would be counted
    twice.  ``--period`` says it is the next one (one landing path overwritten every
    period).  A state written before ``inputs`` were recorded has none to compare for
    its early periods: :func:`_warn_unrecorded_inputs`."""
    ingested = state.get("inputs", {}).get(storage.resolved(input_path))
    if ingested is not None:
        raise StateError(f"{input_path} was ingested as period {ingested} with other "
                         f"contents (it changed since: a re-run of that step?); not taken as "
                         f"period {target}; if it is period {target}, pass --period {target}")


def unrecorded_inputs(job: IncrementalJob, state: Dict) -> int:
    """How many periods (1..k) a state ingested before it recorded each period's input
    location (``inputs``, which the re-run check reads): those of a state saved by a
    version before ``inputs``, as counted when the first step since recorded one
    (``inputs_from``: the first period recorded)."""
    if "inputs" not in state:
        return job.periods_seen(state)
    return int(state.get("inputs_from", 1)) - 1


def _warn_unrecorded_inputs(job: IncrementalJob, state: Dict) -> None:
    """One warning, for a step without ``--period`` on a state whose early periods'
    input locations were never recorded (:func:`unrecorded_inputs`).  They cannot be
    recovered from what such a state holds: its ``fingerprints`` digest each input's
    path *with the bytes it held then*, so a path whose contents changed since (a folder
    that gained a part, a landing file overwritten) matches none of them, and
    ``contents`` digest the bytes alone.  A re-run of one of those periods' steps on its
    changed input would be taken as the next period; ``--period`` is checked against
    the periods ingested, whatever the input's history."""
    unrecorded = unrecorded_inputs(job, state)
    if unrecorded:
        LOGGER.warning("warning: %s of this state %s ingested before states recorded "
                       "each period's input location, so a step without --period cannot "
                       "tell a re-run of their steps on a changed input (a folder that "
                       "gained a file) from the next period; pass --period on each step "
                       "to have the period checked (periods from %d on are recorded)",
                       period_span(list(range(1, unrecorded + 1))),
                       "was" if unrecorded == 1 else "were", unrecorded + 1)


def _check_order(job: IncrementalJob, state: Dict, period: Optional[int],
                 same_file: Optional[int]):
    """The period to ingest, or the summary of an already ingested one (``same_file``:
    the period the same file was ingested as, if it was)."""
    seen, horizon = job.periods_seen(state), job.horizon(state)
    target = seen + 1
    if period is not None:
        if period < 1:
            raise InputError(f"period {period} does not exist: periods start at 1")
        if horizon is not None and period > horizon:
            raise InputError(f"period {period} is beyond the horizon T={horizon}")
        if period <= seen:
            return _already_released(period)
        if period != target:
            raise StateError(f"period {period} is out of order: the next period is {target}")
    elif same_file is not None:
        return _already_released(same_file)
    return target


def _publish(job: IncrementalJob, store: StateDir, version: int, state: Dict,
             output_dir: str, beam_args, resumed: bool) -> Dict:
    """Emit the pending release, publish it and the manifest, commit nothing pending."""
    token = new_token()
    run_dir = store.run_dir(token)
    state_id = state["state_id"]
    try:
        storage.makedirs(run_dir)
        for stale in storage.children(output_dir):
            if stale.startswith(f".staging-{state_id}-"):  # a crashed step of this state's
                storage.remove_tree(storage.join(output_dir, stale))
        with staging(output_dir, prefix=f"{state_id}-") as staged:
            try:
                replaces, files = job.emit(state, staged, store, run_dir, beam_args)
            except Exception:
                # a run paused past its ownership finds its private files collected by
                # the run that went on: say that, not the missing file
                store.check_current(version)
                raise
            crash_point("staged")
            store.check_current(version)  # a run paused past its ownership touches nothing
            if replaces is not None:
                release_dir.publish_staged_files(staged, output_dir, replace_glob=replaces)
            else:
                storage.remove_tree(staged)
        crash_point("published")
        store.check_current(version)
        manifest = publication.manifest(
            {**job.manifest(state), **release_listing(output_dir)})
        release_dir.write_json_atomic(storage.join(output_dir, MANIFEST), manifest)
        crash_point("manifested")
        horizon = job.horizon(state) or "an open horizon"
        if replaces is not None:
            LOGGER.info("released %s of %s → %s", period_span(job.published_periods(state)),
                        horizon, output_dir)
        else:
            LOGGER.info("ingested period %d of %s (nothing released yet)",
                        state["pending"]["period"], horizon)
        done = {**state, "pending": None, "files": files}
        store.commit(version, done)
    except BaseException:
        storage.remove_tree(run_dir)
        raise
    store.collect_garbage(done)
    store.retire_old_versions()
    crash_point("done")
    return job.summary(done, state["pending"], released=replaces is not None,
                       resumed=resumed)


#: a manifest's value for a setting the state does not hold (written by an earlier version)
NOT_RECORDED = "not recorded (the state was written by an earlier version)"


def recorded(state: Dict, field: str):
    """``state[field]``, a setting ``init`` recorded, or :data:`NOT_RECORDED` for a state
    written before that setting was recorded."""
    return state[field] if field in state else NOT_RECORDED


#: fields of a state document that change as the release goes on (not ``init``'s settings)
PROGRESS_FIELDS = frozenset({"state_id", "synthesizer_state", "fingerprints", "contents",
                             "inputs", "inputs_from", "pending", "output_dir", "files",
                             "shard_sizes", "shard_code_counts", CHAIN, FILE_DIGESTS})


def check_same_settings(state_dir: str, state: Dict, document: Dict,
                        canonical: Optional[Callable[[Dict], Dict]] = None) -> None:
    """Refuse a saved ``state`` whose settings differ from ``document``'s (the state
    document ``init`` would write with the options given; ``init --exists-ok`` and a
    stream started on an existing state): every field but :data:`PROGRESS_FIELDS`, both
    compared in ``canonical`` form (:meth:`IncrementalJob.canonical`: a state saved by an
    earlier version as its steps read it), a nested block's fields by their dotted path."""
    canonical = canonical or (lambda same: same)
    given = canonical(json.loads(json.dumps(document, default=str)))
    saved = canonical({"invalid_records": state_mode(state), **state})  # saved before it
    differ = _differences({k: v for k, v in saved.items() if k not in PROGRESS_FIELDS},
                          {k: v for k, v in given.items() if k not in PROGRESS_FIELDS})
    if differ:
        details = "; ".join(f"{key}: state {a!r}, options {b!r}" for key, a, b in differ)
        raise StateError(f"{state_dir}: holds a state created with other options ({details}); "
                         f"pass the options it was created with, or use a new --state")


def _differences(saved: Dict, given: Dict, prefix: str = "") -> List[Tuple[str, object, object]]:
    """(dotted key, saved value, given value) of every field of ``given`` that differs."""
    out = []
    for key in sorted(given):
        a, b = saved.get(key), given[key]
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(_differences(a, b, f"{prefix}{key}."))
        elif a != b:
            out.append((f"{prefix}{key}", a, b))
    return out


def new_state_document(kind: str, seed: Optional[int], out_format: str, **fields) -> Dict:
    """The common fields of a fresh state (version 0)."""
    return {"kind": kind, "state_id": uuid.uuid4().hex[:8], "seed": seed,
            "sampler": "opendp" if seed is None else "seeded",
            "for_publication": seed is None, "format": out_format, "fingerprints": {},
            "pending": None, "output_dir": None, "files": {}, **fields}


def load_state(state_dir: str, kind: Optional[str] = None) -> Dict:
    """The current state document of ``state_dir``."""
    return StateDir(state_dir).read(kind)[1]



def relocate(state_dir: str, new_state_dir: str, output_dir: str, new_output_dir: str) -> None:
    """Copy a state directory and its release folder to new places (the Python API's
    ``save``): the new state is the current version, with the run folders it names, as
    version 0 of ``new_state_dir`` publishing into ``new_output_dir``, which receives the
    release (its files, then its manifest).  Both new places must be new or empty; the
    state must have nothing pending (a committed period is published first, by a step).
    The old places are the caller's to remove: while both exist, only one may go on."""
    store, target = StateDir(state_dir), StateDir(new_state_dir)
    with Ownership(store):
        _, state = store.read()
        if state["pending"] is not None:
            raise StateError(f"{state_dir}: period {state['pending']['period']} is committed "
                             f"but not published; step again to publish it, then save")
        if storage.children(new_state_dir):
            raise StateError(f"{new_state_dir} is not empty: a state is saved into a new or "
                             f"empty directory")
        check_fresh_output(new_output_dir)
        for token in store.named_runs(state):
            source = storage.join(store.runs, token)
            for path in storage.list_files(source):
                parts = storage.relative_parts(source, path)
                storage.write_bytes(storage.join(target.runs, token, *parts),
                                    storage.read_bytes(path))
        moved = dict(state)
        if state["output_dir"] is not None:
            for name in (release_file_names(output_dir) + accuracy_file_names(output_dir)
                         + [MANIFEST]):
                storage.write_bytes(storage.join(new_output_dir, name),
                                    storage.read_bytes(storage.join(output_dir, name)))
            moved["output_dir"] = storage.absolute(new_output_dir)
        target.create(moved)
