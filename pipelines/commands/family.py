"""A synthesizer family as the command line sees it, and the one driver of its commands.

Each family module (:mod:`~continual_synth.pipelines.commands.panel_cli` for the window and
cumulative synthesizers, :mod:`~continual_synth.pipelines.commands.tabular_cli`,
:mod:`~continual_synth.pipelines.commands.privhp_cli`) declares a :class:`Family`: its
Beam jobs' options classes, the state document its options describe, its incremental job
(:class:`~continual_synth.pipelines.release.lifecycle.IncrementalJob`: the period's
statistics, the synthesizer's step, the emission), its whole-stream ``run`` and its
evaluation.  :func:`add_commands` and :func:`add_evaluations` build every family's sub-commands from
that record and
:func:`drive` runs ``init``, ``step`` and ``stream`` for all of them the same way, through
the lifecycle (ownership, fencing, write-ahead, the ledger).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Tuple

from continual_synth.pipelines.commands.options import add_job_commands

__all__ = ["Family", "add_commands", "add_evaluations", "drive", "invalid_records_option"]


def _nothing(*_args) -> None:
    return None


@dataclass(frozen=True)
class Family:
    """One synthesizer family's commands.

    ``name`` is the command word (``continual-synth NAME ACTION``) and ``help`` its line
    in ``--help``; ``jobs`` maps ``run``, ``init`` and ``step`` to the Beam options class
    of each (the job modules and Flex Template metadata are built from it too);
    ``stream_options`` adds the synthesizer's options to ``stream``'s parser.
    ``prepare(args)`` is ``(synthesizer, state document)`` from the parsed options (the
    document ``init`` creates and ``stream`` starts from), ``kind`` the kind of state it
    keeps (its incremental job: :func:`~continual_synth.pipelines.families.driver.
    incremental_job`), ``initialised(args, synthesizer)`` what ``init`` prints, ``run(args,
    beam_args)`` the whole stream in one job and ``released(args)`` what a step that
    released does after (warnings about the release).  ``more_commands`` maps each other
    sub-command of the family to ``(add_parser(actions), run(args) → printed summary)``.  ``evaluations``
    maps each ``evaluate`` sub-command of the family to ``(add_arguments(parser),
    evaluate(args) → printed summary, help)``."""

    name: str
    help: str
    jobs: Dict[str, type]
    stream_options: Callable[[argparse.ArgumentParser], None]
    kind: str
    prepare: Callable[[argparse.Namespace], Tuple[Any, Dict]]
    initialised: Callable[[argparse.Namespace, Any], Dict]
    run: Callable[[argparse.Namespace, List[str]], Dict]
    released: Callable[[argparse.Namespace], None] = _nothing
    more_commands: Dict[str, Tuple[Callable, Callable]] = field(default_factory=dict)
    evaluations: Dict[str, Tuple[Callable, Callable, str]] = field(default_factory=dict)
    #: a panel's stream refuses a period file that repeats a row
    distinct_rows: bool = False

    def job_options(self) -> Dict[str, type]:
        """The family's Beam jobs by job name (``window_run`` …)."""
        return {f"{self.name}_{action}": options for action, options in self.jobs.items()}


def add_commands(commands, family: Family) -> None:
    """``continual-synth FAMILY run|init|step|stream`` and the family's other
    sub-commands on ``commands``."""
    from continual_synth.pipelines.streaming.stream import add_stream_command
    actions = add_job_commands(commands, family.name, family.help, family.job_options())
    add_stream_command(actions, family.stream_options)
    for add_parser, _ in family.more_commands.values():
        add_parser(actions)


def add_evaluations(evaluate, family: Family) -> None:
    """The family's ``continual-synth evaluate …`` sub-commands on ``evaluate``."""
    from continual_synth.pipelines.commands.options import HelpFormatter
    for name, (add_arguments, _, help_text) in family.evaluations.items():
        add_arguments(evaluate.add_parser(name, help=help_text, formatter_class=HelpFormatter))


def drive(family: Family, args: argparse.Namespace, beam_args: List[str]) -> Dict:
    """Run ``args.action`` of ``family``: ``run`` and the family's other sub-commands are
    the family's; ``step``, ``init`` and ``stream`` are the lifecycle's, the same for every
    family."""
    if args.action in family.more_commands:
        return family.more_commands[args.action][1](args)
    if args.action == "run":
        return family.run(args, beam_args)
    from continual_synth.pipelines.families import driver
    if args.action == "step":
        summary = driver.step(args.state, args.input, args.output, kind=family.kind,
                              in_format=args.input_format, period=args.period,
                              beam_args=beam_args, wait=args.wait,
                              invalid_records=args.invalid_records)
        if summary.get("status") == "released":
            family.released(args)
        return summary
    synthesizer, document = family.prepare(args)
    job = driver.incremental_job(family.kind)
    if args.action == "stream":
        from continual_synth.pipelines.streaming.stream import run_stream
        return run_stream(job, document, args, beam_args, period_col=args.period_col,
                          distinct_rows=family.distinct_rows)
    if args.action != "init":
        raise ValueError(f"{family.name} has no command {args.action!r}")
    from continual_synth.pipelines.commands.init_state import initialise, kept_state
    if initialise(args.exists_ok, args.state, document,
                  lambda: driver.init(args.state, document), job.canonical):
        return kept_state(args.state)
    return family.initialised(args, synthesizer)


def invalid_records_option(args: argparse.Namespace) -> Dict[str, str]:
    """``--invalid-records`` as a state document's keyword (``init`` has the option;
    ``stream`` has none, so its state keeps the default, refuse, for later steps)."""
    mode = getattr(args, "invalid_records", None)
    return {} if mode is None else {"invalid_records": mode}
