#!/usr/bin/env bash
# Where decode index calls' time goes, kernel by kernel, in the calls' own conditions (for the H200
# machines, after `ninja gpu`): Nsight Compute times each of libdsa's stage B kernels (the query, the
# scores, the top-k) of four calls at each point, with the caches as the call before left them and
# the GPU's own clock (--cache-control none --clock-control none), and prints one line a point, the
# median of each kernel (ncu_durations.py). The kernels' sum against bench_index.py's line for the
# same point shows the launches' gaps; the scores against the floor (rows x context x (head_dim + 4)
# bytes over the copy bandwidth) show the score kernel's own excess.
# Usage: tests/bench/index_stages.sh [ROWS,.. [CONTEXT,..]]   (default 1,64,128 and 32768,131072)
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
rows=${1:-1,64,128} contexts=${2:-32768,131072}
status=0
for cfg in deepseek_v32_tp8_dcp1_i1_fp8_ds_mla glm5.2_tp4_dcp1_i1_fp8_ds_mla; do
  for r in ${rows//,/ }; do
    for c in ${contexts//,/ }; do
      ncu --kernel-name regex:dsa_index_ --cache-control none --clock-control none \
          --metrics gpu__time_duration.sum --csv python3 tests/bench/bench_index.py --calls "$cfg" "$r" "$c" 2>/dev/null |
        python3 tests/bench/ncu_durations.py "${cfg%%_*} ${r} x $((c / 1024))K" dsa_index_ || status=1
    done
  done
done
exit $status
