#!/usr/bin/env bash
# Issue 14: the score grid's splits a row at the 64- and 128-row decode points, against the
# runtime's one-wave choice (auto), after `ninja gpu`: index_score_splits_4512ac8.patch adds a
# measurement-only DSA_SCORE_SPLITS=N (at most the row's chunks). auto first and last, for drift.
. "$(dirname "$0")/patches.sh"
patch_on index_score_splits_4512ac8.patch
for s in auto 2 3 4 6 8 auto; do
  if [ $s = auto ]; then unset DSA_SCORE_SPLITS; else export DSA_SCORE_SPLITS=$s; fi
  timeout 150 python3 tests/bench/bench_index.py --line "score splits $s" --rows 64,128 --context 32768,131072 2>&1 | tail -1
done
unset DSA_SCORE_SPLITS
patch_off
