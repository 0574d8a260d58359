"""The README's first command (`make demo`): the whole collection on the GPU lab.

1. starts the lab: a virtual GPU cluster and six SSH GPU hosts of mixed models in three groups
   (A100-40GB inference with MIG, H100-80GB training, H200 shared with MPS);
2. runs playbooks/site.yml with the lab's inventory plus inventories/lab (the groups' variables);
3. prints the verification report, the path of the HTML fleet report and how to stop the lab.

The lab stays up afterwards so that you can look around (`kubectl --kubeconfig DIR/kubeconfig get
nodes`, `ssh` into a host, re-run the playbook and watch changed=0). `make demo-down` stops it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

LAB = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(LAB))
sys.path.insert(0, LAB)

from gpulab import tools  # noqa: E402  (after the path set-up above)

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--dir', default=os.path.join(REPO, '.lab', 'demo'), help='lab directory')
    parser.add_argument('--check', action='store_true', help='run site.yml in check mode (--check --diff)')
    options = parser.parse_args()
    lab_dir = os.path.abspath(options.dir)

    started = time.time()
    if os.path.exists(os.path.join(lab_dir, 'pids.json')):
        lab('down', '--dir', lab_dir)  # a previous demo's lab: stop exactly what it started
    host_args = [arg for host in HOSTS for arg in ('--host', host)]
    if lab('up', '--dir', lab_dir, '--cluster', *host_args) != 0:
        print('The lab did not start; see the messages above.', file=sys.stderr)
        return 1

    helm = tools.ensure_helm(os.path.join(REPO, '.cache'))
    report_dir = os.path.join(lab_dir, 'reports')
    shutil.rmtree(report_dir, ignore_errors=True)  # never print a previous run's report
    playbook = [
        os.path.join(REPO, '.venv', 'bin', 'ansible-playbook'),
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
