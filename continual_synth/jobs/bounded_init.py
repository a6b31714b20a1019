"""``python -m continual_synth.jobs.bounded_init --key=value …``: ``continual-synth bounded init``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.jobs import main
from continual_synth.pipelines.cli import exit_process

if __name__ == "__main__":
    exit_process(main("bounded_init"))
