"""Benchmark: a no-op playbooks/site.yml over a lab fleet against an ansible.builtin.ping play.

Usage: .venv/bin/python tests/bench/bench_site_noop.py [--sizes 5 50 200] [--config ansible.cfg] [--json FILE]
                                                     [--repeats N] [--compare CHECKOUT]

For each fleet size N (a lab with the virtual cluster and N SSH GPU hosts):
  1. converge once with site.yml (timed, reported, not part of the ratio);
  2. time `ansible all -m ansible.builtin.ping` over the same hosts (the baseline), after an untimed
     one, so that both timed runs find the SSH connections open;
  3. time site.yml again - nothing to change - and require changed=0 in its recap;
and report the no-op run as a ratio to the ping baseline and as seconds per host, so that the
scaling over N (should stay flat per host) is visible, with what one more host costs between two
sizes (no-op and ping). Both runs use the same inventory, forks and
SSH settings (ControlPersist, pipelining). No timed assertions: it prints a table and JSON.
With --repeats N, the ping and the no-op are timed N times, interleaved, and the medians compared. With
--compare CHECKOUT (another checkout of this repository with its own .build, e.g. a `git worktree` of
an earlier commit), that checkout's no-op site.yml is timed on the same lab in the same rounds,
interleaved with this one's (taking turns at running first after the ping), so that a before/after is
measured under the same load.
With --config, both runs use that ansible.cfg (ANSIBLE_CONFIG; e.g. docs/examples/ansible.cfg) instead of
the bench's own forks=10.

Each timed run also records where the machine's CPU went, in core-seconds (benchcpu.py): the whole
machine, the run's own process tree, the lab's cluster server, and the rest (the lab's SSH hosts and
their simulated tools). The wall-time ratio and the machine's CPU ratio are both reported: on a
machine whose cores the lab shares with the run, the second says how much more work the no-op is.

The 6-host fleet is the demo's (A100 MIG + time-sliced slices, H100 whole GPUs, H200 MPS). Larger
fleets use H100 and H200 hosts only, so that the first converge does not spend its time on MIG
rollouts (those are measured by the fleet scenario and tests/bench/bench_mig_noop.py).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
LAB = os.path.join(REPO, 'tests', 'lab')
BIN = os.path.dirname(sys.executable)  # this venv's ansible (a matrix leg's: .matrix/venv-2.21/bin/python runs this on 2.21)
sys.path.insert(0, LAB)
sys.path.insert(0, HERE)

from gpulab import tools  # noqa: E402
from gpulab.cluster import access  # noqa: E402
from benchlib import RunFailed, recap  # noqa: E402
from benchcpu import CpuMeter, lab_server_pid  # noqa: E402

DEMO_FLEET = [
    'a100-inf-0=A100-40GB:1@a100_inference,gpu_hosts',
    'a100-inf-1=A100-40GB:1@a100_inference,gpu_hosts',
    'h100-trn-0=H100-80GB:2@h100_training,gpu_hosts',
    'h100-trn-1=H100-80GB:2@h100_training,gpu_hosts',
    'h200-shr-0=H200:1@h200_shared,gpu_hosts',
    'h200-shr-1=H200:1@h200_shared,gpu_hosts',
]


def team_namespaces():
    """The namespaces of inventories/lab's teams (gpufleet_teams): created before the first run, as a
    cluster admin does (docs/quotas.md), so that site.yml writes the teams' queues."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, 'inventories', 'lab', 'group_vars', 'all.yml')) as handle:
        return sorted({ns for team in yaml.safe_load(handle).get('gpufleet_teams') or [] for ns in team['namespaces']})


def fleet(size):
    if size == len(DEMO_FLEET):
        return list(DEMO_FLEET)
    hosts = []
    for index in range(size):
        if index % 2:
            hosts.append('h200-%02d=H200:1@h200_shared,gpu_hosts' % index)
        else:
            hosts.append('h100-%02d=H100-80GB:2@h100_training,gpu_hosts' % index)
    return hosts


def timed(argv, env, meter=None, cpu=None):
    """Seconds of a run; with a CpuMeter, its CPU split is appended to the list ``cpu``."""
    before = meter.start() if meter else None
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if meter:
        cpu.append(meter.since(before))
    return seconds, proc


def site_argv(repo, lab_dir, helm):
    """site.yml of a checkout (its playbooks, lab inventory and .build) against the lab."""
    return [os.path.join(BIN, 'ansible-playbook'),
            '-i', os.path.join(lab_dir, 'inventory.yml'), '-i', os.path.join(repo, 'inventories', 'lab'),
            '-e', 'gpufleet_kubeconfig=%s' % os.path.join(lab_dir, 'kubeconfig'),
            '-e', 'gpu_operator_chart_ref=%s' % os.path.join(LAB, 'charts', 'gpu-operator-standin'),
            '-e', 'gpu_operator_helm_binary=%s' % helm,
            '-e', 'gpufleet_report_dir=%s' % os.path.join(lab_dir, 'reports'),
            os.path.join(repo, 'playbooks', 'site.yml')]


def timed_noop(argv, env, what, meter=None, cpu=None):
    """Seconds of a no-op run; a failure or a change is an error naming the hosts."""
    seconds, proc = timed(argv, env, meter, cpu)
    if proc.returncode != 0:
        raise RunFailed(what, proc)
    changed = {host: counts for host, counts in recap(proc.stdout).items() if counts['changed']}
    if changed:
        raise RuntimeError('%s changed things on %s' % (what, sorted(changed)))
    return seconds


def median_split(runs):
    """The median of each CPU figure over the runs (core-seconds)."""
    return dict((key, statistics.median(run[key] for run in runs)) for key in runs[0])


def measure(size, helm, workdir, config=None, repeats=1, compare=None):
    lab_dir = os.path.join(workdir, 'lab-%d' % size)
    env = dict(os.environ, PYTHONPATH=LAB)
    argv = [sys.executable, '-m', 'gpulab', 'up', '--dir', lab_dir, '--cluster']
    for host in fleet(size):
        argv += ['--host', host]
    started = time.perf_counter()
    subprocess.run(argv, env=env, check=True, capture_output=True)
    access.create_namespaces(lab_dir, team_namespaces())
    lab_up = time.perf_counter() - started
    try:
        ansible_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'),
                           ANSIBLE_NOCOLOR='1', ANSIBLE_FORKS='10')
        if config:  # its settings replace the bench's forks (the lab inventory keeps its SSH settings)
            ansible_env.pop('ANSIBLE_FORKS')
            ansible_env['ANSIBLE_CONFIG'] = os.path.abspath(config)
        inventories = ['-i', os.path.join(lab_dir, 'inventory.yml'), '-i', os.path.join(REPO, 'inventories', 'lab')]
        site = site_argv(REPO, lab_dir, helm)
        converge, proc = timed(site, ansible_env)
        if proc.returncode != 0:
            raise RunFailed('converge of %d hosts' % size, proc)
        ping_argv = [os.path.join(BIN, 'ansible'), 'gpu_hosts', '-m', 'ansible.builtin.ping'] + inventories
        # Untimed first: the SSH connections (ControlPersist) are open for the timed ping as they are
        # for the no-op run right after it, whatever the converge left.
        timed(ping_argv, ansible_env)
        compare_env = dict(ansible_env, ANSIBLE_COLLECTIONS_PATH=os.path.join(compare, '.build')) if compare else None
        pings, noops, compared = [], [], []
        meter = CpuMeter(lab_server_pid(lab_dir))
        cpu = {'ping': [], 'noop': [], 'compare': []}
        for _round in range(repeats):
            ping, proc = timed(ping_argv, ansible_env, meter, cpu['ping'])
            if proc.returncode != 0:
                raise RunFailed('ping of %d hosts' % size, proc)
            pings.append(ping)
            runs = [lambda: noops.append(timed_noop(site, ansible_env, 'no-op run of %d hosts' % size, meter, cpu['noop']))]
            if compare:
                runs.append(lambda: compared.append(timed_noop(
                    site_argv(compare, lab_dir, helm), compare_env, 'no-op run of %d hosts by %s' % (size, compare),
                    meter, cpu['compare'])))
            # The run right after the ping is not the one after it: the two checkouts take turns.
            for run in runs[::-1] if _round % 2 else runs:
                run()
        ping, noop = statistics.median(pings), statistics.median(noops)
        row = {'hosts': size, 'lab_up_s': lab_up, 'converge_s': converge, 'ping_s': ping, 'noop_site_s': noop,
               'ratio_noop_to_ping': noop / ping, 'noop_s_per_host': noop / size, 'changed_in_noop': 0,
               'repeats': repeats, 'ping_runs_s': pings, 'noop_runs_s': noops,
               'ping_cpu': median_split(cpu['ping']), 'noop_cpu': median_split(cpu['noop']),
               'ping_cpu_runs': cpu['ping'], 'noop_cpu_runs': cpu['noop']}
        row['ratio_noop_to_ping_cpu'] = row['noop_cpu']['machine'] / row['ping_cpu']['machine']
        if compare:
            row.update(compare=compare, compare_noop_runs_s=compared, compare_noop_s=statistics.median(compared),
                       compare_ratio_noop_to_ping=statistics.median(compared) / ping,
                       compare_noop_cpu=median_split(cpu['compare']), compare_noop_cpu_runs=cpu['compare'])
            row['compare_ratio_noop_to_ping_cpu'] = row['compare_noop_cpu']['machine'] / row['ping_cpu']['machine']
        return row
    finally:
        subprocess.run([sys.executable, '-m', 'gpulab', 'down', '--dir', lab_dir], env=env, check=False,
                       capture_output=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--sizes', type=int, nargs='+', default=[5, 50, 200])
    parser.add_argument('--config', help='an ansible.cfg for both runs (e.g. docs/examples/ansible.cfg)')
    parser.add_argument('--json', help='also write the results to this file')
    parser.add_argument('--repeats', type=int, default=1, help='timed rounds (ping, no-op); medians are compared')
    parser.add_argument('--compare', help="another checkout (with its .build) whose no-op is timed in the same rounds")
    options = parser.parse_args()
    helm = tools.ensure_helm(os.path.join(REPO, '.cache'))
    workdir = tempfile.mkdtemp(prefix='gpufleet-bench-')
    results = []
    try:
        for size in options.sizes:
            results.append(measure(size, helm, workdir, options.config, options.repeats,
                                   os.path.abspath(options.compare) if options.compare else None))
            row = results[-1]
            print('measured %d hosts: ping %.1fs, no-op site.yml %.1fs' % (size, row['ping_s'], row['noop_site_s']),
                  flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print('\n%6s %10s %10s %12s %12s %14s %16s' % ('hosts', 'lab up s', 'converge s', 'ping s', 'no-op s',
                                                   'no-op / ping', 'no-op s / host'))
    for row in results:
        print('%6d %10.1f %10.1f %12.1f %12.1f %14.2f %16.2f' % (
            row['hosts'], row['lab_up_s'], row['converge_s'], row['ping_s'], row['noop_site_s'],
            row['ratio_noop_to_ping'], row['noop_s_per_host']))
        if 'compare' in row:
            print('%6s %s: no-op %.1fs, %.2fx the ping (this checkout: %.2fx)' % (
                '', row['compare'], row['compare_noop_s'], row['compare_ratio_noop_to_ping'], row['ratio_noop_to_ping']))
    print('\nCPU, core-seconds (medians): the machine, the run itself, the lab server, the rest (lab hosts)')
    print('%6s %-8s %10s %12s %12s %16s %12s' % ('hosts', 'run', 'machine', 'controller', 'lab server', 'hosts and rest',
                                                 'x ping cpu'))
    for row in results:
        runs = [('ping', row['ping_cpu']), ('no-op', row['noop_cpu'])]
        if 'compare' in row:
            runs.append(('compare', row['compare_noop_cpu']))
        for name, split in runs:
            print('%6d %-8s %10.1f %12.1f %12.1f %16.1f %12.2f' % (
                row['hosts'], name, split['machine'], split['controller'], split['lab_server'], split['hosts_and_rest'],
                split['machine'] / row['ping_cpu']['machine']))
    # Flat per host: what one more host costs (between consecutive sizes), no-op against ping.
    for small, large in zip(results, results[1:]):
        added = large['hosts'] - small['hosts']
        if added > 0:
            ping_step = (large['ping_s'] - small['ping_s']) / added
            noop_step = (large['noop_site_s'] - small['noop_site_s']) / added
            large['marginal_ping_s_per_host'], large['marginal_noop_s_per_host'] = ping_step, noop_step
            print('from %d to %d hosts, one more host costs: ping %.3fs, no-op %.3fs (%.2fx)' % (
                small['hosts'], large['hosts'], ping_step, noop_step, noop_step / ping_step if ping_step > 0 else float('nan')))
    print(json.dumps({'benchmark': 'site_noop_vs_ping', 'nproc': os.cpu_count(), 'config': options.config,
                      'results': results}))
    if options.json:
        with open(options.json, 'w') as handle:
            json.dump(results, handle, indent=2)


if __name__ == '__main__':
    main()
