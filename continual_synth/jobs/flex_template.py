"""Dataflow Flex Template metadata of every job, generated from its options class.

    python -m continual_synth.jobs.flex_template [--output deploy/dataflow]

writes ``OUTPUT/JOB/metadata.json`` for each job of
:func:`continual_synth.pipelines.commands.cli.job_options` (``window_step`` …): the template's
name and description, and one entry per option (``name`` as Beam spells it, with
underscores; ``label``; ``helpText`` with the default; ``isOptional``; ``regexes``
for numbers, choices and flags).  The files are committed; a test checks that they
are what this module writes from the classes, so a new or changed option cannot be
forgotten.  The template's container starts ``python -m continual_synth.jobs.JOB`` (see
``docs/deploy.md``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Dict, List, Optional

__all__ = ["DEFAULT_OUTPUT", "INTEGER", "POSITIVE_INTEGER", "NUMBER", "FLAG", "metadata",
           "render", "write_all", "main"]

DEFAULT_OUTPUT = os.path.join("deploy", "dataflow")

INTEGER = r"^[0-9]+$"
POSITIVE_INTEGER = r"^[1-9][0-9]*$"
NUMBER = r"^([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
FLAG = r"^(true|false)$"


def _regexes(action: argparse.Action) -> Optional[List[str]]:
    from continual_synth.pipelines.commands.options import (NON_NEGATIVE_INT, POSITIVE_INT,
                                                            POSITIVE_REAL, PROBABILITY)
    if isinstance(action, argparse._StoreTrueAction):
        return [FLAG]
    if action.choices:
        return ["^(" + "|".join(re.escape(str(c)) for c in action.choices) + ")$"]
    patterns = {POSITIVE_INT: POSITIVE_INTEGER, NON_NEGATIVE_INT: INTEGER,
                POSITIVE_REAL: NUMBER, PROBABILITY: NUMBER, float: NUMBER, int: INTEGER}
    pattern = patterns.get(action.type)
    return [pattern] if pattern else None


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    text = action.help or ""
    for group in parser._mutually_exclusive_groups:
        others = [a.option_strings[0] for a in group._group_actions if a is not action]
        if group.required and action in group._group_actions:
            text += f" (give this or {' or '.join(others)})"
    if isinstance(action, argparse._StoreTrueAction):
        return text + " (true or false; default false)"
    if action.default is not None and "default" not in text:
        text += f" (default: {action.default})"
    return text


def metadata(job: str, options_class: type) -> Dict:
    """The Flex Template metadata of one job."""
    from continual_synth.pipelines.commands.options import job_parser
    parser = job_parser(options_class, prog=f"continual_synth.jobs.{job}")
    parameters = []
    for action in parser._actions:
        if not action.option_strings or action.dest in ("help", "verbose"):
            continue
        name = action.option_strings[0][2:].replace("-", "_")
        parameter = {"name": name, "label": name.replace("_", " ").capitalize(),
                     "helpText": _help(action, parser), "isOptional": not action.required}
        regexes = _regexes(action)
        if regexes:
            parameter["regexes"] = regexes
        parameters.append(parameter)
    family, action_name = job.split("_", 1)
    return {"name": f"continual-synth {family} {action_name}",
            "description": f"{options_class.description} (python -m continual_synth.jobs."
                           f"{job}; docs/deploy.md)",
            "parameters": parameters}


def render(job: str, options_class: type) -> str:
    """The committed text of a job's ``metadata.json``."""
    return json.dumps(metadata(job, options_class), indent=2, ensure_ascii=False) + "\n"


def write_all(output: str = DEFAULT_OUTPUT) -> List[str]:
    """Write every job's ``metadata.json`` under ``output``; return the paths."""
    from continual_synth.pipelines.commands.cli import job_options
    paths = []
    for job, options_class in sorted(job_options().items()):
        path = os.path.join(output, job, "metadata.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render(job, options_class))
        paths.append(path)
    return paths


def main(argv: Optional[List[str]] = None) -> int:
    # (imported for its effect: it quiets Beam's import warnings)
    from continual_synth.pipelines.commands import cli  # noqa: F401
    from continual_synth.pipelines.commands.options import ArgumentParser
    parser = ArgumentParser(prog="python -m continual_synth.jobs.flex_template",
                            description="write the Dataflow Flex Template metadata.json of "
                                        "every job")
    parser.add_argument("--output", default=DEFAULT_OUTPUT,
                        help="folder of the JOB/metadata.json files (default: %(default)s)")
    args = parser.parse_args(argv)
    for path in write_all(args.output):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
