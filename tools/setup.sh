#!/usr/bin/env bash
# Installs what dsagen needs on a Debian machine (as root), once: compiler, ninja, Lua 5.4,
# Penlight, OpenSSL's libcrypto (SHA-256 for provenance hashes), valgrind and clang's libFuzzer
# (tests/run.sh), and for the Python package (python/dsagen) g++, the python3 headers, nanobind and
# numpy (the tests' arrays).
set -eu
cd "$(dirname "$0")/.."
need=()
need_cuda=()
for p in gcc g++ ninja-build liblua5.4-dev lua-penlight libssl-dev valgrind clang libclang-rt-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

# CUDA headers and NVRTC, for the runtime and the JIT checks (no GPU or driver needed): the
# machine's toolkit when it has one, else NVIDIA's wheels from PyPI unpacked into build/cuda
# (downloaded, not installed). .cuda points at whichever is used; build.ninja reads it.
if [ -z "${DSA_CUDA_FROM_WHEELS:-}" ] && [ -f /usr/local/cuda/include/cuda.h ] && [ -f /usr/local/cuda/include/nvrtc.h ]; then
  [ "$(readlink .cuda 2>/dev/null)" = /usr/local/cuda ] || ln -sfn /usr/local/cuda .cuda
elif [ ! -f build/cuda/nvidia/cu13/include/nvrtc.h ]; then
  for p in python3-pip unzip; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || need_cuda+=("$p")
  done
  if [ ${#need_cuda[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_cuda[@]}" >/dev/null
  fi
  echo "setup: fetching CUDA 13.0 headers and NVRTC from PyPI into build/cuda"
  mkdir -p build/cuda/wheels
  python3 -m pip download -q --no-deps -d build/cuda/wheels nvidia-cuda-nvrtc==13.0.88 nvidia-cuda-runtime==13.0.96 \
    nvidia-nccl-cu13==2.28.3
  for w in build/cuda/wheels/nvidia_cuda_*.whl; do unzip -q -o "$w" -d build/cuda; done
  # of NCCL only its header: libdsa opens libnccl.so.2 at run time, on the GPU machines
  unzip -q -o -j build/cuda/wheels/nvidia_nccl_*.whl nvidia/nccl/include/nccl.h -d build/cuda/nvidia/cu13/include
  ln -sfn build/cuda/nvidia/cu13 .cuda
else
  ln -sfn build/cuda/nvidia/cu13 .cuda
fi

# The Python package: nanobind and numpy for the python3 on PATH (pip; on a Debian python3 that
# refuses pip installs, with --break-system-packages), and its headers (python3-dev) when missing.
if ! python3 -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))'; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3-dev >/dev/null
fi
if ! python3 -c 'import nanobind, numpy' 2>/dev/null; then
  python3 -m pip --version >/dev/null 2>&1 || { export DEBIAN_FRONTEND=noninteractive; apt-get update -qq; apt-get install -y -qq python3-pip >/dev/null; }
  echo "setup: installing nanobind and numpy for $(command -v python3)"
  python3 -m pip install -q nanobind numpy 2>/dev/null || python3 -m pip install -q --break-system-packages nanobind numpy
fi
