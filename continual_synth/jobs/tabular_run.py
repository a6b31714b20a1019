"""``python -m continual_synth.jobs.tabular_run --key=value …``: ``continual-synth tabular run``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("tabular_run"))
