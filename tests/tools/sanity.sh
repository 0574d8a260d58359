#!/usr/bin/env bash
# Run `ansible-test sanity` on a private copy of the working tree laid out as
# ansible_collections/gpufleet/sharing (ansible-test requires that path; a symlink is not enough
# because it resolves the working directory). Each run gets its own copy, so parallel runs do not
# disturb each other. Arguments are passed to ansible-test (e.g. a file list or --test NAME).
# GPUFLEET_VENV names another venv (a version matrix leg's, tests/tools/matrix_leg.sh): its
# ansible-test and its Python run the sanity tests, with that ansible-core's rules.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=$(cd "$repo" && cd "${GPUFLEET_VENV:-.venv}" && pwd)
python_version=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
work=$(mktemp -d /tmp/gpufleet-sanity.XXXXXX)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/gpufleet/sharing"
mkdir -p "$dest"
cd "$repo"
git ls-files -co --exclude-standard -z | while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done \
  | tar --null -T - -cf - | tar -xf - -C "$dest"
# The import test bootstraps pip from a download we cannot reach: provide the script locally.
pip_version=$("$venv/bin/python" - <<'PY'
import inspect, re
from ansible_test._internal import python_requirements
match = re.search(r"pip='([0-9.]+)'", inspect.getsource(python_requirements.get_venv_packages))
print(match.group(1) if match else '24.2')
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
mkdir -p "$(dirname "$cache")"
cmp -s "$repo/tests/tools/get_pip_local.py" "$cache" 2>/dev/null || cp "$repo/tests/tools/get_pip_local.py" "$cache"
cd "$dest"
# ansible-test lists files through git when a repository is present; give it one.
git init -q . && git add -A >/dev/null
"$venv/bin/ansible-test" sanity --python "$python_version" --color no "$@"
