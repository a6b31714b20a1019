"""``python -m continual_synth.jobs.privhp_step --key=value …``: ``continual-synth privhp step``
for platforms (see :mod:`continual_synth.jobs`)."""
from continual_synth.launch import job_main

if __name__ == "__main__":
    job_main("privhp_step")
