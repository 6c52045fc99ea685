#!/usr/bin/env bash
# ab.sh's loop on the CPU (tests/run.sh): in a scratch tree with stub ninja, python3, dsa-jit and test
# binary, an A/B of two rounds must test the tree and the variant (each test reading a JIT cache that
# dsa-jit filled first with every configuration it lists), time each round's base on a build of the
# restored sources (a later round's base once ran on the last variant's build) and each variant on
# its own, pass --test's arguments through, and leave the tree as it was; --bench prefill times
# bench_prefill.py's line and tests with test_index; --bench prefill-ncu runs that line under ncu
# and through ncu_durations.py, which must read ncu's CSV in any unit; where dsa-jit fails on a
# variant, ab.sh must print dsa-jit's reasons and still test it. Prints nothing and exits 0 when it
# does; else what differs.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d /tmp/dsagen-ab-test.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tests/bench" "$tmp/tests/gpu" "$tmp/kernels" "$tmp/runtime" "$tmp/templates" "$tmp/build/tests/gpu" "$tmp/stub"
cp "$root/tests/bench/ab.sh" "$tmp/tests/bench/ab.sh"
cp "$root/tests/gpu/jit_all.sh" "$tmp/tests/gpu/jit_all.sh"
echo tree > "$tmp/kernels/k.cuh"
: > "$tmp/runtime/r.c"
: > "$tmp/templates/t.in"
cat > "$tmp/v.patch" <<'P'
--- a/kernels/k.cuh
+++ b/kernels/k.cuh
@@ -1 +1 @@
-tree
+variant
P
# ninja records what it built; the benchmark's line says which build it ran on
printf '#!/bin/sh\ncat kernels/k.cuh >> build/built\n' > "$tmp/stub/ninja"
printf '#!/bin/sh\ncase "$1" in *ncu_durations.py) sed "s/^/durations $2 of /"; exit ;; esac\necho "$3: $(tail -1 build/built) $2 $4 $5 $6 $7"\n' > "$tmp/stub/python3"
# dsa-jit --list names two configurations, dsa-jit --cache DIR CONFIG leaves CONFIG's mark in DIR;
# the test's last line (all ab.sh keeps) carries the arguments it got and the marks in its cache
printf '#!/bin/sh\ncase "$1" in --list) echo cfg_a; echo cfg_b ;; --cache) : > "$2/$3" ;; esac\n' > "$tmp/build/dsa-jit"
printf '#!/bin/sh\necho "1 passed, 0 failed [$*]" $(ls "$DSA_TEST_CACHE")\n' > "$tmp/build/tests/gpu/test_index"
chmod +x "$tmp/stub/ninja" "$tmp/stub/python3" "$tmp/build/dsa-jit" "$tmp/build/tests/gpu/test_index"
got=$(PATH="$tmp/stub:$PATH" "$tmp/tests/bench/ab.sh" --bench index --rounds 2 --test "paths tiny" --rows 1,64 \
      v="$tmp/v.patch" 2>&1)
# with each step's seconds (any count: the stubs may cross a second), which the later cases drop
want="ab: built in N s
ab: tree: dsa-jit over every configuration in N s
tree test_index paths tiny: 1 passed, 0 failed [paths tiny] cfg_a cfg_b
base-1: tree --line 1,64 32768,131072
ab: built in N s
ab: v: dsa-jit over every configuration in N s
v test_index paths tiny: 1 passed, 0 failed [paths tiny] cfg_a cfg_b
v-1: variant --line 1,64 32768,131072
ab: built in N s
base-2: tree --line 1,64 32768,131072
ab: built in N s
v-2: variant --line 1,64 32768,131072"
got=$(printf '%s\n' "$got" | sed -E 's/--rows //; s/--context //; s/^(ab: .* in )[0-9]+ s$/\1N s/')
status=0
if [ "$got" != "$want" ]; then
  printf 'ab.sh printed:\n%s\nwanted:\n%s\n' "$got" "$want"
  status=1
fi
# --bench prefill: bench_prefill.py's line for each, and test_index as its test
untimed() { sed -E 's/ *$//; /^ab: .* in [0-9]+ s$/d'; }
got=$(PATH="$tmp/stub:$PATH" "$tmp/tests/bench/ab.sh" --bench prefill --test all v="$tmp/v.patch" 2>&1 | untimed)
want="tree test_index all: 1 passed, 0 failed [] cfg_a cfg_b
base-1: tree --line
v test_index all: 1 passed, 0 failed [] cfg_a cfg_b
v-1: variant --line"
if [ "$got" != "$want" ]; then
  printf 'ab.sh --bench prefill printed:\n%s\nwanted:\n%s\n' "$got" "$want"
  status=1
fi
# --bench prefill-ncu: the same line under ncu (the stub runs the command after its options), its
# output through ncu_durations.py (the stub marks it), test_index as the test
printf '#!/bin/sh\nwhile [ "$1" != python3 ]; do shift; done\n"$@"\n' > "$tmp/stub/ncu"
chmod +x "$tmp/stub/ncu"
got=$(PATH="$tmp/stub:$PATH" "$tmp/tests/bench/ab.sh" --bench prefill-ncu --test all v="$tmp/v.patch" 2>&1 | untimed)
want="tree test_index all: 1 passed, 0 failed [] cfg_a cfg_b
durations base-1 of base-1: tree --line
v test_index all: 1 passed, 0 failed [] cfg_a cfg_b
durations v-1 of v-1: variant --line"
if [ "$got" != "$want" ]; then
  printf 'ab.sh --bench prefill-ncu printed:\n%s\nwanted:\n%s\n' "$got" "$want"
  status=1
fi
# ncu_durations.py on ncu's CSV: medians per kernel in us whatever ncu's unit, in first-seen order
if command -v python3 > /dev/null; then
  got=$(python3 "$root/tests/bench/ncu_durations.py" t dsa_index_score_group_ <<'CSV'
==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","dsa_index_score_group_glm5_2_tp4_dcp1_i1_fp8_ds_mla","1","7","(128, 1, 1)","(512, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us","600.5"
"1","1","python3","h","dsa_index_score_group_deepseek_v32_tp8_dcp1_i1_fp8_ds_mla","1","7","(128, 1, 1)","(512, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","ms","1.10"
"2","1","python3","h","dsa_index_score_group_glm5_2_tp4_dcp1_i1_fp8_ds_mla","1","7","(128, 1, 1)","(512, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","610,500"
"3","1","python3","h","dsa_index_score_group_glm5_2_tp4_dcp1_i1_fp8_ds_mla","1","7","(128, 1, 1)","(512, 4, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","us","590.0"
CSV
)
  want="t: ncu glm5_2 600.5 us (3) | deepseek_v32 1100.0 us (1)"
  [ "$got" = "$want" ] || { printf 'ncu_durations.py printed:\n%s\nwanted:\n%s\n' "$got" "$want"; status=1; }
fi
# a dsa-jit that fails on the variant's build: ab.sh says why, from dsa-jit's own lines (not its
# table's), and the test still runs
printf '#!/bin/sh\ncase "$1" in --list) echo cfg_a ;; --cache) : > "$2/$3"; if grep -q variant kernels/k.cuh; then echo "configuration  kernel  regs"; echo "cfg_a  index  40"; echo "cfg_a: kernel index: entry k uses local memory (8 bytes of stack, 0 of spill stores)"; exit 1; fi ;; esac\n' > "$tmp/build/dsa-jit"
got=$(PATH="$tmp/stub:$PATH" "$tmp/tests/bench/ab.sh" --bench index --test all v="$tmp/v.patch" 2>&1 | untimed | sed 's/--rows //; s/--context //')
want="tree test_index all: 1 passed, 0 failed [] cfg_a
base-1: tree --line 1,8,64,128 32768,131072
v: dsa-jit failed on some configuration; the test compiles those itself. Its reasons:
v:   cfg_a: kernel index: entry k uses local memory (8 bytes of stack, 0 of spill stores)
v test_index all: 1 passed, 0 failed [] cfg_a
v-1: variant --line 1,8,64,128 32768,131072"
if [ "$got" != "$want" ]; then
  printf 'ab.sh with a failing dsa-jit printed:\n%s\nwanted:\n%s\n' "$got" "$want"
  status=1
fi
[ "$(cat "$tmp/kernels/k.cuh")" = tree ] || { echo "ab.sh left the variant applied"; status=1; }
[ "$(tail -1 "$tmp/build/built")" = tree ] || { echo "ab.sh ended on the variant's build"; status=1; }
exit $status
