"""``python -m continual_synth.jobs.tabular_run --key=value …``: ``continual-synth tabular run``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.jobs import main
from continual_synth.pipelines.cli import exit_process

if __name__ == "__main__":
    exit_process(main("tabular_run"))
