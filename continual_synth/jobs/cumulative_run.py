"""``python -m continual_synth.jobs.cumulative_run --key=value …``: ``continual-synth cumulative run``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.launch import job_main

if __name__ == "__main__":
    job_main("cumulative_run")
