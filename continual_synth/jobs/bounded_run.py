"""``python -m continual_synth.jobs.bounded_run --key=value …``: ``continual-synth bounded run``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("bounded_run"))
