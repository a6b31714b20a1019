"""``python -m continual_synth.jobs.window_run --key=value …``: ``continual-synth window run``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("window_run"))
