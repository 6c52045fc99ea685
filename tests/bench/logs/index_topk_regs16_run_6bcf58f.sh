#!/usr/bin/env bash
# Issue 14, one row's top-k past 8K keys: the one-CTA kernel holding rows of up to 16K keys in
# registers too (16 a thread, loaded once the row's length is known; index_topk_regs16_6bcf58f.patch,
# measurement only: reached by forcing one CTA a row, bench_index.py --topk one), against the split
# (auto) at 8K and 16K. Its test against the split first (test_index paths: rows up to 50K keys).
. "$(dirname "$0")/patches.sh"
patch_on index_topk_regs16_6bcf58f.patch
echo "== test_index paths"; timeout 240 build/tests/gpu/test_index paths 2>&1 | grep -E "FAIL|passed" | tail -n 20
echo "== bench"; timeout 200 python3 tests/bench/bench_index.py --topk auto,one --rows 1,8,64,128 --context 8192,16384 --no-peer 2>&1 | grep "^|"
patch_off
