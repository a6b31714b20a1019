"""Each synthesizer family's Beam jobs: the panels' (:mod:`.jobs`, Bun et al. 2024),
the tabular stream's (:mod:`.tabular`, Kumar et al. 2024) and PrivHP's (:mod:`.privhp`,
:mod:`.privhp_continual`, Holland et al. 2025): statistics, step and emission."""
