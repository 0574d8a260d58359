#!/usr/bin/env bash
# Release check: `ansible-galaxy collection build` works, the tarball installs into an empty
# collections path, and ansible-doc renders every module from the installed copy.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
bin="$repo/.venv/bin"
work=$(mktemp -d /tmp/gpufleet-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
"$bin/ansible-galaxy" collection build "$repo" --output-path "$work/dist" >/dev/null
tarball=$(ls "$work"/dist/gpufleet-sharing-*.tar.gz)
echo "built $(basename "$tarball") ($(du -h "$tarball" | cut -f1))"
# --force: the source tree itself may be on the configured collections path (.build), which would
# make ansible-galaxy skip the install as "already installed".
ANSIBLE_COLLECTIONS_PATH="$work/collections" "$bin/ansible-galaxy" collection install --force "$tarball" \
  -p "$work/collections" >/dev/null
test -f "$work/collections/ansible_collections/gpufleet/sharing/MANIFEST.json"
# Event-Driven Ansible content (docs/awx.md): ansible-rulebook looks for a collection's rulebooks and
# event sources under extensions/eda/ of the installed collection.
for eda in rulebooks/gpu_fleet.yml rulebooks/gpu_fleet_controller.yml plugins/event_source/gpu_nodes.py \
           plugins/event_source/alertmanager.py; do
  test -f "$work/collections/ansible_collections/gpufleet/sharing/extensions/eda/$eda" \
    || { echo "the installed collection lacks extensions/eda/$eda"; exit 1; }
done
count=0
for module in "$repo"/plugins/modules/*.py; do
  name=$(basename "$module" .py)
  ANSIBLE_COLLECTIONS_PATH="$work/collections" "$bin/ansible-doc" -t module "gpufleet.sharing.$name" > "$work/doc.txt"
  grep -q "EXAMPLES" "$work/doc.txt" || { echo "ansible-doc gpufleet.sharing.$name has no examples"; exit 1; }
  grep -q "ATTRIBUTES" "$work/doc.txt" || { echo "ansible-doc gpufleet.sharing.$name has no attributes"; exit 1; }
  count=$((count + 1))
done
for role in "$repo"/roles/*/; do
  name=$(basename "$role")
  ANSIBLE_COLLECTIONS_PATH="$work/collections" "$bin/ansible-doc" -t role "gpufleet.sharing.$name" >/dev/null
done
echo "installed tarball: ansible-doc renders $count modules and $(ls -d "$repo"/roles/*/ | wc -l) roles"

# Execution environment (AWX / Automation Platform): ansible-builder reads the installed
# collection's meta/execution-environment.yml, and writes a complete build context for the EE
# definition in docs/examples/ (offline; there is no container runtime here to build the image).
"$bin/ansible-builder" introspect "$work/collections" > "$work/introspect.txt"
for wanted in "kubernetes>=" "jmespath>=" "openssh-client \[platform:dpkg\]" "openssh-clients \[platform:rpm\]"; do
  grep -q "$wanted.*from collection gpufleet.sharing" "$work/introspect.txt" \
    || { echo "ansible-builder introspect does not list $wanted for gpufleet.sharing"; cat "$work/introspect.txt"; exit 1; }
done
version=$(basename "$tarball" .tar.gz); version=${version#gpufleet-sharing-}
mkdir "$work/ee"
sed "s/COLLECTION_VERSION/$version/g" "$repo/docs/examples/execution-environment.yml" > "$work/ee/execution-environment.yml"
cp "$tarball" "$work/ee/"
helm=$(PYTHONPATH="$repo/tests/lab" "$bin/python" -c 'import sys; from gpulab import tools; print(tools.ensure_helm(sys.argv[1]))' "$repo/.cache")
cp "$helm" "$work/ee/helm"
(cd "$work/ee" && "$bin/ansible-builder" create -f execution-environment.yml -c context >/dev/null)
context="$work/ee/context"
test -f "$context/_build/collections/$(basename "$tarball")" || { echo "EE context lacks the collection tarball"; exit 1; }
test -x "$context/_build/tools/helm" || { echo "EE context lacks helm"; exit 1; }
grep -q "/build/collections/$(basename "$tarball")" "$context/_build/requirements.yml" || { echo "EE requirements.yml does not name the tarball"; exit 1; }
grep -q "introspect" "$context/Dockerfile" || { echo "EE Dockerfile does not introspect the collections"; exit 1; }
echo "execution environment: ansible-builder introspect lists the collection's requirements; create wrote a complete context"

# The decision environment of the EDA rulebook (docs/examples/decision-environment.yml): same tarball.
mkdir "$work/de"
sed "s/COLLECTION_VERSION/$version/g" "$repo/docs/examples/decision-environment.yml" > "$work/de/decision-environment.yml"
cp "$tarball" "$work/de/"
(cd "$work/de" && "$bin/ansible-builder" create -f decision-environment.yml -c context >/dev/null)
test -f "$work/de/context/_build/collections/$(basename "$tarball")" || { echo "DE context lacks the collection tarball"; exit 1; }
grep -q "ansible-rulebook" "$work/de/context/_build/requirements.txt" || { echo "DE requirements.txt lacks ansible-rulebook"; exit 1; }
grep -q "default-jre-headless" "$work/de/context/_build/bindep.txt" || { echo "DE bindep.txt lacks the Java runtime"; exit 1; }
echo "decision environment: create wrote a context with the collection, ansible-rulebook and Java"
