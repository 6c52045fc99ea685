#!/usr/bin/env bash
# Throwaway (issue 15; never to land in the product): the H200 questions of the 16-head kernel in one
# device call (~8-9 min with the start), every log into $OUT as it goes. On the H100 the 16-head steady
# state sits at the gather bound (2.3-2.4 us a 64-key tile); on the H200 the tile takes as long,
# against a gather bound of ~1.8 us (tests/bench/RESULTS.md, fifty-fourth and fifty-seventh sessions).
#   1. the producer microbenchmark: do eight producer warps with one tile in flight reach the H200's
#      gather bound, and if not, which of two tiles, sixteen warps or the copy engine does;
#   2. the deep fp8 producer (two tiles' loads in flight) against the tree, two rounds (16 heads;
#      it lost 1 us at 8-64 rows on the H100; on the H200 the loads' latency may be what binds);
#   3. the row timeline of two unsplit 16- and 32-head CTAs at 128 rows, of the tree and of the deep
#      producer: per tile, how long each buffer's three steps take (the producers' put, the handoff,
#      the consumer group's chain; on the H100 1.3-2.3, 0.5-0.8 and 2.2-2.3 us). It patches
#      kernels/ and restores them after each run. With SKIP_AB=1 the tree's timeline runs first,
#      then 1, then the deep timeline; 2 is skipped.
# Run from the tree root on the device, carrying .bench-out: `bash tests/bench/logs/h200_questions.sh`.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
L=tests/bench/logs
: "${OUT:?h200_questions: run it through the device, where \$OUT is set}"
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "h200_questions: $g"
case "$g" in *H200*) ;; *) echo "h200_questions: these questions need an H200, not $g"; exit 2 ;; esac
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
plm() {
  nvcc -O3 -arch=sm_90a -std=c++17 -o /tmp/plm $L/producer_layout_mb.cu &&
    timeout 150 /tmp/plm > "$OUT/plm_h200.log" 2>&1
  echo "plm rc $?"
  cat "$OUT/plm_h200.log"
}
# the timeline twice: the tree's kernels, then with the deep fp8 producer (the instrument stamps its
# branch too); kernels/ restored from a copy after each (the device's copy may have no git)
# (the copy made afresh: one left by an earlier run on the same machine may hold stamped kernels)
rm -rf /tmp/kernels.orig && cp -r kernels /tmp/kernels.orig || exit 1
restore() { rm -rf kernels && cp -r /tmp/kernels.orig kernels; }
timeline() { # $1: tag, $2: a patch to apply first, or ""
  restore
  { [ -z "$2" ] || git apply "$2"; } && python3 $L/attend_row_timeline_instrument.py &&
    ninja gpu > /tmp/tl_build.log 2>&1 &&
    timeout 200 python3 $L/attend_row_timeline_run.py > "$OUT/row_timeline_$1_h200.log" 2>&1
  echo "timeline $1 rc $?"
  grep '^XR' "$OUT/row_timeline_$1_h200.log" | head -60
}
if [ -n "${SKIP_AB:-}" ]; then
  # SKIP_AB=1, for a short budget (~6 min): no deep A/B (the H100 answered it twice), and the tree's
  # timeline first, the open question, so that a call cut at its limit still brings it back
  timeline tree ""
  plm
else
  plm
  tests/bench/ab.sh --rounds 2 deep=$L/attend_deep_fp8_f0727e0.patch > /dev/null 2>&1 # ab.sh writes $OUT/ab.log
  grep -v '^ab: built' "$OUT/ab.log"
  timeline tree ""
fi
timeline deep $L/attend_deep_fp8_f0727e0.patch
restore && ninja gpu > /dev/null 2>&1 # the tree's kernels again
