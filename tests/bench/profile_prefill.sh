#!/usr/bin/env bash
# Where the prefill scores' time goes, for the H200 machines (after `ninja gpu`): Nsight Compute on
# the third launch of index_score_group for CONFIG in bench_prefill.py (--score group, ROWS rows at
# CONTEXT, one chunk of ROWS), every section (--set full), then the same launch's SASS page (the
# metrics and stall samples of every instruction).
# Usage: tests/bench/profile_prefill.sh CONFIG [ROWS [CONTEXT]]   writes ncu_prefill_CONFIG.txt and
# ncu_prefill_CONFIG_sass.csv to $OUT (or /tmp) and prints the summary lines. ncu locks the clocks
# (1.35 GHz on the H200): compare shares and counts, not microseconds, with bench_prefill.py's.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -ge 1 ] && [ $# -le 3 ] || { echo "usage: $0 CONFIG [ROWS [CONTEXT]]" >&2; exit 2; }
cfg=$1 rows=${2:-512} ctx=${3:-65536} out=${OUT:-/tmp}
f="$out/ncu_prefill_${cfg}.txt" s="$out/ncu_prefill_${cfg}_sass.csv"
# bench_prefill.py times both models; --kernel-name picks CONFIG's kernel (entry names spell the
# configuration's dots as underscores)
run() {
  ncu --kernel-name "regex:dsa_index_score_group_${cfg//./_}\$" --launch-skip 2 --launch-count 1 --import-source no "$@" \
      python3 tests/bench/bench_prefill.py --score group --rows "$rows" --context "$ctx" --chunk "$rows"
}
run --set full --print-details all > "$f" 2>&1 || run --set full > "$f" 2>&1
grep -E "Duration|DRAM Throughput|L1/TEX Cache Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Pipe Tensor Cycles|Stall|Registers|Executed Ipc" "$f" | head -60 || true # head closes the pipe early: not a failure
run --set full --page source --print-source sass --csv > "$s" 2>&1 || echo "profile_prefill: ncu printed no SASS page (see $s)" >&2
