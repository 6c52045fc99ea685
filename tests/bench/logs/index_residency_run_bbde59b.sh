#!/usr/bin/env bash
# Issue 14, the persistent grid's two unknowns (tests/bench/logs/index_persistent_grid_model.py),
# measured before any such kernel is built, on an H200 (or H100) after `ninja gpu`:
# 1. what the scores lose with fewer CTAs an SM: index_score's shared memory padded so that 4 (as
#    today), 3 or 2 fit (index_score_ctas_pad_bbde59b.patch, runtime only; DSA_SCORE_CTAS_SM);
# 2. the split top-k at 128 threads a CTA (index_topk_split_128threads_bbde59b.patch: the plan's
#    index_topk_split_threads 512 -> 128, out/ regenerated), its kernel time by ncu and the call's.
. "$(dirname "$0")/patches.sh"
patch_on index_score_ctas_pad_bbde59b.patch
for n in 4 3 2; do
  DSA_SCORE_CTAS_SM=$n timeout 150 python3 tests/bench/bench_index.py --line "scores at $n CTAs an SM" --rows 64,128 --context 32768,131072 2>&1 | grep -v "^index_score: " | tail -1
done
DSA_SCORE_CTAS_SM=3 python3 tests/bench/bench_index.py --line probe --rows 64 --context 32768 2>&1 | grep -m1 "^index_score: "
patch_off
echo "== the tree's kernels"; tests/bench/index_stages.sh 64,128 32768
patch_on index_topk_split_128threads_bbde59b.patch
echo "== test_index paths, split top-k at 128 threads"; timeout 240 build/tests/gpu/test_index paths 2>&1 | tail -2
echo "== 128 threads: kernels"; tests/bench/index_stages.sh 1,64,128 32768
python3 tests/bench/bench_index.py --line "top-k at 128 threads" --rows 1,64,128 --context 32768,131072 2>&1 | tail -1
patch_off
python3 tests/bench/bench_index.py --line "tree" --rows 1,64,128 --context 32768,131072 2>&1 | tail -1
