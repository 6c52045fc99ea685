# Sourced by this folder's measurement run scripts (bash): the repository root as the working
# folder, the toolkit link that tools/setup.sh makes, and a patch of this folder applied and taken
# back around a measurement.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.." || exit 1
[ -e .cuda ] || ln -sfn /usr/local/cuda .cuda
applied=""
# patch_on NAME: tests/bench/logs/NAME applied and the GPU targets built; the script stops if either fails
patch_on() {
  git apply "tests/bench/logs/$1" || exit 1
  applied=$1
  ninja gpu >/dev/null || exit 1
}
# patch_off: the applied patch taken back and the tree's GPU targets built again; also when the
# script ends, however it ends, so that the tree is left as it was
patch_off() {
  [ -z "$applied" ] || { git apply -R "tests/bench/logs/$applied" && ninja gpu >/dev/null; }
  applied=""
}
trap patch_off EXIT
