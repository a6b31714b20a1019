"""CPU of wide measurements: the tabular state machine's step time (process CPU) on CCES
2016 randomized, batches of 50, with the default (wide measurements) or without them
(``--wide-cells 0``), the same periods and sampler seeds.  Run both at once, one per core:

    python bench/tabular_wide_cpu.py 150 1000 wide & python bench/tabular_wide_cpu.py 150 1000 off
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import tabular_timing as tt
from continual_synth.mechanisms.marginals import Domain, all_workloads, encode_records, workload_histograms
from continual_synth.mechanisms.tabular_synthesizer import TabularSynthesizer
periods, epsilon, wide = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3] == "wide"
domain = Domain(tt.table_domain())
workloads = all_workloads(domain)
stream = tt.make_stream(tt.load_table(), "randomized", 50, seed=0, periods=periods, domain=tt.table_domain())
codes = encode_records(stream, domain)
period_of = stream["period"].to_numpy()
synth = TabularSynthesizer.create(domain=domain, workloads=workloads, epsilon=epsilon, horizon=1000,
                                  wide_cells=64 if wide else 0)
state = synth.initial_state()
seconds = []
for period in range(1, periods + 1):
    flat = np.concatenate(workload_histograms(codes[period_of == period], domain, synth.input_workloads))
    start = time.process_time()
    state, _, _ = synth.step_period(state, period, flat, 1)
    seconds.append(time.process_time() - start)
s = np.array(seconds)
print(json.dumps({"wide": wide, "epsilon": epsilon, "periods": periods, "k": synth.config.selections,
                  "cpu_total": round(float(s.sum()), 1), "cpu_mean_last_50": round(float(s[-50:].mean()), 3)}))
