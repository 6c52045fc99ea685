#!/usr/bin/env bash
# Runs one of the libFuzzer fuzzers (clang, ASan+UBSan) for SECONDS (default 60):
#   tests/fuzz/run.sh [spec] [SECONDS]  the spec loader and validator (tests/fuzz/fuzz_spec.c), seeded
#                                       from specs/ and the bad-spec tests
#   tests/fuzz/run.sh args [SECONDS]    the runtime's argument checks (tests/fuzz/fuzz_args.c: the
#                                       per-layer calls' checks on a context without a device; needs
#                                       the CUDA headers at .cuda, like the runtime)
# tests/run.sh runs the spec fuzzer for 60 s and the argument one for 30 s; for longer:
#   tests/fuzz/run.sh 3600
#   tests/fuzz/run.sh args 3600
# New inputs collect in build/fuzz/corpus (build/fuzz/args-corpus), kept between runs; a finding is
# written to build/fuzz/crash-* (build/fuzz/args-crash-*; or leak-*, timeout-*) and the script exits
# non-zero. Reproduce one with
#   DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work build/fuzz/fuzz_spec build/fuzz/crash-...
#   build/fuzz/fuzz_args build/fuzz/args-crash-...
set -eu
cd "$(dirname "$0")/../.."
which=spec
case "${1:-}" in spec | args) which=$1; shift ;; esac
secs=${1:-60}
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
if [ "$which" = args ]; then
  ninja build/fuzz/fuzz_args >/dev/null
  mkdir -p build/fuzz/args-corpus
  exec build/fuzz/fuzz_args -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix=build/fuzz/args- -print_final_stats=1 build/fuzz/args-corpus
fi
ninja build/fuzz/fuzz_spec >/dev/null
mkdir -p build/fuzz/corpus build/fuzz/work build/fuzz/seeds
cp -r tests/gen/import/models build/fuzz/work/
# seeds: every shipped spec and test spec (one folder: libFuzzer reads files, not subfolders)
for f in specs/*.lua tests/gen/bad/*.lua tests/gen/bad/models/*.lua tests/gen/import/*.lua tests/gen/import/models/*.lua; do
  cp "$f" "build/fuzz/seeds/$(echo "$f" | tr / _)"
done
export DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work
exec build/fuzz/fuzz_spec -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -close_fd_mask=2 \
  -dict=tests/fuzz/spec.dict -artifact_prefix=build/fuzz/ -print_final_stats=1 \
  build/fuzz/corpus build/fuzz/seeds
