#!/usr/bin/env bash
# The index call's kernels one by one (ncu, real clock, the 4th call), the tree and then the tree with
# the revert patch: where the first-pass change's time goes. Run from the repository root on the H200
# at 27d7d43 with its revert (git diff HEAD dda6091 -- kernels runtime/calls.c) as the patch named below.
set -u
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
one() {
  for pt in "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla 64 131072" "glm5.2_tp4_dcp1_i1_fp8_ds_mla 64 131072" "deepseek_v32_tp8_dcp1_i1_fp8_ds_mla 1 131072"; do
    echo "== $1 $pt"
    timeout 120 ncu --clock-control none --kernel-name regex:dsa_index --metrics gpu__time_duration.sum --csv \
      python3 tests/bench/bench_index.py --calls $pt 2>/dev/null | grep gpu__time_duration | tail -n 3 | \
      python3 -c "import sys,csv; [print(r[4][:40], r[-1]) for r in csv.reader(sys.stdin)]"
  done
}
touch kernels/* runtime/* templates/*; ninja gpu > /tmp/b1.log 2>&1 || tail -5 /tmp/b1.log
one tree
git apply tests/bench/logs/index_first_pass_revert_27d7d43.patch
touch kernels/* runtime/* templates/*; ninja gpu > /tmp/b2.log 2>&1 || tail -5 /tmp/b2.log
one old
git apply -R tests/bench/logs/index_first_pass_revert_27d7d43.patch
