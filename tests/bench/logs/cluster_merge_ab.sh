ln -sfn /usr/local/cuda .cuda
ninja gpu >/dev/null || exit 1
export DSA_TEST_CACHE=/tmp/jc
echo "== tree (v1)"; timeout 120 python3 tests/bench/bench_attend.py --merge-sweep
git apply tests/bench/logs/attend_cluster_launch_only_diag.patch && ninja gpu >/dev/null && echo "== launch only (clusters launched, merged by the kernel)" && timeout 120 python3 tests/bench/bench_attend.py --merge-sweep; git apply -R tests/bench/logs/attend_cluster_launch_only_diag.patch
git apply tests/bench/logs/attend_cluster_merge_v2_loads_first.patch && ninja gpu >/dev/null && echo "== v2 (loads first, S a template)" && timeout 150 build/tests/gpu/test_attend > $OUT/test_attend_v2.log 2>&1; echo "test_attend rc $?"; grep -E "FAIL|passed" $OUT/test_attend_v2.log | tail -3; timeout 120 python3 tests/bench/bench_attend.py --merge-sweep; timeout 100 python3 tests/bench/bench_attend.py --line v2; git apply -R tests/bench/logs/attend_cluster_merge_v2_loads_first.patch
ninja gpu >/dev/null; echo "== tree again"; timeout 120 python3 tests/bench/bench_attend.py --merge-sweep
