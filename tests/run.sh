#!/usr/bin/env bash
# The test command: builds everything with ninja, then runs the generator tests against the plain
# and the ASan+UBSan generator, the CPU unit tests, and the GPU tests where a GPU is present.
# Ends with one line "N passed, N failed, N skipped"; exits non-zero when anything failed.
set -u
cd "$(dirname "$0")/.."
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

pass=0 fail=0 skip=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); printf 'FAIL: %s\n' "$*"; }
check() { local what=$1; shift; if "$@"; then ok; else bad "$what"; fi; }

if ! ninja; then
  echo "FAIL: ninja build"
  echo "0 passed, 1 failed, 0 skipped"
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Runs a command with tests/gen/shim.c preloaded (fault injection in the output commit), after
# VAR=VALUE arguments for the shim.
shimmed() {
  env LD_PRELOAD="$PWD/build/tests/libgen_shim.so" ASAN_OPTIONS="$ASAN_OPTIONS:verify_asan_link_order=0" "$@"
}

# A folder's full state (names, contents, inodes), to prove a failed run changed nothing.
snapshot() { (cd "$1" && find . -printf '%p %i %s\n' | sort && find . -type f -exec sha256sum {} + | sort); }

gen_tests() {
  local gen=$1 tag=$2
  # ---- bad specs: one exact message, exit 1, output folder untouched ----
  local o="$tmp/$tag-bad"
  mkdir -p "$o/keep" && echo sentinel > "$o/keep/file"
  local before; before=$(snapshot "$o")
  for spec in tests/gen/bad/*.lua tests/gen/import/bad_*.lua; do
    local want
    if [ -f "${spec%.lua}.expect" ]; then want=$(cat "${spec%.lua}.expect"); else want=$(sed -n '1s/^-- expect: //p' "$spec"); fi
    local got rc
    got=$(timeout 60 "$gen" "$spec" -o "$o" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ] || [ "$got" != "$want" ]; then
      bad "$tag $spec: exit $rc"$'\n'"  want: $want"$'\n'"  got:  $got"
    else ok; fi
    [ "$(snapshot "$o")" == "$before" ] && ok || bad "$tag $spec changed the output folder"
  done
  # a bad spec next to good ones: nothing is written for the good ones either
  "$gen" specs/tiny.lua tests/gen/bad/tp_dcp.lua -o "$o" 2>/dev/null
  [ "$(snapshot "$o")" == "$before" ] && ok || bad "$tag a bad spec among good ones wrote output"

  # ---- shipped specs: render, are deterministic, and out/ is fresh ----
  check "$tag render shipped specs" "$gen" specs/*.lua -o "$tmp/$tag-a"
  check "$tag render again" "$gen" specs/*.lua -o "$tmp/$tag-b"
  check "$tag output is byte-identical across runs" diff -r "$tmp/$tag-a" "$tmp/$tag-b"
  if diff -r out "$tmp/$tag-a" >/dev/null; then ok; else bad "$tag out/ is stale: run ninja and commit out/"; fi
  # unchanged files are left alone (same inode: no rewrite, no rename)
  local i1 i2
  i1=$(stat -c %i "$tmp/$tag-a/tiny_tp4_dcp1_i1_bf16/config.h")
  "$gen" specs/*.lua -o "$tmp/$tag-a"
  i2=$(stat -c %i "$tmp/$tag-a/tiny_tp4_dcp1_i1_bf16/config.h")
  [ "$i1" == "$i2" ] && ok || bad "$tag an unchanged file was rewritten"

  # ---- --list, --help, usage errors ----
  local list; list=$("$gen" --list specs/glm5.2.lua)
  [ "$list" == $'glm5.2_tp4_dcp1_i1_fp8_ds_mla\nglm5.2_tp4_dcp4_i1_fp8_ds_mla\nglm5.2_tp4_dcp4_i4_fp8_ds_mla\nglm5.2_tp2_dcp2_i1_nvfp4_ds_mla\nglm5.2_tp1_dcp1_i1_bf16' ] \
    && ok || bad "$tag --list: $list"
  "$gen" --help | grep -q -- '--depfile' && ok || bad "$tag --help"
  "$gen" specs/tiny.lua 2>/dev/null; [ $? -eq 2 ] && ok || bad "$tag missing -o is a usage error"
  "$gen" --bogus 2>/dev/null; [ $? -eq 2 ] && ok || bad "$tag unknown option is a usage error"

  # ---- a shared geometry through import() ----
  check "$tag import renders" "$gen" tests/gen/import/main.lua -o "$tmp/$tag-import"
  grep -q 'sha256' "$tmp/$tag-import/shared_tp4_dcp4_i2_nvfp4_ds_mla/config.h" && ok || bad "$tag import provenance"
  # an unchanged imported table as deep as allowed (32 levels) is not "changed after import"
  check "$tag import of a table 32 levels deep" "$gen" tests/gen/import/deep.lua -o "$tmp/$tag-deep"
  # the folder of a configuration these specs no longer generate: a warning, and left in place
  "$gen" tests/gen/import/main.lua -o "$tmp/$tag-deep" >/dev/null 2>&1
  mkdir -p "$tmp/$tag-deep/not_generated"
  got=$("$gen" tests/gen/import/deep.lua -o "$tmp/$tag-deep" 2>&1); rc=$?
  [ $rc -eq 0 ] && [ "$got" == "dsagen: warning: $tmp/$tag-deep/shared_tp4_dcp4_i2_nvfp4_ds_mla holds generated files of a configuration these specs do not generate (removed from a spec?); it is left in place" ] \
    && [ -f "$tmp/$tag-deep/shared_tp4_dcp4_i2_nvfp4_ds_mla/config.h" ] && ok || bad "$tag a stale configuration folder: exit $rc: $got"

  # ---- import() reads only regular files below the spec's folder, within the memory limit ----
  local d="$tmp/$tag-imp"
  mkdir -p "$d/sub" "$d/outside"
  cp tests/gen/import/models/geo.lua "$d/outside/geo.lua"
  ln -s ../outside/geo.lua "$d/sub/link_out.lua"   # a link out of the spec's folder (sub/)
  cp tests/gen/import/models/geo.lua "$d/sub/geo.lua"
  ln -s geo.lua "$d/sub/link_in.lua"                # a link that stays inside
  mkfifo "$d/sub/fifo.lua"
  sed 's#models/geo.lua#link_in.lua#' tests/gen/import/main.lua > "$d/sub/in.lua"
  check "$tag import through a link inside the spec's folder" "$gen" "$d/sub/in.lua" -o "$tmp/$tag-imp-out"
  echo 'return import("link_out.lua")' > "$d/sub/out.lua"
  got=$(timeout 60 "$gen" "$d/sub/out.lua" -o "$tmp/$tag-imp-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "$d/sub/out.lua:1: error: import: 'link_out.lua' leads outside the spec's folder (through a symbolic link)" ] \
    && ok || bad "$tag import of a link out of the spec's folder: exit $rc: $got"
  echo 'return import("fifo.lua")' > "$d/sub/fifo_spec.lua"
  got=$(timeout 60 "$gen" "$d/sub/fifo_spec.lua" -o "$tmp/$tag-imp-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "$d/sub/fifo_spec.lua:1: error: cannot read '$d/sub/fifo.lua': not a regular file" ] \
    && ok || bad "$tag import of a FIFO: exit $rc: $got"
  got=$(timeout 60 "$gen" "$d/sub/fifo.lua" -o "$tmp/$tag-imp-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "$d/sub/fifo.lua: error: cannot read '$d/sub/fifo.lua': not a regular file" ] \
    && ok || bad "$tag a FIFO as the spec: exit $rc: $got"
  # the text of imported files counts towards the memory limit: 40 imports of a 900 KB comment
  { echo 'return {}'; echo '--[['; head -c 900000 /dev/zero | tr '\0' x; echo; echo ']]'; } > "$d/sub/big.lua"
  echo 'for i = 1, 40 do import("big.lua") end return {}' > "$d/sub/big_spec.lua"
  got=$(timeout 60 "$gen" "$d/sub/big_spec.lua" -o "$tmp/$tag-imp-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "$d/sub/big_spec.lua:1: error: spec exceeds the memory limit of 16 MiB (reading '$d/sub/big.lua'; the text of imported files counts towards it)" ] \
    && ok || bad "$tag imports beyond the memory limit: exit $rc: $got"

  # ---- the same configuration from two specs ----
  local got
  got=$("$gen" specs/tiny.lua specs/tiny.lua -o "$tmp/$tag-dup" 2>&1 | head -1)
  [ "$got" == "specs/tiny.lua:48: error: configs[1]: configuration 'tiny_tp4_dcp1_i1_bf16' is also generated by specs/tiny.lua:48" ] \
    && ok || bad "$tag duplicate across specs: $got"
  [ ! -e "$tmp/$tag-dup" ] && ok || bad "$tag duplicate across specs wrote output"
  # model names that differ only in '.', '-' or '_' would give two configurations one C symbol
  sed 's/model = "glm5.2"/model = "glm5-2"/' specs/glm5.2.lua > "$tmp/$tag-glm5-2.lua"
  got=$("$gen" specs/glm5.2.lua "$tmp/$tag-glm5-2.lua" -o "$tmp/$tag-sym" 2>&1 | head -1)
  [ "$got" == "$tmp/$tag-glm5-2.lua:$(grep -n 'tp = 4, dcp = 1' specs/glm5.2.lua | cut -d: -f1): error: configs[1]: configuration 'glm5-2_tp4_dcp1_i1_fp8_ds_mla' has the same C symbol (glm5_2_tp4_dcp1_i1_fp8_ds_mla) as 'glm5.2_tp4_dcp1_i1_fp8_ds_mla' of specs/glm5.2.lua:$(grep -n 'tp = 4, dcp = 1' specs/glm5.2.lua | cut -d: -f1); model names must differ in more than '.', '-' and '_'" ] \
    && ok || bad "$tag model names with one C symbol: $got"
  [ ! -e "$tmp/$tag-sym" ] && ok || bad "$tag model names with one C symbol wrote output"

  # ---- an output folder that cannot be written: error, nothing left behind ----
  echo x > "$tmp/$tag-file"
  got=$("$gen" specs/tiny.lua -o "$tmp/$tag-file/out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot create folder '$tmp/$tag-file': a file of that name exists" ] \
    && ok || bad "$tag unwritable output: exit $rc: $got"
  # the last configuration's folder is blocked by a file: the folders and temporary files made
  # for the configurations before it are removed again
  mkdir -p "$tmp/$tag-ro/out" && echo x > "$tmp/$tag-ro/out/tiny_tp4_dcp2_i2_nvfp4_ds_mla"
  got=$("$gen" specs/tiny.lua -o "$tmp/$tag-ro/out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot create folder '$tmp/$tag-ro/out/tiny_tp4_dcp2_i2_nvfp4_ds_mla': a file of that name exists" ] \
    && ok || bad "$tag blocked output folder: exit $rc: $got"
  [ "$(ls -A "$tmp/$tag-ro/out")" == "tiny_tp4_dcp2_i2_nvfp4_ds_mla" ] && ok || bad "$tag failed write left files behind: $(ls -A "$tmp/$tag-ro/out")"

  # ---- spec paths in generated files and in the depfile ----
  # a long path is quoted whole in every provenance header (no fixed buffer)
  local long="$tmp/$tag-long"
  for i in 1 2 3 4 5 6 7 8 9; do long="$long/$(printf 'p%.0s' $(seq 100))"; done
  mkdir -p "$long" && cp specs/tiny.lua "$long/tiny.lua"
  check "$tag a spec path of ${#long} characters" "$gen" "$long/tiny.lua" -o "$tmp/$tag-long-out"
  head -2 "$tmp/$tag-long-out/tiny_tp4_dcp1_i1_bf16/config.h" | grep -qF "from $long/tiny.lua (sha256 " \
    && grep -qF "$long/tiny.lua (sha256" "$tmp/$tag-long-out/registry.c" \
    && [ "$(head -2 "$tmp/$tag-long-out/tiny_tp4_dcp1_i1_bf16/config.h" | tail -1)" == "// Configuration tiny_tp4_dcp1_i1_bf16. Do not edit: change the spec or the template, then run ninja." ] \
    && ok || bad "$tag provenance of a long spec path: $(head -2 "$tmp/$tag-long-out/tiny_tp4_dcp1_i1_bf16/config.h" | cut -c1-100)"
  # a path that would end the comment quoting it, or a line: refused (and shown escaped)
  mkdir -p "$tmp/$tag-x*" "$tmp/$tag-nl"$'\n'"x" && cp specs/tiny.lua "$tmp/$tag-x*/" && cp specs/tiny.lua "$tmp/$tag-nl"$'\n'"x/"
  got=$("$gen" "$tmp/$tag-x*/tiny.lua" -o "$tmp/$tag-path-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: spec path '$tmp/$tag-x*/tiny.lua' contains '*/', which would end the comment that quotes it in generated files; rename the spec or its folder" ] \
    && ok || bad "$tag a spec path with '*/': exit $rc: $got"
  got=$("$gen" "$tmp/$tag-nl"$'\n'"x/tiny.lua" -o "$tmp/$tag-path-out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: spec path '$tmp/$tag-nl\\nx/tiny.lua' contains a control character, which would end the comment that quotes it in generated files; rename the spec or its folder" ] \
    && ok || bad "$tag a spec path with a newline: exit $rc: $got"
  [ ! -e "$tmp/$tag-path-out" ] && ok || bad "$tag a refused spec path wrote output"
  # depfile paths are escaped: with a space and a '#' in the spec's name, ninja finds the build
  # clean after one run; a character the depfile syntax cannot escape is an error
  local nj="$tmp/$tag-ninja dir"
  mkdir -p "$nj" && cp specs/tiny.lua "$nj/ti ny#1.lua"
  printf 'rule gen\n  command = %s "ti ny#1.lua" -o out --depfile gen.d --stamp $out\n  depfile = gen.d\n  deps = gcc\nbuild stamp: gen\n' \
    "$PWD/$gen" > "$nj/build.ninja"
  (cd "$nj" && ninja >/dev/null && ninja -n | grep -q 'no work to do') && ok || bad "$tag a depfile naming a spec with a space: $(cd "$nj" && ninja -n -d explain 2>&1 | head -3)"
  cp specs/tiny.lua "$nj/a&b.lua"
  local genabs="$PWD/$gen"
  got=$(cd "$nj" && "$genabs" "a&b.lua" -o out2 --depfile gen2.d --stamp stamp2 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot name 'a&b.lua' in the depfile: ninja's depfile syntax has no escape for its character '&'" ] \
    && ok || bad "$tag a depfile path that cannot be escaped: exit $rc: $got"
  [ ! -e "$nj/out2" ] && ok || bad "$tag a depfile path that cannot be escaped: output written"

  # ---- output is all or nothing after staging too ----
  # a folder where a generated file goes: refused before any file is replaced
  local a="$tmp/$tag-atomic" c1=tiny_tp4_dcp1_i1_bf16 c2=tiny_tp4_dcp2_i2_nvfp4_ds_mla
  "$gen" specs/tiny.lua -o "$a" || bad "$tag render tiny"
  echo garbage > "$a/registry.c"; echo garbage > "$a/$c1/config.h"; echo garbage > "$a/$c2/PLAN.md"
  rm "$a/$c2/glue.c" && mkdir -p "$a/$c2/glue.c/x"
  before=$(snapshot "$a")
  got=$("$gen" specs/tiny.lua -o "$a" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot replace '$a/$c2/glue.c': a folder of that name exists" ] \
    && ok || bad "$tag a folder in the way: exit $rc: $got"
  [ "$(snapshot "$a")" == "$before" ] && ok || bad "$tag a failed commit (a folder in the way) replaced files"
  # a rename failing midway (the third: two files were replaced): both are put back, same inodes
  rm -r "$a/$c2/glue.c"
  before=$(snapshot "$a")
  got=$(shimmed DSAGEN_FAIL_RENAME=3 "$gen" specs/tiny.lua -o "$a" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot replace '$a/$c2/PLAN.md': Input/output error" ] \
    && ok || bad "$tag a failed rename: exit $rc: $got"
  [ "$(snapshot "$a")" == "$before" ] && ok || bad "$tag a failed rename left files replaced"
  # into a new folder: the files renamed before the failure are removed, and the folders made
  got=$(shimmed DSAGEN_FAIL_RENAME=5 "$gen" specs/tiny.lua -o "$tmp/$tag-atomic-new/out" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot replace '$tmp/$tag-atomic-new/out/$c1/config.h': Input/output error" ] \
    && ok || bad "$tag a failed rename into a new folder: exit $rc: $got"
  [ ! -e "$tmp/$tag-atomic-new" ] && ok || bad "$tag a failed rename into a new folder left: $(find "$tmp/$tag-atomic-new")"
  # a depfile that cannot be written: no output either
  echo x > "$tmp/$tag-depblock"
  got=$("$gen" specs/tiny.lua -o "$tmp/$tag-dep" --depfile "$tmp/$tag-depblock/gen.d" --stamp "$tmp/$tag-dep.stamp" 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "dsagen: error: cannot create folder '$tmp/$tag-depblock': a file of that name exists" ] \
    && ok || bad "$tag an unwritable depfile: exit $rc: $got"
  [ ! -e "$tmp/$tag-dep" ] && [ ! -e "$tmp/$tag-dep.stamp" ] && ok || bad "$tag an unwritable depfile, yet output written"
  # two generators creating the same new folder (mkdir slowed down, so both find it missing and
  # both create it): both succeed
  shimmed DSAGEN_SLOW_MKDIR=200 "$gen" specs/tiny.lua -o "$tmp/$tag-race/out" 2>"$tmp/$tag-race.err1" & local pid=$!
  shimmed DSAGEN_SLOW_MKDIR=200 "$gen" specs/tiny.lua -o "$tmp/$tag-race/out" 2>"$tmp/$tag-race.err2"; rc=$?
  wait "$pid" && [ $rc -eq 0 ] && ok || bad "$tag two generators creating one folder: $(cat "$tmp/$tag-race.err"*)"
  "$gen" specs/tiny.lua -o "$tmp/$tag-atomic-ok"
  diff -r "$tmp/$tag-race/out" "$tmp/$tag-atomic-ok" >/dev/null && ok || bad "$tag two generators creating one folder: wrong output"

  # ---- a template naming a missing value: error with template and line ----
  got=$("$gen" specs/tiny.lua -o "$tmp/$tag-tb" --templates tests/gen/templates_bad 2>&1); rc=$?
  [ $rc -eq 1 ] && [ "$got" == "templates/bad.h.in:6: error: template refers to undefined value 'g.heads_per_gpu'" ] \
    && ok || bad "$tag undefined template value: exit $rc: $got"
  [ ! -e "$tmp/$tag-tb" ] && ok || bad "$tag template error wrote output"
}

gen_tests build/dsagen plain
gen_tests build/asan/dsagen asan

# The system's Lua is not instrumented, so ASan cannot see writes past the Lua stack; valgrind can
# (comparing an imported table with its snapshot once pushed past the stack without growing it).
if command -v valgrind >/dev/null 2>&1; then
  got=$(valgrind -q --error-exitcode=99 build/dsagen tests/gen/import/deep.lua -o "$tmp/valgrind" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "valgrind: a table imported 32 levels deep: exit $rc: $(printf '%s' "$got" | head -20)"
else
  echo "SKIPPED: valgrind checks: no valgrind (tools/setup.sh installs it)"
  skip=$((skip + 1))
fi

# Generating every shipped spec is fast enough to run on every build (target: under 1 s).
start=$(date +%s%N)
build/dsagen specs/*.lua -o "$tmp/speed" >/dev/null
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$ms" -lt 1000 ] && ok || bad "generating all shipped specs took $ms ms (limit 1000)"
echo "generator: all shipped specs in $ms ms"

# The spec time limit (10 s): started now and checked at the end, so that it overlaps the unit
# tests.
(
  start=$(date +%s)
  got=$(timeout 60 build/dsagen tests/gen/time_limit.lua -o "$tmp/time" 2>&1); rc=$?
  printf '%s %s\n%s\n' "$rc" "$(($(date +%s) - start))" "$got"
) > "$tmp/time.result" &
time_pid=$!

# ---- CPU unit tests (each binary prints its own pass/fail count as 'N passed, N failed') ----
for t in build/tests/test_ref build/asan/tests/test_ref build/tests/test_attend_ref build/asan/tests/test_attend_ref; do
  [ -x "$t" ] || continue
  out=$("$t" 2>&1); rc=$?
  line=$(printf '%s\n' "$out" | tail -1)
  p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' <<<"$line")
  f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' <<<"$line")
  if [ -z "$p" ] || [ $rc -ne 0 ]; then printf '%s\n' "$out" | grep -E 'FAIL|ERROR|runtime error' | head -20; bad "$t exited $rc: $line"; continue; fi
  printf '%s\n' "$out" | grep '^FAIL' | head -20
  pass=$((pass + p)); fail=$((fail + f))
done

# ---- the runtime on the CPU: its tests (plain and ASan+UBSan), and every generated kernel
# compiled with NVRTC (dsa-jit fails on any error, and on local memory: spills or stack) ----
if [ -f .cuda/include/cuda.h ] && [ -f .cuda/include/nvrtc.h ]; then
  [ -d .cuda/lib ] && export LD_LIBRARY_PATH=$PWD/.cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ninja runtime; then
    ok
    export LSAN_OPTIONS=suppressions=$PWD/tests/lsan.supp # NVRTC keeps some allocations for the process
    for t in build/tests/test_runtime build/asan/tests/test_runtime; do
      out=$("$t" 2>&1); rc=$?
      line=$(printf '%s\n' "$out" | tail -1)
      printf '%s\n' "$out" | grep -E '^(FAIL|SKIPPED)|ERROR|runtime error' | head -20
      p=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\1/p' <<<"$line")
      f=$(sed -n 's/^\([0-9]*\) passed, \([0-9]*\) failed$/\2/p' <<<"$line")
      if [ -z "$p" ] || [ $rc -ne 0 ]; then bad "$t exited $rc: $line"; else pass=$((pass + p)); fail=$((fail + f)); fi
      out=$(DSA_NVRTC_LIBRARY=$PWD/build/tests/libfake_nvrtc.so "$t" --fake-nvrtc 2>&1); rc=$?
      [ $rc -eq 0 ] && ok || bad "$t --fake-nvrtc: $(printf '%s' "$out" | tail -20)"
    done
    if out=$(build/dsa-jit 2>&1); then
      ok
      echo "NVRTC: every generated kernel compiles without local memory ($(($(printf '%s\n' "$out" | wc -l) - 1)) kernels)"
    else
      bad "dsa-jit: $out"
    fi
  else
    bad "ninja runtime"
  fi
else
  echo "SKIPPED: runtime tests and NVRTC checks: no CUDA headers/NVRTC at .cuda (run tools/setup.sh)"
  skip=$((skip + 1))
fi

# ---- GPU tests: only where a GPU is present; they say so loudly when skipped ----
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  if tests/gpu/run.sh; then ok; else bad "GPU tests (tests/gpu/run.sh)"; fi
else
  echo "SKIPPED: GPU tests: no GPU on this machine (they run on an H200 through tests/gpu/run.sh)"
  skip=$((skip + 1))
fi

wait "$time_pid"
read -r rc secs < "$tmp/time.result"
got=$(sed 1d "$tmp/time.result")
[ "$rc" -eq 1 ] && [ "$secs" -le 20 ] && [ "$got" == "tests/gen/time_limit.lua:4: error: spec exceeds the time limit of 10 seconds (an endless loop?)" ] \
  && ok || bad "time limit: exit $rc after $secs s: $got"

echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" -eq 0 ]
