#!/usr/bin/env bash
# The thirty-first session's racecheck diagnosis in one command, for the device (tests/bench/RESULTS.md,
# "compute-sanitizer on the top-k of several segments"): the segment-count hand-over alone under
# racecheck in its four modes (tests/gpu/racecheck_probe.cu; tests/bench/logs/racecheck_count_slot_mb.cu when it ran at b72f585), then test_attend on a top-k of three
# segments and on a top-k 2048 control with racecheck's hazard report (thread pairs and addresses).
# Logs into $OUT (or /tmp): racecheck_mb.log, rc_<configuration>.log. Needs `ninja gpu` built or
# buildable. Usage: bash tests/bench/logs/racecheck_diag.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
log=${OUT:-/tmp}
cs=/usr/local/cuda/bin/compute-sanitizer
nvcc -O3 -arch=sm_90a -o /tmp/rcmb tests/gpu/racecheck_probe.cu || exit 1
for m in 0 1 2 3; do
  echo "== racecheck_count_slot_mb mode $m"
  timeout 60 "$cs" --tool racecheck /tmp/rcmb "$m" 2>&1 | grep -E "mode|SUMMARY|Race reported" | sort | uniq -c
done | tee "$log/racecheck_mb.log"
ninja gpu > /dev/null || exit 1
cache=$(mktemp -d)
for c in tiny_k5000_tp8_dcp1_i1_fp8 tiny_tp4_dcp1_i1_fp8; do
  echo "== racecheck --racecheck-report hazard test_attend $c"
  DSA_SANITIZE_BARRIERS=1 DSA_TEST_CACHE=$cache timeout 90 "$cs" --tool racecheck --racecheck-report hazard \
    --print-limit 12 build/tests/gpu/test_attend "$c" > "$log/rc_$c.log" 2>&1
  echo "exit $?"
  grep -E "passed|SUMMARY" "$log/rc_$c.log"
  grep -m 12 -E "hazard detected|Write Thread|Read Thread|Current Value" "$log/rc_$c.log"
done
