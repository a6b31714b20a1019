"""``python -m continual_synth …``: the command line, the same as ``continual-synth …``."""
from continual_synth.launch import console_main

if __name__ == "__main__":
    console_main()
