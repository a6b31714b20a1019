"""``python -m continual_synth.jobs.window_init --key=value …``: ``continual-synth window init``
for platforms (see :mod:`continual_synth.jobs`)."""
import sys

from continual_synth.jobs import main

if __name__ == "__main__":
    sys.exit(main("window_init"))
