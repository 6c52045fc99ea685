#!/usr/bin/env bash
# Every configuration linked into libdsa compiled in parallel by dsa-jit into the JIT cache folder
# CACHE, for the sm_90a of their plans and for sm_90 (which test_attend also runs: the mma.sync
# loop), so that a GPU test reading that cache (DSA_TEST_CACHE) compiles nothing itself. dsa-jit's
# report goes to LOG. Exit 1 where dsa-jit failed on some configuration (an NVRTC error, or one it
# refuses, for local memory say: such modules are cached all the same, and a test compiles
# whatever is missing itself).
# Usage: tests/gpu/jit_all.sh CACHE LOG   (from the repository root, after `ninja gpu`)
set -uo pipefail
[ $# -eq 2 ] || { echo "usage: $0 CACHE LOG" >&2; exit 2; }
status=0
build/dsa-jit --list | xargs -P "$(nproc)" -n 1 build/dsa-jit --cache "$1" > "$2" 2>&1 || status=1
build/dsa-jit --list | xargs -P "$(nproc)" -n 1 build/dsa-jit --target sm_90 --cache "$1" >> "$2" 2>&1 || status=1
exit "$status"
