#!/usr/bin/env bash
# A/B runs on an H200 machine, the method of RESULTS.md: the tree as it is and each variant (a patch
# against it, applied with `git apply`, which needs no repository) built and timed back to back in
# one call, one benchmark line each, the whole sequence ROUNDS times so that run-to-run drift shows.
# --bench attend (the default): `bench_attend.py --line` (the sparse MLA, L2 flushed, every heads x
# rows point of the grid); --bench index: `bench_index.py --line` (stage B at decode, back to back /
# L2 flushed, both models x rows x context); --bench prefill: `bench_prefill.py --line` (stage B's
# scores at prefill, both models, us and share of torch._scaled_mm timed beside them; its test is
# test_index); --bench prefill-ncu: the same run under Nsight Compute, which locks the SM clock, and
# the grouped score kernel's median duration per model (ncu_durations.py): differences of a few
# percent that the power state of the moment hides in bench_prefill's own timing (its test too is
# test_index).
# Usage: tests/bench/ab.sh [--bench attend|index|prefill|prefill-ncu] [--rounds N] [--test ARGS] [--format F]
#                          [--rows R] [--context C] TAG=PATCH[,BENCH_OUT] ...
#   BENCH_OUT: the variant's own dsagen output for the attend grid (a variant that changes
#   plan.txt), swapped in for .bench-out while it runs. --test ARGS: the bench's GPU test on each
#   variant first, the tree included (test_attend ARGS or test_index ARGS; `all`: no argument, every
#   case; one that fails or hangs is not timed; a failing tree stops the run). --format F (attend):
#   the cache format timed (fp8_ds_mla, the default; nvfp4_ds_mla; bf16). --rows, --context (index):
#   bench_index.py's lists (default 1,8,64,128 and 32768,131072).
#   Lines go to stdout; the tree is restored. Timeouts are short (a test 240 s, a line 150 s,
#   where one takes under 60): a kernel that hangs must not eat the device time of the call.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
bench=attend rounds=1 targs="" format=fp8_ds_mla rows=1,8,64,128 context=32768,131072
while [ $# -gt 0 ]; do
  case "$1" in
    --bench) bench=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --test) targs=$2; shift 2 ;;
    --format) format=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --context) context=$2; shift 2 ;;
    *) break ;;
  esac
done
# Where $OUT is set (a device call), every line also goes into $OUT/ab.log as it is printed: a call cut
# at its time limit still brings back what was measured (output held for a pipe's end is lost with it)
if [ -n "${OUT:-}" ]; then
  exec > >(tee -a "$OUT/ab.log") 2>&1
  tee_pid=$!
  trap 'exec >&- 2>&-; wait "$tee_pid"' EXIT # the log complete before the script returns
fi
case "$bench" in attend | index | prefill | prefill-ncu) ;; *) echo "ab: --bench attend, index, prefill or prefill-ncu, not $bench" >&2; exit 2 ;; esac
[ $# -gt 0 ] || { echo "usage: $0 [--bench attend|index|prefill|prefill-ncu] [--rounds N] [--test ARGS] [--format F] [--rows R] [--context C] TAG=PATCH[,BENCH_OUT] ..." >&2; exit 2; }
for v in "$@"; do
  p=${v#*=}; p=${p%%,*}
  git apply --check "$p" || { echo "ab: $p does not apply to this tree" >&2; exit 2; }
done
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
# each build's seconds printed, so that a call cut short by its bound shows where its time went
build() {
  local t0=$SECONDS
  touch kernels/* runtime/* templates/*
  ninja gpu > /tmp/ab_build.log 2>&1 || { tail -20 /tmp/ab_build.log; return 1; }
  echo "ab: built in $((SECONDS - t0)) s"
}
line() {
  if [ "$bench" = attend ]; then
    timeout 150 python3 tests/bench/bench_attend.py --line "$1" --format "$format" || echo "$1: failed ($?)"
  elif [ "$bench" = prefill ]; then
    timeout 150 python3 tests/bench/bench_prefill.py --line "$1" || echo "$1: failed ($?)"
  elif [ "$bench" = prefill-ncu ]; then
    local k=dsa_index_score_group_ # the grouped score kernels' entries: what ncu times and the lines name
    timeout 150 ncu --kernel-name "regex:$k" --metrics gpu__time_duration.sum --csv \
      python3 tests/bench/bench_prefill.py --line "$1" | python3 tests/bench/ncu_durations.py "$1" "$k" ||
      echo "$1: failed"
  else
    timeout 150 python3 tests/bench/bench_index.py --line "$1" --rows "$rows" --context "$context" || echo "$1: failed ($?)"
  fi
}
# the bench's test with ARGS (all: none), its last line tagged; 1 where it failed or timed out (124).
# The test compiles each configuration's kernels with NVRTC as it reaches it, one after another
# (~100 s for test_attend all after a kernel change); so first tests/gpu/jit_all.sh compiles every
# linked configuration, all at once, into a fresh JIT cache that the test then reads (dsa-jit
# compiles with the runtime's function and target, so the test finds every module there)
check() {
  local test=test_${bench/prefill*/index} args=() cache
  local t=build/tests/gpu/$test
  [ "$targs" = all ] || read -r -a args <<< "$targs"
  cache=$(mktemp -d /tmp/ab-jit.XXXXXX) || return 1
  local t0=$SECONDS
  if ! tests/gpu/jit_all.sh "$cache" /tmp/ab_jit.log; then
    # why, in the call's own output (the log stays on the device): dsa-jit's lines that are not its
    # table's (those name a configuration or dsa-jit itself, then a colon)
    echo "$1: dsa-jit failed on some configuration; the test compiles those itself. Its reasons:"
    grep -E '^(dsa-jit|[^ ]+): ' /tmp/ab_jit.log | sort -u | head -8 | sed "s/^/$1:   /"
  fi
  echo "ab: $1: dsa-jit over every configuration in $((SECONDS - t0)) s"
  DSA_TEST_CACHE=$cache timeout 240 stdbuf -oL "$t" "${args[@]}" | tail -1 | sed "s/^/$1 $test $targs: /"
  local rc=${PIPESTATUS[0]}
  rm -rf "$cache"
  [ "$rc" = 124 ] && echo "$1 $test $targs: timed out (a kernel hangs)"
  return "$rc"
}
build || exit 1
if [ -n "$targs" ]; then check tree || exit 1; fi
failed=""
for r in $(seq "$rounds"); do
  # the last variant of the round before left its build: the tree's again (its sources are restored)
  if [ "$r" -gt 1 ]; then build || exit 1; fi
  line "base-$r"
  for v in "$@"; do
    tag=${v%%=*} rest=${v#*=}; p=${rest%%,*}; bo=""; [ "$rest" != "$p" ] && bo=${rest#*,}
    case " $failed " in *" $tag "*) continue ;; esac
    git apply "$p" || { echo "$tag: patch failed"; continue; }
    [ -n "$bo" ] && mv .bench-out .bench-out.ab && cp -r "$bo" .bench-out
    ok=1
    build || ok=0
    if [ $ok = 1 ] && [ -n "$targs" ] && [ "$r" = 1 ]; then
      check "$tag" || ok=0
    fi
    if [ $ok = 1 ]; then line "$tag-$r"; else failed="$failed $tag"; echo "$tag: not timed"; fi
    git apply -R "$p"
    [ -n "$bo" ] && rm -rf .bench-out && mv .bench-out.ab .bench-out
  done
done
build > /dev/null
