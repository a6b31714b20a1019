"""One module per Beam job, for platforms that start a Python module with ``--key=value``
options (Airflow's ``BeamRunPythonPipelineOperator``, Dataflow Flex Templates, Flink's
and Dataflow's launchers)::

    python -m continual_synth.jobs.window_step --state=STATE --input=PERIOD_FILE --output=DIR
    python -m continual_synth.jobs.window_run --input=PANEL --output=DIR --window=3 \\
        --horizon=12 --rho=0.05 --runner=DirectRunner --direct_num_workers=2

``window_run``, ``window_init``, ``window_step``, ``cumulative_run``, ``cumulative_init``,
``cumulative_step``, ``tabular_run``, ``tabular_init``, ``tabular_step``, ``privhp_run``, ``privhp_init`` and ``privhp_step``
are ``continual-synth window run`` … ``privhp run``: the same options class
(:func:`continual_synth.pipelines.commands.cli.job_options`), the same validation, the same
result printed as JSON, exit status 2 and a one-line message on bad input.  Option names
may be written with underscores (``--id_col``), as Beam writes its own; a flag may be
given ``=true`` or ``=false``.  Options that are not the job's go to Apache Beam if Beam
knows them; anything else is an error naming the closest valid option.
"""
from __future__ import annotations

import sys
from typing import List, Optional


def main(job: str, argv: Optional[List[str]] = None) -> int:
    """Run the job ``job`` (e.g. ``"window_step"``) with ``argv`` (default: the process's
    arguments); return the exit status."""
    from continual_synth.mechanisms.errors import InputError
    from continual_synth.pipelines.commands.cli import execute, job_options
    from continual_synth.pipelines.commands.options import (beam_spelling, job_parser,
                                                            option_strings)
    options_class = job_options()[job]
    parser = job_parser(options_class, prog=f"python -m continual_synth.jobs.{job}")
    argv = ["--verbose" if arg == "-v" else arg  # -v anywhere, as on the command line
            for arg in (sys.argv[1:] if argv is None else argv)]
    try:
        argv = beam_spelling(argv, parser)
    except InputError as exc:
        print(f"continual-synth: error: {exc}", file=sys.stderr)
        return 2
    args, beam_args = parser.parse_known_args(argv)
    args.command, args.action = job.split("_", 1)
    return execute(args, beam_args, job, option_strings(parser))
