#!/usr/bin/env bash
# One leg of the ansible-core version matrix (`make matrix` runs every leg, one after another):
#
#   tests/tools/matrix_leg.sh 2.21.5
#
# In a venv of its own (.matrix/venv-<major.minor>, Python 3.12 by default: GPUFLEET_MATRIX_PYTHON),
# with that ansible-core and nothing else of the pinned tool chain, the leg runs:
#   1. that version's `ansible-test sanity` on the whole collection (no ignore entries exist);
#   2. the unit tests;
#   3. the in-process equivalence test (tests/lab/tests/test_in_process_modules.py): the worker path
#      where this version is proven, the module-process fallback where it is not, same results; and
#      gpu_facts on a lab host with the oldest Python this version and the collection manage (and,
#      on 2.16, Python 3.6 refused with the host, its Python and the minimum);
#   4. the demo (site.yml on the lab), a second run that must report changed=0, and --check --diff on
#      the converged lab, also changed=0;
#   5. `ansible-doc` of every module.
# The lab's hosts take GPUFLEET_TEST_LAB_ADDRESS (default 127.0.2XY.2 for ansible-core 2.XY), so legs
# and other labs never collide. Each step's duration is printed; the leg stops at the first failure
# and always stops the lab it started.
set -euo pipefail
version=${1:?usage: $0 ANSIBLE_CORE_VERSION (e.g. 2.21.5)}
[[ $version =~ ^2\.([0-9]+)\.[0-9]+$ ]] || { echo "not an ansible-core version: $version" >&2; exit 2; }
minor=${BASH_REMATCH[1]}
repo=$(cd "$(dirname "$0")/../.." && pwd)
cd "$repo"
venv=.matrix/venv-2.$minor
lab_dir=.lab/matrix-2.$minor
export GPUFLEET_TEST_LAB_ADDRESS=${GPUFLEET_TEST_LAB_ADDRESS:-127.0.2$minor.2}
export ANSIBLE_COLLECTIONS_PATH=$repo/.build ANSIBLE_NOCOLOR=1 ANSIBLE_FORCE_COLOR=0
python=${GPUFLEET_MATRIX_PYTHON:-}
if [ -z "$python" ]; then
  for candidate in "$HOME/.pyenv/versions/3.12"*/bin/python3.12 python3.12; do
    # (a pyenv shim exists for every version pyenv knows, and fails unless that version is selected)
    "$candidate" -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { python=$(command -v "$candidate"); break; }
  done
fi
[ -n "$python" ] || { echo "no Python 3.12 found: set GPUFLEET_MATRIX_PYTHON" >&2; exit 2; }

leg_start=$SECONDS
summary=()
step() {  # step NAME COMMAND...: run, time, remember (GPUFLEET_LEG_SKIP: names of steps to skip, comma-separated)
  local name=$1 started=$SECONDS
  shift
  if [[ ",${GPUFLEET_LEG_SKIP:-}," == *",$name,"* ]]; then
    summary+=("$(printf '%-34s %4s    skipped (GPUFLEET_LEG_SKIP)' "$name" -)")
    return 0
  fi
  echo "== [ansible-core $version] $name"
  if "$@"; then
    summary+=("$(printf '%-34s %4d s  ok' "$name" $((SECONDS - started)))")
  else
    summary+=("$(printf '%-34s %4d s  FAILED' "$name" $((SECONDS - started)))")
    report
    exit 1
  fi
}
report() {
  echo "== ansible-core $version leg ($venv, lab $GPUFLEET_TEST_LAB_ADDRESS):"
  printf '  %s\n' "${summary[@]}"
  echo "  total $((SECONDS - leg_start)) s"
}
lab_down() {
  [ -f "$lab_dir/pids.json" ] && PYTHONPATH=tests/lab "$venv/bin/python" -m gpulab down --dir "$lab_dir" >/dev/null || true
}
trap lab_down EXIT

install() {
  local stamp=$venv/.installed-$version
  [ -f "$stamp" ] && return 0
  rm -rf "$venv" && "$python" -m venv "$venv"
  # ansible-test makes a virtualenv of its own for each sanity test with its pinned tools.
  "$venv/bin/pip" install -q "ansible-core==$version" -r tests/tools/matrix-requirements.txt
  touch "$stamp"
}
docs() {  # every module's documentation renders
  local modules=()
  for f in plugins/modules/*.py; do modules+=("gpufleet.sharing.$(basename "$f" .py)"); done
  "$venv/bin/ansible-doc" -t module "${modules[@]}" >/dev/null
}

main() {  # the whole leg in a function: bash has read all of it before it runs (safe to edit meanwhile)
make -s collection
step "venv (ansible-core $version)" install
step "sanity" env GPUFLEET_VENV="$venv" tests/tools/sanity.sh
step "unit tests" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/unit
step "in-process equivalence" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/lab/tests/test_in_process_modules.py
step "host Python (oldest, refused)" "$venv/bin/python" -m pytest -q -p no:cacheprovider tests/lab/tests/test_host_python_lab.py
step "demo" "$venv/bin/python" tests/lab/demo.py --dir "$lab_dir"
step "second run (changed=0)" "$venv/bin/python" tests/lab/demo.py --dir "$lab_dir" --again
step "--check --diff (changed=0)" "$venv/bin/python" tests/lab/demo.py --dir "$lab_dir" --again --check
step "ansible-doc of every module" docs
report
}
main
