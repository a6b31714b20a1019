"""``python -m continual_synth.jobs.bounded_step --key=value …``: ``continual-synth bounded step``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("bounded_step"))
