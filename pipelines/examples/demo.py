"""``continual-synth demo``: both synthesizers end to end on an embedded panel.

Generates the SIPP-like panel (23 000 simulated households, 12 months, persistent
poverty spells; :mod:`continual_synth.pipelines.examples.sipp_like`), synthesizes it with
Algorithm 1 at the paper's quarterly window (k = 3) and with Algorithm 2 (tree
counters), each at ρ = 0.05 under the ``replace`` relation, and evaluates both
releases (window errors against Theorem 3.2 and the four quarterly poverty queries;
counts of households poor in at least b months so far).  Nothing is downloaded.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence

from continual_synth.mechanisms.cumulative import CumulativeConfig
from continual_synth.mechanisms.panel_synthesizers import CumulativeSynthesizer, WindowSynthesizer
from continual_synth.mechanisms.window import WindowConfig
from continual_synth.pipelines.families import jobs
from continual_synth.pipelines.release import lifecycle
from continual_synth.pipelines.evaluation.evaluate_cumulative import evaluate_cumulative
from continual_synth.pipelines.evaluation.evaluate_window import evaluate_window
from continual_synth.pipelines.examples.sipp_like import generate_panel
from continual_synth.transforms.files import write_file

__all__ = ["WINDOW_CONFIG", "CUMULATIVE_CONFIG", "demo"]

WINDOW_CONFIG = WindowConfig(window=3, horizon=12, rho=0.05, neighbor="replace")
CUMULATIVE_CONFIG = CumulativeConfig(horizon=12, rho=0.05, neighbor="replace")


def demo(output_dir: str, seed: Optional[int] = None, beam_args: Sequence[str] = ()) -> Dict:
    """Write ``input/``, then ``synthetic/`` and ``report/`` (Algorithm 1) and
    ``cumulative/`` and ``cumulative_report/`` (Algorithm 2) under ``output_dir``."""
    panel_path = os.path.join(output_dir, "input", "sipp_like_panel.parquet")
    runs = (("synthetic", "report", WindowSynthesizer(WINDOW_CONFIG), evaluate_window),
            ("cumulative", "cumulative_report", CumulativeSynthesizer(CUMULATIVE_CONFIG),
             evaluate_cumulative))
    for release, _, _, _ in runs:
        lifecycle.check_fresh_output(os.path.join(output_dir, release))
    lifecycle.check_fresh_output(output_dir)  # new or empty: the demo's alone
    write_file(generate_panel(), panel_path, "parquet")
    result = {"input": panel_path}
    for release, report, model, evaluate in runs:
        release_path = os.path.join(output_dir, release)
        report_path = os.path.join(output_dir, report)
        manifest = jobs.run(model, panel_path, release_path, seed=seed, beam_args=beam_args)
        summary = evaluate(panel_path, release_path, report_path)
        result[model.kind] = {
            "release": release_path, "report": report_path,
            "privacy": manifest["privacy_statement"], "sampler": manifest["sampler"],
            "num_synthetic": manifest["num_synthetic"],
            "error_bound": summary["error_bound"], "overall": summary["overall"],
            "plots": sorted(f for f in os.listdir(report_path) if f.endswith(".png"))}
    return result
