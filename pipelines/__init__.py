"""Beam pipelines and the faces users call: the Python API (:mod:`.api`), the Beam
PTransforms (:mod:`.beam_api`), and by concern

* :mod:`.release` — a release's lifecycle: state directories, ownership and fencing,
  write-ahead steps, staging and publication, what may be published, the operator's log;
* :mod:`.families` — each synthesizer family's jobs (panels, tabular, PrivHP): its
  statistics, step and emission through the lifecycle, and the one driver of every
  family's ``init`` and ``step`` (:mod:`.families.driver`);
* :mod:`.streaming` — the streaming driver (watched folders, Pub/Sub, Kafka);
* :mod:`.commands` — the command line: one :class:`~.commands.family.Family` record per
  family, the parser built from them and one driver of their commands, and the job
  options;
* :mod:`.evaluation` — evaluation of a release against the truth, and its plots;
* :mod:`.examples` — the demo and the example data it ships.
"""
