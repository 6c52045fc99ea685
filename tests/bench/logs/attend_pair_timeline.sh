#!/usr/bin/env bash
# Throwaway (issue 15; never to land in the product): the 128-head pair's row timeline in fp8_ds_mla and
# bf16 (attend_pair_timeline_instrument.py, attend_pair_timeline_run.py) in one device call, on any
# GPU, carrying .bench-out: `bash tests/bench/logs/attend_pair_timeline.sh`. It patches kernels/ and
# restores them from a copy afterwards (the device's copy may have no git). Log: $OUT/pair_timeline_<gpu>.log.
set -uo pipefail
cd "$(dirname "$0")/../../.." || exit 1
L=tests/bench/logs
: "${OUT:?attend_pair_timeline: run it through the device, where \$OUT is set}"
g=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
tag=$(case "$g" in *H200*) echo h200 ;; *H100*) echo h100 ;; *) echo gpu ;; esac)
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
rm -rf /tmp/kernels.pair && cp -r kernels /tmp/kernels.pair || exit 1
python3 $L/attend_pair_timeline_instrument.py && ninja gpu > /tmp/pair_build.log 2>&1 &&
  timeout 200 python3 $L/attend_pair_timeline_run.py > "$OUT/pair_timeline_$tag.log" 2>&1
rc=$?
echo "pair timeline on $g: rc $rc"
[ $rc -eq 0 ] || tail -20 /tmp/pair_build.log
grep '^XR' "$OUT/pair_timeline_$tag.log" | grep -v ' u [0-9]*: ' | head -40
rm -rf kernels && cp -r /tmp/kernels.pair kernels && ninja gpu > /dev/null 2>&1 # the tree's kernels again
exit $rc
