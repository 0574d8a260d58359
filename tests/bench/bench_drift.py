"""Benchmark: playbooks/drift.yml over a lab fleet against an ansible.builtin.ping play and a no-op site.yml.

Usage: .venv/bin/python tests/bench/bench_drift.py [--sizes 5 50 200] [--json FILE]

The method of bench_site_noop.py, in the same run for each fleet size N (a lab with the virtual
cluster and N SSH GPU hosts, the same fleets): converge once with site.yml (untimed for the ratio),
an untimed ping so that the SSH connections are open, then timed: ping, no-op site.yml (changed=0
required), drift.yml on the converged fleet (no drift required, changed=0 required). Reports each as
a ratio to the ping, drift against the no-op run, and the machine's load average (1 min) before and
after, since the machine may be shared. No timed assertions: it prints a table and JSON.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_site_noop import BIN, LAB, REPO, fleet, recap, team_namespaces, timed  # noqa: E402
from gpulab import tools  # noqa: E402
from gpulab.cluster import access  # noqa: E402
from benchlib import RunFailed  # noqa: E402


def run_checked(name, argv, env, size):
    seconds, proc = timed(argv, env)
    changed = sum(host['changed'] for host in recap(proc.stdout).values())
    if proc.returncode != 0:
        raise RunFailed('%s of %d hosts' % (name, size), proc)
    if changed:
        raise RuntimeError('%s of %d hosts changed %d things: %s' % (name, size, changed, sorted(
            host for host, counts in recap(proc.stdout).items() if counts['changed'])))
    return seconds


def measure(size, helm, workdir):
    lab_dir = os.path.join(workdir, 'lab-%d' % size)
    env = dict(os.environ, PYTHONPATH=LAB)
    argv = [sys.executable, '-m', 'gpulab', 'up', '--dir', lab_dir, '--cluster']
    for host in fleet(size):
        argv += ['--host', host]
    subprocess.run(argv, env=env, check=True, capture_output=True)
    access.create_namespaces(lab_dir, team_namespaces())
    try:
        ansible_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1',
                           ANSIBLE_FORKS='10')
        inventories = ['-i', os.path.join(lab_dir, 'inventory.yml'), '-i', os.path.join(REPO, 'inventories', 'lab')]
        extra = ['-e', 'gpufleet_kubeconfig=%s' % os.path.join(lab_dir, 'kubeconfig'),
                 '-e', 'gpu_operator_chart_ref=%s' % os.path.join(LAB, 'charts', 'gpu-operator-standin'),
                 '-e', 'gpu_operator_helm_binary=%s' % helm,
                 '-e', 'gpufleet_report_dir=%s' % os.path.join(lab_dir, 'reports')]
        playbook = [os.path.join(BIN, 'ansible-playbook')] + inventories + extra
        site, drift = playbook + [os.path.join(REPO, 'playbooks', 'site.yml')], playbook + [os.path.join(REPO, 'playbooks', 'drift.yml')]
        converge, proc = timed(site, ansible_env)
        if proc.returncode != 0:
            raise RunFailed('converge of %d hosts' % size, proc)
        ping_argv = [os.path.join(BIN, 'ansible'), 'gpu_hosts', '-m', 'ansible.builtin.ping'] + inventories
        timed(ping_argv, ansible_env)
        load_before = os.getloadavg()[0]
        ping = run_checked('ping', ping_argv, ansible_env, size)
        noop = run_checked('no-op site.yml', site, ansible_env, size)
        drift_s = run_checked('drift.yml', drift, ansible_env, size)
        return {'hosts': size, 'converge_s': converge, 'ping_s': ping, 'noop_site_s': noop, 'drift_s': drift_s,
                'ratio_noop_to_ping': noop / ping, 'ratio_drift_to_ping': drift_s / ping,
                'ratio_drift_to_noop': drift_s / noop, 'load1_before': load_before, 'load1_after': os.getloadavg()[0]}
    finally:
        subprocess.run([sys.executable, '-m', 'gpulab', 'down', '--dir', lab_dir], env=env, check=False, capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[5, 50, 200])
    parser.add_argument('--json', help='also write the results to this file')
    options = parser.parse_args()
    helm = tools.ensure_helm(os.path.join(REPO, '.cache'))
    workdir = tempfile.mkdtemp(prefix='gpufleet-bench-drift-')
    results = []
    try:
        for size in options.sizes:
            started = time.perf_counter()
            results.append(measure(size, helm, workdir))
            print('measured %d hosts in %.0fs: %s' % (size, time.perf_counter() - started, json.dumps(results[-1])), flush=True)
            if options.json:  # each size as soon as it is measured (a long run may be stopped before the last)
                with open(options.json, 'w', encoding='utf-8') as handle:
                    json.dump(results, handle, indent=2)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    header = ('hosts', 'ping s', 'no-op s', 'drift s', 'no-op/ping', 'drift/ping', 'drift/no-op', 'load 1m')
    print('\n%6s %8s %10s %9s %12s %12s %12s %11s' % header)
    for row in results:
        print('%6d %8.1f %10.1f %9.1f %12.2f %12.2f %12.2f %5.1f-%.1f' % (
            row['hosts'], row['ping_s'], row['noop_site_s'], row['drift_s'], row['ratio_noop_to_ping'],
            row['ratio_drift_to_ping'], row['ratio_drift_to_noop'], row['load1_before'], row['load1_after']))
    print(json.dumps({'benchmark': 'drift_vs_ping', 'nproc': os.cpu_count(), 'results': results}))
    if options.json:
        with open(options.json, 'w', encoding='utf-8') as handle:
            json.dump(results, handle, indent=2)


if __name__ == '__main__':
    main()
