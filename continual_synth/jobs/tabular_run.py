"""``python -m continual_synth.jobs.tabular_run --key=value …``: ``continual-synth tabular run``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.launch import job_main

if __name__ == "__main__":
    job_main("tabular_run")
