#!/usr/bin/env bash
# Issue 14, one row's stage B: the one-CTA top-k with the row staged in shared memory
# (index_topk_staged_5aba492.patch; dsa_testing_force_index_topk 3, bench_index.py --topk staged),
# its test against one CTA a row reading L2, then its time beside the runtime's choice and the
# unstaged one CTA, at rows whose keys fit (8K and 32K: 32 and 128 KiB).
. "$(dirname "$0")/patches.sh"
patch_on index_topk_staged_5aba492.patch
echo "== test_index paths"; timeout 240 build/tests/gpu/test_index paths 2>&1 | grep -E "staged|FAIL|passed" | tail -n 40
echo "== bench"; timeout 200 python3 tests/bench/bench_index.py --topk auto,staged,one --rows 1,8,64,128 --context 8192,32768 --no-peer 2>&1 | tail -n 52
patch_off
