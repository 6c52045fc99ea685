#!/usr/bin/env bash
# Issue 14, rows of 16K-32K keys on one CTA: the row staged in dynamic shared memory (32 keys a
# thread, 16-byte units swizzled so that a quarter-warp's loads hit eight bank groups) and selected
# as the register rows are (index_topk_staged32_b260868.patch, measurement only: reached by
# dsa_testing_force_index_topk 3, bench_index.py --topk staged; the launch gives dynamic shared
# memory for the table's width), against the split (auto) and one CTA reading L2 (one). Its test
# against one CTA a row first (test_index paths: rows up to 50,037 keys, chunks of 1 and 64).
. "$(dirname "$0")/patches.sh"
patch_on index_topk_staged32_b260868.patch
echo "== test_index paths"; timeout 240 build/tests/gpu/test_index paths 2>&1 | grep -E "FAIL|staged|passed" | tail -n 24
echo "== bench"; timeout 240 python3 tests/bench/bench_index.py --topk auto,one,staged --rows 1,8,64,128 --context 16384,32768 --no-peer 2>&1 | grep "^|"
patch_off
