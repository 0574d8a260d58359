"""Where a timed run's CPU went: the whole machine, the run's own process tree, the lab's cluster server.

On the lab, every party of a run shares the same cores: the controller (ansible-playbook and its
forked workers, ssh clients), the lab's SSH hosts (sshd, the modules they run, the simulated
nvidia-smi) and the lab's API server with its controller thread. A wall-time ratio alone cannot
say which of them grew, and the lab server's own background work (its controllers' resync passes)
slows the ping and the no-op alike. So each timed run also records, as core-seconds:

- ``machine``: busy time of every CPU (``/proc/stat``, all but idle and iowait);
- ``controller``: the run's process tree (``os.times()`` of waited-for children);
- ``lab_server``: the lab's cluster server (``/proc/PID/stat``, utime + stime);
- ``hosts_and_rest``: the machine less the two: the lab's SSH hosts, the simulated tools, the ssh
  ControlPersist masters (detached from the run), and anything else running on the machine.

Linux only (``/proc``); the parsers are pure (tests/unit/bench/test_bench_cpu.py).
"""
import json
import os

CLOCK_TICKS = os.sysconf('SC_CLK_TCK') if hasattr(os, 'sysconf') else 100


def machine_busy_ticks(proc_stat):
    """Busy clock ticks of all CPUs from the text of /proc/stat (its first, aggregate "cpu" line):
    user + nice + system + irq + softirq + steal (idle and iowait left out; guest time is already
    inside user and nice)."""
    for line in proc_stat.splitlines():
        fields = line.split()
        if fields and fields[0] == 'cpu':
            values = [int(value) for value in fields[1:9]] + [0] * 8
            user, nice, system, _idle, _iowait, irq, softirq, steal = values[:8]
            return user + nice + system + irq + softirq + steal
    raise ValueError('no aggregate "cpu" line in /proc/stat')


def process_ticks(pid_stat):
    """utime + stime clock ticks of a process from the text of /proc/PID/stat (fields 14 and 15,
    counted after the command name, which may itself hold spaces and parentheses)."""
    rest = pid_stat.rpartition(')')[2].split()
    if len(rest) < 13:
        raise ValueError('not a /proc/PID/stat line: %r' % pid_stat[:80])
    return int(rest[11]) + int(rest[12])


def split(machine_s, controller_s, lab_server_s):
    """The four figures of a run, in core-seconds."""
    return {'machine': machine_s, 'controller': controller_s, 'lab_server': lab_server_s,
            'hosts_and_rest': max(0.0, machine_s - controller_s - lab_server_s)}


def _read(path):
    with open(path) as handle:
        return handle.read()


class CpuMeter:
    """Snapshots before and after a run (the run a child process that has been waited for)."""

    def __init__(self, server_pid=None):
        self.server_pid = server_pid

    def _snapshot(self):
        times = os.times()
        server = 0
        if self.server_pid:
            try:
                server = process_ticks(_read('/proc/%d/stat' % self.server_pid))
            except OSError:
                server = 0
        return (machine_busy_ticks(_read('/proc/stat')), times.children_user + times.children_system, server)

    def start(self):
        return self._snapshot()

    def since(self, start):
        machine, children, server = self._snapshot()
        return split((machine - start[0]) / CLOCK_TICKS, children - start[1], (server - start[2]) / CLOCK_TICKS)


def lab_server_pid(lab_dir):
    """The pid of a lab's cluster server (its pids.json), or None."""
    try:
        return int(json.loads(_read(os.path.join(lab_dir, 'pids.json')))['cluster']['pid'])
    except (OSError, ValueError, KeyError, TypeError):
        return None
