"""The ``continual-synth`` command line (:mod:`.cli`), one module per command family,
and the job options every Beam job is declared by (:mod:`.options`)."""
