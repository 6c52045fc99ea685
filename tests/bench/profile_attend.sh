#!/usr/bin/env bash
# Where a sparse MLA call's time goes, for the H200 machines (after `ninja gpu` and the dsagen command
# of bench_attend.py): Nsight Compute on the fourth of four calls of the grid configuration of one
# cache format (fp8_ds_mla unless --format says another) at TP
# (8, 4, 2, 1: 16, 32, 64, 128 heads) and ROWS decode rows, with the sections that split the SM's
# memory pipes: the L1/shared data path's wavefronts by operation (global loads, shared loads and
# stores, bank conflicts), the warps' stall reasons and the scheduler's issue rate.
# Usage: tests/bench/profile_attend.sh [--format F] TP ROWS [sass]   writes ncu_attend_tpTP_ROWS.txt
# (ncu_attend_F_tpTP_ROWS.txt for a format F other than fp8_ds_mla: nvfp4_ds_mla or bf16) to $OUT (or
# /tmp) and prints its summary lines; with sass also ncu_attend_tpTP_ROWS_sass.csv, the metrics of
# every SASS instruction (ncu's source page: which loads and stores take the L1's wavefronts). ncu
# locks the clocks (1.35 GHz on the H200): its durations are longer than bench_attend.py's; compare
# shares and counts, not microseconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
fmt=fp8_ds_mla
if [ "${1:-}" = --format ]; then fmt=${2:-}; shift 2 || true; fi
case "$fmt" in fp8_ds_mla | nvfp4_ds_mla | bf16) ;; *) echo "profile_attend: --format fp8_ds_mla, nvfp4_ds_mla or bf16, not '$fmt'" >&2; exit 2 ;; esac
case "$#:${3:-}" in 2: | 3:sass) ;; *) echo "usage: $0 [--format F] TP ROWS [sass]" >&2; exit 2 ;; esac
tp=$1 rows=$2 out=${OUT:-/tmp} tag=""
[ "$fmt" = fp8_ds_mla ] || tag="${fmt}_"
f="$out/ncu_attend_${tag}tp${tp}_${rows}.txt"
# --set full: every section (the memory tables among them), as the profiles in RESULTS.md were taken
run() { ncu --kernel-name regex:dsa_attend_grid --launch-skip 3 --launch-count 1 --set full --import-source no "$@" \
            python3 tests/bench/bench_attend.py --calls "$tp" "$rows" --format "$fmt"; }
# --print-details all prints the tables themselves (shared wavefronts per operation), where this ncu has it
run --print-details all > "$f" 2>&1 || run > "$f" 2>&1
grep -E "Duration|L1/TEX Cache Throughput|DRAM Throughput|Shared (Load|Store)|Global Load|Bank|Wavefronts|Stall" "$f" | head -40
if [ "${3:-}" = sass ]; then
  s="$out/ncu_attend_${tag}tp${tp}_${rows}_sass.csv"
  run --page source --print-source sass --csv > "$s" 2>&1 || echo "profile_attend: ncu printed no SASS page (see $s)" >&2
fi
