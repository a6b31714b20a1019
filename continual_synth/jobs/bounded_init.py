"""``python -m continual_synth.jobs.bounded_init --key=value …``: ``continual-synth bounded init``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("bounded_init"))
