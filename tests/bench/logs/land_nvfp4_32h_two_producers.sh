#!/usr/bin/env bash
# The GPU test that landing attend_nvfp4_32h_two_producers_land_fa90d2f.patch waits for (issue 15;
# RESULTS "nvfp4's scale loads and two producers at 32 heads, timed"), one device call, any GPU,
# ~4 min: the patch applied here (its out/ files included, so no dsagen is needed), `ninja gpu`,
# every linked configuration compiled by tests/gpu/jit_all.sh, test_attend nvfp4 and tp4, and
# compute-sanitizer memcheck and racecheck (DSA_SANITIZE_BARRIERS=1) of the tiny nvfp4 variant at
# 32 heads. Logs go to $OUT; the last line says PASS or FAIL. After a PASS, apply the patch in the
# checkout and commit it with fa90d2f's message. Usage: bash tests/bench/logs/land_nvfp4_32h_two_producers.sh
set -u
cd "$(dirname "$0")/../../.." || exit 1
out=${OUT:-$(mktemp -d)}
p=tests/bench/logs/attend_nvfp4_32h_two_producers_land_fa90d2f.patch
nvidia-smi --query-gpu=name --format=csv,noheader
if git apply --check "$p" 2>/dev/null; then git apply "$p" || exit 1; echo "applied $p"
elif git apply -R --check "$p" 2>/dev/null; then echo "$p already applied"
else echo "FAIL: $p does not apply"; exit 1; fi
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
t0=$SECONDS st=0
touch kernels/* runtime/* templates/*
ninja gpu > "$out/build.log" 2>&1 || { tail -30 "$out/build.log"; echo FAIL: build; exit 1; }
c=$(mktemp -d)
tests/gpu/jit_all.sh "$c" "$out/jit_all.log" || { echo "FAIL: jit_all (see jit_all.log)"; st=1; }
echo "built and compiled in $((SECONDS - t0)) s"
for a in nvfp4 tp4; do
  DSA_TEST_CACHE=$c timeout 240 build/tests/gpu/test_attend $a > "$out/test_attend_$a.log" 2>&1 || { st=1; echo "FAIL: test_attend $a"; }
  tail -1 "$out/test_attend_$a.log"
done
cs=/usr/local/cuda/bin/compute-sanitizer
for tool in memcheck racecheck; do
  sb=0; [ $tool = racecheck ] && sb=1
  DSA_SANITIZE_BARRIERS=$sb DSA_TEST_CACHE=$c timeout 200 $cs --tool $tool --error-exitcode 9 \
    build/tests/gpu/test_attend tiny_variants_tp4_dcp1_i1_nvfp4 > "$out/$tool.log" 2>&1 || { st=1; echo "FAIL: $tool"; }
  tail -1 "$out/$tool.log"
done
[ $st = 0 ] && echo "PASS ($((SECONDS - t0)) s)" || echo "FAIL ($((SECONDS - t0)) s)"
exit $st
