#!/bin/bash
# bench/multi_processing_overhead.sh LABEL [SYNTHESIZERS] — wall seconds of each
# synthesizer's `run` on the plain DirectRunner and with
# --direct_running_mode=multi_processing, two runs each, one TSV row per run
# (label, synthesizer, mode, run, seconds).  Run it in a directory holding the inputs:
#   stream.parquet  120 000 points x, y in [0,1]^2, period 1..12 (10 000 each)
#   panel.parquet   continual_synth.pipelines.examples.sipp_like.generate_panel() (23 000 x 12)
#   tab/            continual-synth tabular example --output tab --periods 12
label=${1:?label}
declare -A CMDS
CMDS[bounded]="privhp run --input stream.parquet --columns x,y --bounds=0:1,0:1 --epsilon 1 --depth 12 --samples 2000 --horizon 12 --seed 1"
CMDS[window]="window run --input panel.parquet --window 3 --horizon 12 --rho 0.5 --seed 1"
CMDS[cumulative]="cumulative run --input panel.parquet --horizon 12 --rho 0.5 --seed 1"
CMDS[tabular]="tabular run --input tab/cces2016-randomized-bs50.parquet --domain tab/domain.json --epsilon 1 --horizon 12 --seed 1"
for name in ${2:-bounded window cumulative tabular}; do
  for mode in in_memory multi_processing; do
    extra=""; [ $mode = multi_processing ] && extra="--direct_running_mode=multi_processing"
    for run in 1 2; do
      out=out_${label}_${name}_${mode}_$run; rm -rf $out
      start=$(date +%s.%N)
      continual-synth ${CMDS[$name]} --output $out $extra > /dev/null 2> $out.err \
        || echo "FAILED $name $mode (see $out.err)" >&2
      end=$(date +%s.%N)
      printf "%s\t%s\t%s\t%d\t%.1f\n" "$label" "$name" "$mode" $run $(echo "$end - $start" | bc)
    done
  done
done
