"""``python -m continual_synth.jobs.tabular_step --key=value …``: ``continual-synth tabular step``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("tabular_step"))
