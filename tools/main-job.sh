#!/usr/bin/env bash
# The main job: set up a fresh Debian machine, build dsagen, and render the default spec
# (GLM-5.2) into out/, then show the plan of its flagship configuration.
set -eu
cd "$(dirname "$0")/.."
tools/setup.sh
ninja
build/dsagen specs/glm5.2.lua -o out
echo "main job: rendered $(build/dsagen --list specs/glm5.2.lua | wc -l) configurations of specs/glm5.2.lua into out/"
sed -n '/^## The step/,$p' out/glm5.2_tp4_dcp4_i1_fp8_ds_mla/PLAN.md
