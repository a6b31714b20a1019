"""``python -m continual_synth.jobs.cumulative_init --key=value …``: ``continual-synth cumulative init``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.launch import job_main

if __name__ == "__main__":
    job_main("cumulative_init")
