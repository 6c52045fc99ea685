#!/usr/bin/env bash
# Where an index call's time goes, for the H200 machines (after `ninja gpu`): Nsight Compute on each
# kernel of the fourth of four calls of CONFIG at ROWS decode rows of CONTEXT keys (bench_index.py
# --calls), every section (--set full): the query's preparation, the scores, the top-k.
# Usage: tests/bench/profile_index.sh CONFIG ROWS CONTEXT [sass KERNEL]   writes
# ncu_index_ROWS_CONTEXT.txt to $OUT (or /tmp) and prints its summary lines; with sass KERNEL
# (score, topk_split, ...) also ncu_index_ROWS_CONTEXT_KERNEL_sass.csv, the metrics and stall
# samples of every SASS instruction of that kernel's fourth launch (ncu's source page). ncu locks
# the clocks (1.35 GHz on the H200): compare shares and counts, not microseconds, with
# bench_index.py's.
set -euo pipefail
cd "$(dirname "$0")/../.."
case "$#:${4:-}" in 3: | 5:sass) ;; *) echo "usage: $0 CONFIG ROWS CONTEXT [sass KERNEL]" >&2; exit 2 ;; esac
cfg=$1 rows=$2 ctx=$3 out=${OUT:-/tmp}
f="$out/ncu_index_${rows}_${ctx}.txt"
# ncu on the kernels that regex $1 names, with the options that follow it
run() {
  local kernels=$1
  shift
  ncu --kernel-name "regex:$kernels" --set full --import-source no "$@" \
      python3 tests/bench/bench_index.py --calls "$cfg" "$rows" "$ctx"
}
# every launch of the four calls: the last of each kernel are the fourth call's; --print-details
# all prints the tables themselves, where this ncu has it
run dsa_index --print-details all > "$f" 2>&1 || run dsa_index > "$f" 2>&1
grep -E "^  dsa_index|Duration|DRAM Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|Achieved Occupancy|Stall" "$f" | tail -60
if [ "${4:-}" = sass ]; then
  k=$5 s="$out/ncu_index_${rows}_${ctx}_${k}_sass.csv"
  run "dsa_index_${k}_" --launch-skip 3 --launch-count 1 --page source --print-source sass --csv > "$s" 2>&1 ||
    echo "profile_index: ncu printed no SASS page (see $s)" >&2
fi
