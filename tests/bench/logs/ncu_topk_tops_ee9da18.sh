#!/usr/bin/env bash
# ncu on the split top-k (the fourth call), tree vs the tops patch, 64 and 128 rows of 128K (GLM-5.2)
cd "$(dirname "$0")/../../.." || exit 1
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
for v in tree tops; do
  [ $v = tops ] && git apply tests/bench/logs/index_topk_gather_tops_ee9da18.patch
  touch kernels/*; ninja gpu > /dev/null || exit 1
  for r in 64 128; do
    echo "== $v rows $r"
    ncu --clock-control none --kernel-name regex:dsa_index_topk_split_ --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats --section Occupancy \
      --metrics dram__bytes_read.sum,lts__t_sectors_op_read.sum,lts__t_sector_op_read_hit_rate.pct,sm__inst_executed.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum \
      python3 tests/bench/bench_index.py --calls glm5.2_tp4_dcp1_i1_fp8_ds_mla $r 131072 2>&1 | grep -vE "^==PROF==|^calls" 
  done
done
git apply -R tests/bench/logs/index_topk_gather_tops_ee9da18.patch
