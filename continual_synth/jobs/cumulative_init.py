"""``python -m continual_synth.jobs.cumulative_init --key=value …``: ``continual-synth cumulative init``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("cumulative_init"))
