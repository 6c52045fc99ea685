#!/usr/bin/env bash
# The main job: set up a fresh Debian machine, build dsagen, render the shipped specs into out/,
# build the runtime, then run build/dsa-demo: on a machine with GPUs, the whole step (prologue,
# index, attend) of an indexer layer of the default configuration (GLM-5.2 TP 4 x DCP 4, fp8_ds_mla
# cache; DCP = the number of GPUs where that fits, else a configuration that does) checked against
# DCP = 1; without a GPU, NVRTC compilation of its kernels and the CPU simulation of its DCP ranks.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
[ -d .cuda/lib ] && export LD_LIBRARY_PATH=$PWD/.cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ninja
ninja runtime
echo "main job: rendered $(ls -d out/*/ | wc -l) configurations into out/ (start with out/glm5.2_tp4_dcp4_i1_fp8_ds_mla/PLAN.md)"
build/dsa-demo
