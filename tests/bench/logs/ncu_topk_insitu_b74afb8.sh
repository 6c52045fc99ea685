#!/usr/bin/env bash
# ncu on the split top-k and the score kernel as they run in the call (no cache flush, the real
# clock), the tree and with logs/index_scores_l2_keys_first_b74afb8.patch: DRAM bytes the top-k
# reads (are the row's scores still in L2 when it starts?), GLM-5.2 and DeepSeek-V3.2, 64 and 128
# rows of 128K. Run from the repository root on a device machine after `ninja gpu`.
cd "$(dirname "$0")/../../.." || exit 1
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
for v in tree l2; do
  [ $v = l2 ] && git apply tests/bench/logs/index_scores_l2_keys_first_b74afb8.patch
  touch kernels/*; ninja gpu > /dev/null || exit 1
  for cfg in glm5.2_tp4_dcp1_i1_fp8_ds_mla deepseek_v32_tp8_dcp1_i1_fp8_ds_mla; do
    for r in 64 128; do
      echo "== $v $cfg rows $r"
      ncu --cache-control none --clock-control none --kernel-name 'regex:dsa_index_(topk_split|score)_' --launch-skip 6 --launch-count 2 \
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_op_read_hit_rate.pct \
        python3 tests/bench/bench_index.py --calls $cfg $r 131072 2>&1 | grep -E "^  dsa_index|gpu__time|dram__|lts__"
    done
  done
done
git apply -R tests/bench/logs/index_scores_l2_keys_first_b74afb8.patch
