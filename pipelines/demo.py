"""``continual-synth demo``: the whole fixed-window job on an embedded panel.

Generates the SIPP-like panel (23 000 simulated households, 12 months, persistent
poverty spells; :mod:`continual_synth.pipelines.sipp_like`), synthesizes it with
Algorithm 1 at the paper's quarterly window (k = 3) and ρ = 0.05 under the
``replace`` relation, and evaluates the release (window errors against Theorem
3.2, the four quarterly poverty queries, plots).  Nothing is downloaded.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines import jobs, window as window_jobs
from continual_synth.pipelines.evaluate_window import evaluate_window
from continual_synth.pipelines.sipp_like import generate_panel
from continual_synth.transforms.files import write_file

DEMO_CONFIG = WindowConfig(window=3, horizon=12, rho=0.05, neighbor="replace")


def demo(output_dir: str, seed: Optional[int] = None, beam_args: Sequence[str] = ()) -> Dict:
    """Write ``input/``, ``synthetic/`` and ``report/`` under ``output_dir``."""
    panel_path = os.path.join(output_dir, "input", "sipp_like_panel.parquet")
    synthetic_dir = os.path.join(output_dir, "synthetic")
    report_dir = os.path.join(output_dir, "report")
    jobs.check_fresh_output(synthetic_dir)
    write_file(generate_panel(), panel_path, "parquet")
    manifest = window_jobs.run(panel_path, synthetic_dir, DEMO_CONFIG, seed=seed,
                               beam_args=beam_args)
    summary = evaluate_window(panel_path, synthetic_dir, report_dir)
    return {
        "input": panel_path, "synthetic": synthetic_dir, "report": report_dir,
        "privacy": manifest["privacy_statement"], "sampler": manifest["sampler"],
        "num_synthetic": manifest["num_synthetic"], "n_pad": manifest["n_pad"],
        "error_bound": summary["error_bound"], "overall": summary["overall"],
        "plots": sorted(f for f in os.listdir(report_dir) if f.endswith(".png")),
    }
