"""``python -m continual_synth.jobs.cumulative_step --key=value …``: ``continual-synth cumulative step``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("cumulative_step"))
