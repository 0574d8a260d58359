"""The README's first command (`make demo`): the whole collection on the GPU lab.

1. starts the lab: a virtual GPU cluster and six SSH GPU hosts of mixed models in three groups
   (A100-40GB inference with MIG, H100-80GB training, H200 shared with MPS);
2. runs playbooks/site.yml with the lab's inventory plus inventories/lab (the groups' variables);
3. prints the verification report, the teams' Kueue queues (gpufleet_teams of inventories/lab, their
   namespaces created first, as a cluster admin does), the path of the HTML fleet report and how to
   stop the lab.

The lab's hosts take loopback addresses from GPUFLEET_TEST_LAB_ADDRESS (default 127.0.0.2), so that two
demos (a version matrix's legs, two clones) never collide; ansible-playbook is the one beside the Python
that runs this script (the venv of a matrix leg, tests/tools/matrix_leg.sh). `--again` re-runs site.yml on
the running lab and fails unless every task reports changed=0.

The lab stays up afterwards so that you can look around (`kubectl --kubeconfig DIR/kubeconfig get
nodes`, `ssh` into a host, re-run the playbook and watch changed=0). `make demo-down` stops it.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

LAB = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(LAB))
sys.path.insert(0, LAB)

import yaml  # noqa: E402

from gpulab import tools  # noqa: E402  (after the path set-up above)
from gpulab.cluster import access  # noqa: E402

TEAMS_FILE = os.path.join(REPO, 'inventories', 'lab', 'group_vars', 'all.yml')
KUEUE = '/apis/kueue.x-k8s.io/v1beta2'

HOSTS = [
    'a100-inf-0=A100-40GB:1@a100_inference,gpu_hosts',
    'a100-inf-1=A100-40GB:1@a100_inference,gpu_hosts',
    'h100-trn-0=H100-80GB:2@h100_training,gpu_hosts',
    'h100-trn-1=H100-80GB:2@h100_training,gpu_hosts',
    'h200-shr-0=H200:1@h200_shared,gpu_hosts',
    'h200-shr-1=H200:1@h200_shared,gpu_hosts',
]


def run(argv, env=None):
    print('+ ' + ' '.join(argv), flush=True)
    return subprocess.call(argv, env=env, cwd=REPO)


def lab(*args):
    env = dict(os.environ, PYTHONPATH=LAB)
    return run([sys.executable, '-m', 'gpulab'] + list(args), env=env)


def teams():
    with open(TEAMS_FILE) as handle:
        return yaml.safe_load(handle).get('gpufleet_teams') or []


def create_team_namespaces(lab_dir):
    """The cluster admin's step before the quotas (docs/quotas.md: the team namespaces must exist)."""
    access.create_namespaces(lab_dir, sorted({ns for team in teams() for ns in team['namespaces']}))


def queues_table(lab_dir):
    """The teams' ClusterQueues (nominal quota per flavor and resource) and LocalQueues, read live."""
    cluster = access.admin_request(lab_dir, 'GET', KUEUE + '/clusterqueues').get('items') or []
    local = access.admin_request(lab_dir, 'GET', KUEUE + '/localqueues').get('items') or []
    lines = ['%-10s %-9s %-26s %-44s %s' % ('TEAM', 'COHORT', 'LOCAL QUEUES', 'FLAVOR', 'NOMINAL QUOTA')]
    for queue in sorted(cluster, key=lambda q: q['metadata']['name']):
        name = queue['metadata']['name']
        spec = queue.get('spec') or {}
        locals_ = ','.join(sorted('%s/%s' % (q['metadata']['namespace'], q['metadata']['name']) for q in local
                                  if (q.get('spec') or {}).get('clusterQueue') == name)) or '-'
        flavors = [f for group in spec.get('resourceGroups') or [] for f in group.get('flavors') or []]
        for index, flavor in enumerate(flavors or [{'name': '-', 'resources': []}]):
            quota = ', '.join('%s=%s' % (r['name'].replace('nvidia.com/', ''), r.get('nominalQuota'))
                              for r in flavor.get('resources') or []) or '-'
            first = index == 0
            lines.append('%-10s %-9s %-26s %-44s %s' % (name if first else '', (spec.get('cohortName') or '-') if first else '',
                                                        locals_ if first else '', flavor['name'], quota))
    return '\n'.join(lines)


def changed_hosts(recap):
    """The hosts whose PLAY RECAP line reports changed (or failed) tasks: {host: line}."""
    hosts = {}
    for line in recap.splitlines():
        match = re.match(r'^(\S+)\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', line)
        if match and any(int(count) for count in match.groups()[1:]):
            hosts[match.group(1)] = line.strip()
    return hosts


def rerun_unchanged(playbook, env, started):
    """site.yml once more on the running lab: 0 only when it passes with changed=0 on every host."""
    print('+ ' + ' '.join(playbook), flush=True)
    proc = subprocess.run(playbook, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    print(proc.stdout)
    recap = proc.stdout.rsplit('PLAY RECAP', 1)[-1] if 'PLAY RECAP' in proc.stdout else ''
    changed = changed_hosts(recap)
    if proc.returncode != 0 or not recap or changed:
        print('Second run: NOT idempotent (exit %d): %s' % (proc.returncode, changed or 'no PLAY RECAP'), file=sys.stderr)
        return proc.returncode or 1
    print('Re-run%s finished in %.0f s with changed=0 on every host.' % (' (--check --diff)' if '--check' in playbook else '', time.time() - started))
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dir', default=os.path.join(REPO, '.lab', 'demo'), help='lab directory')
    parser.add_argument('--check', action='store_true', help='run site.yml in check mode (--check --diff)')
    parser.add_argument('--again', action='store_true',
                        help='re-run site.yml on the running lab (no restart); fail unless changed=0 everywhere')
    parser.add_argument('--first-address', default=os.environ.get('GPUFLEET_TEST_LAB_ADDRESS', '127.0.0.2'),
                        help='loopback address of the first lab host (default: GPUFLEET_TEST_LAB_ADDRESS or 127.0.0.2)')
    options = parser.parse_args()
    lab_dir = os.path.abspath(options.dir)

    started = time.time()
    if options.again:
        if not os.path.exists(os.path.join(lab_dir, 'pids.json')):
            print('--again needs the running lab of a previous demo in %s' % lab_dir, file=sys.stderr)
            return 1
    else:
        if os.path.exists(os.path.join(lab_dir, 'pids.json')):
            lab('down', '--dir', lab_dir)  # a previous demo's lab: stop exactly what it started
        host_args = [arg for host in HOSTS for arg in ('--host', host)]
        if lab('up', '--dir', lab_dir, '--cluster', '--first-address', options.first_address, *host_args) != 0:
            print('The lab did not start; see the messages above.', file=sys.stderr)
            return 1
        create_team_namespaces(lab_dir)
    helm = tools.ensure_helm(os.path.join(REPO, '.cache'))
    report_dir = os.path.join(lab_dir, 'reports')
    shutil.rmtree(report_dir, ignore_errors=True)  # never print a previous run's report
    playbook = [
        os.path.join(os.path.dirname(sys.executable), 'ansible-playbook'),  # this venv's ansible-core
        '-i', os.path.join(lab_dir, 'inventory.yml'),
        '-i', os.path.join(REPO, 'inventories', 'lab'),
        '-e', 'gpufleet_kubeconfig=%s' % os.path.join(lab_dir, 'kubeconfig'),
        '-e', 'gpu_operator_chart_ref=%s' % os.path.join(LAB, 'charts', 'gpu-operator-standin'),
        '-e', 'gpu_operator_helm_binary=%s' % helm,
        '-e', 'gpufleet_report_dir=%s' % report_dir,
        os.path.join(REPO, 'playbooks', 'site.yml'),
    ]
    if options.check:
        playbook[1:1] = ['--check', '--diff']
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'),
               ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')
    if options.again:
        return rerun_unchanged(playbook, env, started)
    result = run(playbook, env=env)

    table = os.path.join(report_dir, 'gpufleet-verify.txt')
    if os.path.exists(table):
        with open(table) as handle:
            print('\nVerification report (%s, JSON beside it):\n' % table)
            print(handle.read())
    summary = os.path.join(report_dir, 'rollout-summary.json')
    if os.path.exists(summary):
        with open(summary) as handle:
            nodes = json.load(handle)['nodes']
        print('Rollout: ' + ', '.join('%s %s' % (n['node'], n['outcome']) for n in nodes))
    print('\nTeam queues (Kueue, from the fleet plan; gpufleet_teams in %s):\n' % os.path.relpath(TEAMS_FILE, REPO))
    print(queues_table(lab_dir))
    html = os.path.join(report_dir, 'fleet-report.html')
    if os.path.exists(html):
        print('Fleet report (open it in a browser): %s' % html)
    outcome = 'success' if result == 0 else 'FAILURES (exit %d)' % result
    print('\nDemo finished in %.0f s with %s.' % (time.time() - started, outcome))
    print('The lab is still running: kubeconfig %s' % os.path.join(lab_dir, 'kubeconfig'))
    print('Stop it with: make demo-down   (or: PYTHONPATH=tests/lab .venv/bin/python -m gpulab down --dir %s)' % lab_dir)
    return result


if __name__ == '__main__':
    sys.exit(main())
