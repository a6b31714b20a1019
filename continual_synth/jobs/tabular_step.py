"""``python -m continual_synth.jobs.tabular_step --key=value …``: ``continual-synth tabular step``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.launch import job_main

if __name__ == "__main__":
    job_main("tabular_step")
