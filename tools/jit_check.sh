#!/usr/bin/env bash
# Before a kernel change is timed or landed: every kernel of every configuration this repository
# generates compiled with NVRTC by dsa-jit, which fails on local memory (spills, stack), on
# serialized warpgroup MMAs and on NVRTC errors. That is the configurations linked into libdsa (for
# their own targets and for sm_90), the benchmark grids (specs/models/bench_*.lua) and the test
# configurations generated outside specs/ (tests/gen/derive, tests/gen/outside), which tests/run.sh
# compiles only in part. A patch compiled on the linked configurations alone once spilled at a
# derive configuration (tests/bench/RESULTS.md, fifty-fifth session).
# Usage: tools/jit_check.sh [PATCH...]   (no GPU needed; after tools/setup.sh)
#   With patches: they are applied in a scratch worktree of HEAD, which is removed after;
#   without: the working tree as it is. Prints each failing configuration's report; exit 1 if any.
set -uo pipefail
patches=()
for p in "$@"; do # resolved where the caller stands
  [ -f "$p" ] || { echo "jit_check: no patch $p" >&2; exit 2; }
  patches+=("$(realpath "$p")")
done
cd "$(dirname "$0")/.." || exit 1
root=$PWD
tmp=$(mktemp -d)
wt=""
cleanup() {
  [ -n "$wt" ] && git -C "$root" worktree remove --force "$wt"
  rm -rf "$tmp"
}
trap cleanup EXIT
if [ ${#patches[@]} -gt 0 ]; then
  [ -e "$root/.cuda/include/nvrtc.h" ] || { echo "jit_check: no .cuda here: run tools/setup.sh first" >&2; exit 1; }
  wt=$tmp/tree
  git worktree add -q --detach "$wt" HEAD || exit 1
  for p in "${patches[@]}"; do
    git -C "$wt" apply "$p" || { echo "jit_check: $p does not apply at HEAD" >&2; exit 1; }
  done
  ln -sfn "$(readlink -f "$root/.cuda")" "$wt/.cuda" # this tree's toolkit, whichever setup.sh chose
  cd "$wt" || exit 1
fi
ninja build/dsagen build/dsa-jit >/dev/null || { echo "jit_check: build failed" >&2; exit 1; }
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$PWD/.cuda/lib64:$PWD/.cuda/lib # toolkit, wheels
failed=0
# each spec on its own (dsagen writes all of a run or nothing), so one that fails loses no other
for spec in specs/models/bench_*.lua tests/gen/derive/*.lua tests/gen/outside/*.lua; do
  out=$(build/dsagen "$spec" -o "$tmp/gen/$(basename "$spec" .lua)" 2>&1) ||
    { echo "jit_check: dsagen $spec: $out"; failed=$((failed + 1)); }
done
# the linked configurations as the GPU suite compiles them (their targets and sm_90; a fresh cache,
# so every module is compiled): its log's lines other than the table's are the failures
if ! tests/gpu/jit_all.sh "$tmp/cache" "$tmp/linked.log"; then
  failed=$((failed + 1))
  grep -vE '^configuration |(nvrtc|cache)$' "$tmp/linked.log"
fi
# the generated folders: one dsa-jit a job, as many at once as there are cores, each job's report in
# its own file
jobs=()
for d in "$tmp"/gen/*/*/; do jobs+=("--dir ${d%/}"); done
mkdir -p "$tmp/log"
printf '%s\n' "${jobs[@]}" | awk '{ print NR "\t" $0 }' |
  xargs -P "$(nproc)" -L 1 sh -c 'n=$1; shift; build/dsa-jit "$@" > "$0/$n" 2>&1 || touch "$0/$n.failed"' "$tmp/log"
for f in "$tmp"/log/*.failed; do
  [ -e "$f" ] || continue
  failed=$((failed + 1))
  grep -v '^configuration ' "${f%.failed}"
done
echo "jit_check: the linked configurations and ${#jobs[@]} generated ones, $failed failed"
[ "$failed" -eq 0 ]
