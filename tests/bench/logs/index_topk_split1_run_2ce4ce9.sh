#!/usr/bin/env bash
# Issue 14, short rows' top-k: the split kernel at one CTA a row (index_topk_split1_92efad2.patch;
# measurement only: dsa_testing_force_index_topk 4, bench_index.py --topk split1; decode rows only,
# since its cooperative grid is one CTA a row), which takes the scores' first-pass counts (GLM-5.2)
# and finishes the candidates in shared memory, against the one-CTA kernel's four 8-bit passes over
# the row and the runtime's choice. Its test against one CTA a row first.
. "$(dirname "$0")/patches.sh"
patch_on index_topk_split1_92efad2.patch
echo "== test_index paths"; timeout 240 build/tests/gpu/test_index paths 2>&1 | grep -E "one CTA a row against|FAIL|passed" | tail -n 20
echo "== bench"; timeout 200 python3 tests/bench/bench_index.py --topk auto,one,split1 --rows 1,8,64,128 --context 8192,16384,32768 --no-peer 2>&1 | tail -n 50
patch_off
