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
