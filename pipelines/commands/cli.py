"""The ``continual-synth`` command line.

    continual-synth window | cumulative  run | init | step | stream   (panel_cli)
    continual-synth tabular  run | init | step | stream | example     (tabular_cli)
    continual-synth privhp  run | init | step | stream               (privhp_cli)
    continual-synth evaluate window | cumulative | tabular | privhp
    continual-synth plan window | cumulative | privhp | tabular      (plan_cli)
    continual-synth demo --output DIR

Each family's module declares one :class:`~continual_synth.pipelines.commands.family.
Family` record and imports nothing of this one; the parser is built from the records and
every family's command runs through one driver
(:func:`~continual_synth.pipelines.commands.family.drive`).  Each Beam job's options are
a ``PipelineOptions`` class (a family's ``jobs``; :func:`job_options`), the one
declaration the sub-commands, the job modules
(:mod:`continual_synth.jobs`) and the Flex Template metadata are built from.  Apache
Beam's own options (``--runner``, ``--direct_num_workers`` …) pass through to the
pipeline; an option neither the job nor Beam knows is an error naming the closest
valid one.  ``--runner dask-local`` runs on a local dask.distributed cluster (see
:mod:`continual_synth.runners.presets`).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Dict, List, Optional

__all__ = ["families", "job_options", "build_parser", "dispatch", "main", "perform",
           "execute", "reference_markdown"]

# Beam logs import-time warnings and each failing DoFn's traceback; the command
# reports errors itself, so keep Beam quiet unless --verbose is given.
logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")

from continual_synth.pipelines.commands.options import (NON_NEGATIVE_INT,  # noqa: E402
                                               ArgumentParser, HelpFormatter)


def families():
    """Every synthesizer family's :class:`~continual_synth.pipelines.commands.family.Family`
    record, in the order of ``--help``."""
    from continual_synth.pipelines.commands.privhp_cli import PRIVHP
    from continual_synth.pipelines.commands.panel_cli import CUMULATIVE, WINDOW
    from continual_synth.pipelines.commands.tabular_cli import TABULAR
    return {family.name: family for family in (WINDOW, CUMULATIVE, TABULAR, PRIVHP)}


def job_options() -> Dict[str, type]:
    """Every Beam job of the command line (job name → options class), its families'."""
    return {name: options for family in families().values()
            for name, options in family.job_options().items()}


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser, built from the families' records."""
    from continual_synth.pipelines.commands import plan_cli
    from continual_synth.pipelines.commands.family import add_commands, add_evaluations
    parser = ArgumentParser(
        prog="continual-synth",
        description="Continual differentially private synthetic data (Apache Beam pipelines).")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show Beam's logs (accepted anywhere on the line)")
    commands = parser.add_subparsers(dest="command", required=True)
    for family in families().values():
        add_commands(commands, family)
    evaluate = commands.add_parser("evaluate", help="evaluate a release against the truth"
                                   ).add_subparsers(dest="action", required=True)
    for family in families().values():
        add_evaluations(evaluate, family)
    plan_cli.add_commands(commands)
    demo = commands.add_parser("demo", help="run everything on an embedded SIPP-like panel",
                               formatter_class=HelpFormatter)
    demo.add_argument("--output", required=True,
                      help="a new or empty directory for the demo's panel, releases and "
                           "reports")
    demo.add_argument("--seed", type=NON_NEGATIVE_INT, default=None,
                      help="reproducible simulation sampler (NOT for publication)")
    return parser


def dispatch(args, beam_args: List[str]) -> dict:
    if args.command == "plan":  # runs no pipeline: no runner to resolve or start
        from continual_synth.pipelines.commands.plan_cli import plan
        return plan(args, beam_args)
    from continual_synth.runners.presets import resolved_beam_args
    with resolved_beam_args(beam_args, getattr(args, "verbose", False)) as resolved:
        return _dispatch(args, resolved)


def _dispatch(args, beam_args: List[str]) -> dict:
    """Run the parsed command: a family's through the one driver
    (:func:`~continual_synth.pipelines.commands.family.drive`)."""
    from continual_synth.pipelines.commands.family import drive
    if args.command == "evaluate":
        evaluations = {name: entry for family in families().values()
                       for name, entry in family.evaluations.items()}
        return evaluations[args.action][1](args)
    if args.command == "demo":
        from continual_synth.pipelines.examples.demo import demo
        return demo(args.output, seed=args.seed, beam_args=beam_args)
    return drive(families()[args.command], args, beam_args)


def _init_options(command: str) -> List[str]:
    """The options of the ``init`` of a ``step`` or ``stream`` command's family (none
    for other commands)."""
    from continual_synth.pipelines.commands.options import job_parser, option_strings
    family, _, action = command.replace("_", " ").partition(" ")
    if action not in ("step", "stream"):
        return []
    options_class = job_options().get(f"{family}_init")
    return option_strings(job_parser(options_class, prog=family)) if options_class else []


def _command_options(parser: argparse.ArgumentParser, args) -> List[str]:
    """The option strings of the subcommand ``args`` chose (for "did you mean")."""
    for word in (args.command, getattr(args, "action", None)):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or word not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[word]
    return [option for action in parser._actions for option in action.option_strings]


#: command words that name a family by a name it no longer has → its name
RENAMED = {"bounded": "privhp"}


def main(argv: Optional[List[str]] = None) -> int:
    from continual_synth.pipelines.release import logs
    argv, verbose = logs.strip_verbose(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    words = [arg for arg in argv if not arg.startswith("-")][:2]
    renamed = [word for word in words if word in RENAMED]
    if renamed:
        parser.error(f"the command '{renamed[0]}' is now '{RENAMED[renamed[0]]}' "
                     f"(continual-synth {' '.join(RENAMED.get(w, w) for w in words)} …)")
    args, beam_args = parser.parse_known_args(argv)
    args.verbose = verbose or getattr(args, "verbose", False)
    if beam_args and not beam_args[0].startswith("--"):
        parser.error(f"unrecognised arguments: {' '.join(beam_args)}")
    return execute(args, beam_args, f"{args.command} {getattr(args, 'action', '')}".strip(),
                   _command_options(parser, args))


def perform(args, beam_args: List[str], command: str, command_options: List[str]) -> dict:
    """Run parsed options (``args.command`` and ``args.action`` say which job) with the
    rest of the arguments as Beam's options, after every check that needs no data; return
    the job's result (what the command prints).  Errors are raised, typed: the command
    line's :func:`execute` and the Python API (:mod:`continual_synth.pipelines.api`)
    share this.  ``command_options`` are the job's own options (for "did you mean")."""
    from continual_synth.pipelines.release import logs
    from continual_synth.pipelines.commands.options import (check_beam_args,
                                                            check_directory_options,
                                                            check_outside_releases,
                                                            check_separate_locations)
    from continual_synth.pipelines.release.publication import source_date
    from continual_synth.transforms.storage import configure
    check_beam_args(beam_args, command, command_options, _init_options(command))
    source_date()  # SOURCE_DATE_EPOCH, before anything is read
    configure(beam_args)  # --s3_endpoint_url … reach the driver's reads and writes too
    check_separate_locations(args)
    check_directory_options(args)
    check_outside_releases(args)  # (the buckets exist: checked above)
    if args.command == "evaluate":
        logs.LOGGER.info("reading the truth %s and the release %s", args.truth,
                         args.synthetic)
    result = dispatch(args, logs.beam_log_args(beam_args, getattr(args, "verbose", False)))
    if getattr(args, "report", None):
        logs.LOGGER.info("report written → %s", args.report)
    return result


def execute(args, beam_args: List[str], command: str, command_options: List[str]) -> int:
    """:func:`perform`, then print the result as JSON and return 0, or print a one-line
    error and return 2."""
    from continual_synth.pipelines.release import logs
    logs.configure(command, getattr(args, "verbose", False))
    from continual_synth.mechanisms.accounting import BudgetExceededError
    from continual_synth.mechanisms.errors import (InputError, ParameterError, StateError,
                                                   one_line)
    try:
        result = perform(args, beam_args, command, command_options)
    except ParameterError as exc:  # a config's check: name the option that set the value
        print(f"continual-synth: error: {exc.for_command_line()}", file=sys.stderr)
        return 2
    except (InputError, StateError, BudgetExceededError, ValueError) as exc:
        print(f"continual-synth: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:  # the environment failed the job: one line, exit 3
        from continual_synth.mechanisms.errors import ENVIRONMENT_EXIT, environment_fault
        fault = environment_fault(exc)
        if fault is None:
            raise
        places = ", ".join(f"--{name} {getattr(args, name)}" for name in ("output", "state")
                           if getattr(args, name, None))
        print(f"continual-synth: error: {fault}{f' [the job writes {places}]' if places else ''}",
              file=sys.stderr)
        return ENVIRONMENT_EXIT
    except KeyboardInterrupt:  # 128 + SIGINT, as a shell reports an interrupted command
        print("continual-synth: interrupted (Ctrl-C): a release is published all or nothing "
              "and a step commits all or nothing, so run the same command again to finish",
              file=sys.stderr)
        return 130
    from continual_synth.pipelines.release.publication import printed
    logs.LOGGER.info(logs.summary_line())
    try:
        print(json.dumps(printed(result, command), indent=2, default=str, ensure_ascii=False))
        sys.stdout.flush()
    except BrokenPipeError:  # `| head` closed the pipe: the job has finished, only its
        # summary was cut; no traceback, and none at exit (Python's documented idiom)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0



def reference_markdown() -> str:
    """The command-line reference as Markdown, generated from the parsers: every command's
    ``--help`` (the guide's page ``docs/cli.md`` is built from it)."""
    parser = build_parser()
    sections = []

    def walk(parser_, words):
        subparsers = [a for a in parser_._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers:
            text = parser_.format_help().replace("usage: continual-synth",
                                                 "usage: continual-synth", 1)
            sections.append(f"## `continual-synth {' '.join(words)}`\n\n```text\n{text}```\n")
            return
        for name, child in subparsers[0].choices.items():
            walk(child, words + [name])
    walk(parser, [])
    return "\n".join(sections)
