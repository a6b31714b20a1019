"""``python -m continual_synth …``: the command line, the same as ``continual-synth …``."""
import sys

from continual_synth.pipelines.cli import main

if __name__ == "__main__":
    sys.exit(main())
