#!/usr/bin/env bash
# Fuzzes the spec loader and validator (tests/fuzz/fuzz_spec.c, ASan+UBSan) for SECONDS (default
# 60), seeded from specs/ and the bad-spec tests. tests/run.sh runs it for 60 s; for longer:
#   tests/fuzz/run.sh 3600
# New inputs collect in build/fuzz/corpus (kept between runs); a finding is written to
# build/fuzz/crash-* (or leak-*, timeout-*) and the script exits non-zero. Reproduce one with
#   DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work build/fuzz/fuzz_spec build/fuzz/crash-...
set -eu
cd "$(dirname "$0")/../.."
secs=${1:-60}
ninja build/fuzz/fuzz_spec >/dev/null
mkdir -p build/fuzz/corpus build/fuzz/work build/fuzz/seeds
cp -r tests/gen/import/models build/fuzz/work/
# seeds: every shipped spec and test spec (one folder: libFuzzer reads files, not subfolders)
for f in specs/*.lua tests/gen/bad/*.lua tests/gen/import/*.lua tests/gen/import/models/*.lua; do
  cp "$f" "build/fuzz/seeds/$(echo "$f" | tr / _)"
done
export DSAGEN_FUZZ_DIR=$PWD/build/fuzz/work
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
exec build/fuzz/fuzz_spec -max_total_time="$secs" -timeout=30 -rss_limit_mb=4096 -close_fd_mask=2 \
  -dict=tests/fuzz/spec.dict -artifact_prefix=build/fuzz/ -print_final_stats=1 \
  build/fuzz/corpus build/fuzz/seeds
