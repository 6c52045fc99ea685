#!/usr/bin/env bash
# Runs one of the libFuzzer fuzzers (clang, ASan+UBSan) for SECONDS (default 60):
#   tests/fuzz/run.sh [spec] [SECONDS]  the spec loader and validator (tests/fuzz/fuzz_spec.c), seeded
#                                       from specs/ and the bad-spec tests
#   tests/fuzz/run.sh args [SECONDS]    the runtime's argument checks (tests/fuzz/fuzz_args.c: the
#                                       per-layer calls' checks on a context without a device; needs
#                                       the CUDA headers at .cuda, like the runtime)
#   tests/fuzz/run.sh plan [SECONDS]    the runtime's plan parser (tests/fuzz/fuzz_plan.c: plan.txt as
#                                       it is and resealed, then the checks a parsed plan goes
#                                       through before use), seeded from out/*/plan.txt and
#                                       tests/gpu/outside/*/plan.txt; needs .cuda too
# tests/run.sh runs the spec fuzzer for 60 s, the argument one for 30 s and the plan one for 20 s;
# for longer:
#   tests/fuzz/run.sh 3600
#   tests/fuzz/run.sh args 3600
#   tests/fuzz/run.sh plan 3600
# New inputs collect in build/fuzz/corpus (build/fuzz/args-corpus, build/fuzz/plan-corpus), kept
# between runs; a finding is written to build/fuzz/crash-* (build/fuzz/args-crash-*,
# build/fuzz/plan-crash-*; or leak-*, timeout-*) and the script exits non-zero. Reproduce one with
#   DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work build/fuzz/fuzz_spec build/fuzz/crash-...
#   build/fuzz/fuzz_args build/fuzz/args-crash-...
#   build/fuzz/fuzz_plan build/fuzz/plan-crash-...
set -eu
cd "$(dirname "$0")/../.."
which=spec
case "${1:-}" in spec | args | plan) which=$1; shift ;; esac
secs=${1:-60}
case "$which" in spec) corpus=build/fuzz/corpus ;; *) corpus=build/fuzz/$which-corpus ;; esac
echo "corpus: $corpus" # tests/run.sh names it from this line
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# the fuzzer built first, unless the caller built it (DSA_FUZZ_BUILT=1: tests/run.sh, whose own ninja
# runs may overlap this script's, and two ninjas in one build folder can clash over its logs)
build() { [ "${DSA_FUZZ_BUILT:-0}" = 1 ] || ninja "$1" >/dev/null; }
if [ "$which" = args ]; then
  build build/fuzz/fuzz_args
  mkdir -p "$corpus"
  exec build/fuzz/fuzz_args -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=build/fuzz/args- -print_final_stats=1 "$corpus"
fi
if [ "$which" = plan ]; then
  build build/fuzz/fuzz_plan
  mkdir -p "$corpus" build/fuzz/plan-seeds
  # seeds: every generated plan, named by its folder (one folder: libFuzzer reads files, not subfolders)
  for f in out/*/plan.txt tests/gpu/outside/*/plan.txt; do
    cp "$f" "build/fuzz/plan-seeds/$(dirname "$f" | tr / _).txt"
  done
  # and one plan past each limit that mutations seldom reach from those: a line of more than 8191
  # characters, a line after the seal (a source line, the one kind a plan may gain), more rope
  # frequencies (129) and more source lines (9) than a plan holds
  p=out/tiny_tp4_dcp1_i1_bf16/plan.txt zeros=$(printf '0%.0s' $(seq 64))
  { cat "$p"; printf 'rope_mscale %9000s\n' 1; } > build/fuzz/plan-seeds/edge_long_line.txt
  { cat "$p"; echo "source extra.cu $zeros"; } > build/fuzz/plan-seeds/edge_after_seal.txt
  sed "s/^rope_freq .*/rope_freq$(printf ' 0x1p-1%.0s' $(seq 129))/" "$p" > build/fuzz/plan-seeds/edge_rope_freq.txt
  sed "s/^source index.cu .*/&$(printf '\\nsource extra%d.cu '"$zeros" $(seq 5))/" "$p" \
    > build/fuzz/plan-seeds/edge_sources.txt
  # -max_len: past the parser's longest line (8191 characters), so that its limit is fuzzed too
  exec build/fuzz/fuzz_plan -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=20000 \
    -dict=tests/fuzz/plan.dict -artifact_prefix=build/fuzz/plan- -print_final_stats=1 \
    "$corpus" build/fuzz/plan-seeds
fi
build build/fuzz/fuzz_spec
mkdir -p "$corpus" build/fuzz/work build/fuzz/seeds
cp -r tests/gen/import/models build/fuzz/work/
# seeds: every shipped spec and test spec (one folder: libFuzzer reads files, not subfolders)
for f in specs/*.lua tests/gen/bad/*.lua tests/gen/bad/models/*.lua tests/gen/import/*.lua tests/gen/import/models/*.lua; do
  cp "$f" "build/fuzz/seeds/$(echo "$f" | tr / _)"
done
export DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work
exec build/fuzz/fuzz_spec -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -close_fd_mask=2 \
  -dict=tests/fuzz/spec.dict -artifact_prefix=build/fuzz/ -print_final_stats=1 \
  "$corpus" build/fuzz/seeds
