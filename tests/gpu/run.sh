#!/usr/bin/env bash
# GPU tests and benchmarks in one call (for the H200 machines, which have CUDA, NCCL and PyTorch
# but no Lua): builds the runtime and GPU tests from the committed out/ with `ninja gpu`, then runs
# them. Usage: tests/gpu/run.sh [test|test1|test2|bench|all|stagec|stageb|sanitize|sanitize1|sanitize2|python|dcp] (default test); the NCCL test needs 2 GPUs and
# says SKIPPED on one. test1 and test2 are test's two halves, for two device calls where one would
# pass its time limit: the main job (also with --dir), examples/host_engine, test_prologue (cold,
# then warm) and test_dcp; then test_attend, test_index, test_soak and the NCCL tests, after
# compiling every configuration in parallel. dcp: the DCP paths on two GPUs (test_attend over NCCL
# and at DCP 2, 4, 8, test_soak nccl, dsa-demo, and dsa-demo --bench three ways). Logs go to $OUT when set, and into $OUT/0-logs-MODE.tgz at the end (a device call returns only the first files of $OUT). `python [single|dcp]` builds the Python package for the
# python3 on PATH (nanobind from its wheel in .whl/ when that python3 lacks it: carry .whl) and runs
# its GPU tests and the example (python.log, python_dcp.log, dsa_layer.log).
set -uo pipefail
status=0
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 # NVLink multicast stays off on shared machines
mode=${1:-test}
case "$mode" in test | test1 | test2 | bench | all | stagec | stageb | sanitize | sanitize1 | sanitize2 | python | dcp) ;;
  *) echo "run.sh: no mode $mode (test, test1, test2, bench, all, stagec, stageb, sanitize, sanitize1, sanitize2, python, dcp)" >&2; exit 2 ;;
esac
t() { timeout 120 "$@"; } # a hung rank must not eat the lease
log=${OUT:-/tmp}
mkdir -p "$log" || exit 1
started=$(mktemp) # its time: the logs this run writes are newer
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda # what tools/setup.sh does on a machine with the toolkit
ninja gpu || exit 1
nvidia-smi -L
first=0 second=0
case "$mode" in test | all) first=1 second=1 ;; test1) first=1 ;; test2) second=1 ;; esac
if [ "$first" = 1 ]; then
  echo "== dsa-demo (the main job: the whole step across the GPUs present)"
  t build/dsa-demo 2>&1 | tee "$log/dsa_demo.log" || status=1
  echo "== dsa-demo --dir (a configuration generated outside specs/, loaded at run time, not linked)"
  if [ "$(nvidia-smi -L | grep -c '^GPU')" -ge 2 ]; then # its configuration is DCP = 2
    t build/dsa-demo --dir tests/gpu/outside/glm5.2_tp8_dcp2_i1_fp8_ds_mla 2>&1 | tee "$log/dsa_demo_dir.log" || status=1
  else
    echo "SKIPPED: dsa-demo --dir glm5.2_tp8_dcp2_i1_fp8_ds_mla: needs 2 GPUs, this machine has 1" | tee "$log/dsa_demo_dir.log"
  fi
  echo "== examples/host_engine (README's example)"
  t build/examples/host_engine || status=1
  cache=$(mktemp -d)
  echo "== test_prologue (cold JIT cache $cache)"
  # cold: NVRTC compiles every configuration's three modules first (105 s at 8439bcb, past 120 s at
  # f5aa9d1 on a slower host: tests/bench/RESULTS.md), so its bound is compile time, not a hang
  DSA_TEST_CACHE=$cache timeout 300 build/tests/gpu/test_prologue 2>&1 | tee "$log/test_prologue.log" | grep -E "^(FAIL|ok|[0-9]+ passed)|ctx_create" || status=1
  echo "== test_prologue again (warm JIT cache)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_prologue 2>&1 | tee "$log/test_prologue_warm.log" | grep -E "^(FAIL|ok|[0-9]+ passed)|ctx_create" || status=1
  echo "== test_dcp (in-process DCP group on one GPU)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_dcp 2>&1 | tee "$log/test_dcp.log" || status=1
fi
if [ "$second" = 1 ]; then
  if [ "$first" = 0 ]; then # a fresh cache, filled in parallel (test_prologue's cold run did it above)
    cache=$(mktemp -d)
    echo "== every configuration's kernels compiled in parallel into $cache (dsa-jit, for sm_90a and for sm_90, which test_attend also runs)"
    tests/gpu/jit_all.sh "$cache" "$log/jit_precompile.log" ||
      echo "dsa-jit failed on some configuration ($log/jit_precompile.log); the tests compile those themselves"
    echo "compiled ($(ls "$cache" | wc -l) modules; the tests compile whatever is missing)"
  fi
  echo "== test_attend (stage C, every configuration, DCP ranks on one GPU)"
  # 80 s at f5aa9d1; since then more cases and five configurations compiled for sm_90 (the mma.sync
  # loop) when it reaches them, so its bound is compile time too
  DSA_TEST_CACHE=$cache timeout 240 build/tests/gpu/test_attend 2>&1 | tee "$log/test_attend.log" || status=1
  echo "== test_attend --nccl (stage C at DCP = 2 over NCCL, two processes, one GPU each)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_attend --nccl glm5.2_tp2_dcp2_i1_nvfp4_ds_mla 2>&1 | tee "$log/test_attend_nccl.log" || status=1
  echo "== test_index (stage B against the CPU reference; DCP = W against DCP = 1 on one GPU; arguments)"
  DSA_TEST_CACHE=$cache timeout 240 build/tests/gpu/test_index 2>&1 | tee "$log/test_index.log" || status=1
  echo "== test_index nccl (stage B at DCP = 2 over NCCL, two processes, one GPU each)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_index nccl 2>&1 | tee "$log/test_index_nccl.log" || status=1
  echo "== test_soak (prologue + index + attend in one CUDA graph, 100000 replays; then over NCCL on two GPUs)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_soak 2>&1 | tee "$log/test_soak.log" || status=1
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_soak nccl 2>&1 | tee "$log/test_soak_nccl.log" || status=1
  echo "== test_dcp nccl (two processes, one GPU each)"
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_dcp nccl 2>&1 | tee "$log/test_dcp_nccl.log" || status=1
fi
san1=0 san2=0
case "$mode" in sanitize) san1=1 san2=1 ;; sanitize1) san1=1 ;; sanitize2) san2=1 ;; esac
if [ "$san1" = 1 ] || [ "$san2" = 1 ]; then # compute-sanitizer's four tools over every kernel family, in
  # two halves for two calls (the whole passes one call's 10 minutes): sanitize1 the attend kernels of
  # 64 and 128 heads and stage B's ref, dcp and nccl paths; sanitize2 the prologue, every tiny attend
  # configuration and stage B's split top-k paths (racecheck of the DCP index merge runs over NCCL,
  # one rank a process: with the in-process group's threads it did not finish)
  cache=$(mktemp -d)
  cs=/usr/local/cuda/bin/compute-sanitizer
  runs=()
  [ "$san1" = 1 ] && runs+=("racecheck test_attend deepseek_v32_tp1" "synccheck test_attend deepseek_v32_tp1"
    "initcheck test_attend deepseek_v32_tp1" "memcheck test_attend deepseek_v32_tp1"
    "memcheck test_index dcp" "racecheck test_index nccl" "synccheck test_index dcp"
    "initcheck test_index dcp" "memcheck test_index ref" "racecheck test_index ref"
    "synccheck test_index ref" "initcheck test_index ref")
  if [ "$san2" = 1 ]; then
    runs+=("memcheck test_prologue" "racecheck test_prologue" "memcheck test_attend tiny"
      "racecheck test_attend tiny_tp" "racecheck test_attend tiny_variants" "synccheck test_attend tiny"
      "initcheck test_attend tiny" "memcheck test_index paths tiny" "racecheck test_index paths tiny"
      "synccheck test_index paths tiny" "initcheck test_index paths tiny")
    # racecheck and a top-k of several segments (tiny_k5000): tests/gpu/racecheck_probe.cu is those
    # kernels' hand-over of a segment's count alone. Its mode 2 has no race; the racecheck of
    # compute-sanitizer 2025.3.1 reports one there (a partial named barrier, then a full one), and
    # reports the same hand-over in the kernels. Where the installed racecheck passes mode 2, the
    # tiny_k5000 kernels are racechecked; where it does not, they are not (SKIPPED, with the reason;
    # memcheck, synccheck and initcheck above run them). Mode 3 (no partial barrier) must pass always.
    echo "== racecheck probe (tests/gpu/racecheck_probe.cu: a partial named barrier, then a full one)"
    probe=$(mktemp -d)/racecheck_probe # built outside $OUT: only its logs travel back
    if nvcc -O3 -arch=sm_90a -o "$probe" tests/gpu/racecheck_probe.cu; then
      timeout 60 "$cs" --tool racecheck --error-exitcode 9 "$probe" 3 > "$log/racecheck_probe_3.log" 2>&1
      p3=$?
      timeout 60 "$cs" --tool racecheck --error-exitcode 9 "$probe" 2 > "$log/racecheck_probe_2.log" 2>&1
      p2=$?
      tail -n 1 "$log/racecheck_probe_3.log" "$log/racecheck_probe_2.log"
      if [ "$p3" != 0 ] || { [ "$p2" != 0 ] && [ "$p2" != 9 ]; }; then
        echo "FAIL: racecheck probe (mode 3 exit $p3, mode 2 exit $p2; 0 and 0 or 9 expected)"
        status=1
      elif [ "$p2" = 0 ]; then
        runs+=("racecheck test_attend tiny_k5000")
      else
        echo "SKIPPED: racecheck test_attend tiny_k5000: this racecheck ($("$cs" --version | grep -o 'Version [0-9.]*')) reports a race in the probe's race-free mode 2, the kernels' count hand-over"
      fi
    else
      echo "FAIL: nvcc tests/gpu/racecheck_probe.cu"
      status=1
    fi
  fi
  for run in "${runs[@]}"; do
    set -- $run
    tool=$1 prog=$2; shift 2
    echo "== compute-sanitizer --tool $tool $prog $*"
    # racecheck misreads barrier.arrive: DSA_SANITIZE_BARRIERS (docs/design.md, JIT) makes those barrier.sync
    sb=0; [ "$tool" = racecheck ] && sb=1
    DSA_SANITIZE_BARRIERS=$sb DSA_TEST_CACHE=$cache timeout 300 "$cs" --tool "$tool" --target-processes all --error-exitcode 9 "build/tests/gpu/$prog" "$@" \
      > "$log/${tool}_${prog}${1:+_$1}${2:+_$2}.log" 2>&1 || { status=1; echo "FAIL: $tool $prog $*"; }
    tail -1 "$log/${tool}_${prog}${1:+_$1}${2:+_$2}.log"
  done
fi
if [ "$mode" = stageb ]; then # stage B alone: the GPU test in every mode
  cache=$(mktemp -d)
  for m in ref dcp paths scores args nccl; do
    DSA_TEST_CACHE=$cache t build/tests/gpu/test_index $m 2>&1 | tee -a "$log/test_index.log" || status=1
  done
fi
if [ "$mode" = dcp ]; then # the DCP paths on two GPUs: stage C over NCCL (fused where the windows allow, its
  # barriers the barrier kernel then NCCL all-gathers, bit-identical), the step in a CUDA graph over NCCL,
  # dsa-demo, and the step timed three ways (dsa-demo --bench [--allgather-barrier | --collectives])
  cache=$(mktemp -d)
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_attend --nccl glm5.2_tp2_dcp2_i1_nvfp4_ds_mla 2>&1 | tee "$log/test_attend_nccl.log" || status=1
  for f in dcp2 dcp4 dcp8; do DSA_TEST_CACHE=$cache t build/tests/gpu/test_attend $f 2>&1 | tee -a "$log/test_attend_dcp.log" || status=1; done
  DSA_TEST_CACHE=$cache t build/tests/gpu/test_soak nccl 2>&1 | tee "$log/test_soak_nccl.log" || status=1
  t build/dsa-demo 2>&1 | tee "$log/dsa_demo.log" || status=1
  t build/dsa-demo --bench 2>&1 | tee "$log/step_bench_fused.log" || status=1
  t build/dsa-demo --bench --allgather-barrier 2>&1 | tee "$log/step_bench_allgather_barrier.log" || status=1
  t build/dsa-demo --bench --collectives 2>&1 | tee "$log/step_bench_collectives.log" || status=1
fi
if [ "$mode" = stagec ]; then # stage C alone, in about a minute: every format and heads-per-CTA shape, then the benchmark
  cache=$(mktemp -d)
  for f in tiny deepseek_v32_tp1 glm5.2_tp1 glm5.2_tp2 args; do
    DSA_TEST_CACHE=$cache timeout 60 build/tests/gpu/test_attend $f 2>&1 | tee -a "$log/test_attend.log" || status=1
  done
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm --format=csv | tee "$log/clocks.log"
  PYTHONUNBUFFERED=1 timeout 90 python3 tests/bench/bench_attend.py 2>&1 | tee "$log/bench_attend.log" || status=1
fi
if [ "$mode" = python ]; then # the torch side: tests/gpu/test_torch.py, test_torch_dcp.py, examples/dsa_layer.py
  part=${2:-all}
  echo "== python: $(command -v python3), $(python3 -V 2>&1), $(python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1)"
  inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  echo "python headers (sysconfig include): $inc"
  if [ ! -f "$inc/Python.h" ]; then
    echo "FAIL: $inc/Python.h is missing: this python3 has no development headers, so the extension dsagen._dsa cannot be built here"
    exit 1
  fi
  if ! python3 -c 'import nanobind' 2>/dev/null; then # no network here: the wheel travels in .whl/
    if ! ls .whl/nanobind-*.whl >/dev/null 2>&1; then
      echo "FAIL: python3 has no nanobind and there is no .whl/nanobind-*.whl (pip download it, and carry .whl)"
      exit 1
    fi
    # a wheel is a zip: without pip in this environment (a uv venv has none), unpack it
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/nanobind-*.whl ||
      python3 -m zipfile -e .whl/nanobind-*.whl /tmp/site || exit 1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  echo "nanobind $(python3 -c 'import nanobind; print(nanobind.__version__, nanobind.include_dir())')"
  ninja python || exit 1
  # the fast path's tensor reader, against this torch; without it the package still works (slower),
  # so a failure here fails the run but the tests still go on
  ninja python-torch || { echo "FAIL: ninja python-torch (dsagen._torch_view)"; status=1; }
  export PYTHONPATH=$PWD/build/python${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
  DSA_TEST_CACHE=$(mktemp -d); export DSA_TEST_CACHE DSA_CACHE_DIR=$DSA_TEST_CACHE
  if [ "$part" = all ] || [ "$part" = single ]; then
    echo "== tests/gpu/test_torch.py (ops against the C calls, checks, CUDA graph, torch.compile, overhead)"
    timeout 400 python3 tests/gpu/test_torch.py 2>&1 | tee "$log/python.log" | grep -E "^(FAIL|ok|\||[0-9]+ passed)|Error" || status=1
    tail -1 "$log/python.log" | grep -q " 0 failed$" || status=1
    echo "== examples/dsa_layer.py (one GPU: eager, compiled, graph-captured)"
    timeout 300 python3 examples/dsa_layer.py 2>&1 | tee "$log/dsa_layer.log" || status=1
  fi
  if [ "$part" = all ] || [ "$part" = dcp ]; then
    echo "== tests/gpu/test_torch_dcp.py (DCP = 2 over a torch.distributed group, two GPUs)"
    timeout 300 python3 -m torch.distributed.run --standalone --nproc_per_node 2 tests/gpu/test_torch_dcp.py 2>&1 |
      tee "$log/python_dcp.log" | grep -E "(FAIL|ok  |[0-9]+ passed|SKIPPED)|Error" || status=1
    grep -qE "^(SKIPPED|[0-9]+ passed, 0 failed$)" "$log/python_dcp.log" || status=1
  fi
fi
if [ "$mode" = bench ] || [ "$mode" = all ]; then
  # every issue's table in one call: stage A, stage C's grid (carry .bench-out), stage B at decode
  # (the runtime's top-k choice) and at prefill
  PYTHONUNBUFFERED=1 t python3 tests/bench/bench_prologue.py 2>&1 | tee "$log/bench_prologue.log" || status=1
  PYTHONUNBUFFERED=1 t python3 tests/bench/bench_attend.py 2>&1 | tee "$log/bench_attend.log" || status=1
  PYTHONUNBUFFERED=1 t python3 tests/bench/bench_index.py --topk auto 2>&1 | tee "$log/bench_index.log" || status=1
  PYTHONUNBUFFERED=1 t python3 tests/bench/bench_prefill.py 2>&1 | tee "$log/bench_prefill.log" || status=1
fi
# every log of this run in one archive whose name sorts first: a device call returns only the
# first few files of $OUT, and this one holds them all
if [ -n "${OUT:-}" ]; then
  (cd "$log" && find . -maxdepth 1 -name '*.log' -newer "$started" -print0 | tar czf "0-logs-$mode.tgz" --null -T -) ||
    echo "run.sh: could not archive the logs of $log"
fi
rm -f "$started"
exit $status
