"""The benchmarks say where a run's CPU went: the machine, the run, the lab server, the rest (issue 26)."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'bench'))

import benchcpu  # noqa: E402

PROC_STAT = '\n'.join([
    'cpu  1000 20 300 9000 50 7 3 1 0 0',
    'cpu0 500 10 150 4500 25 4 2 1 0 0',
    'cpu1 500 10 150 4500 25 3 1 0 0 0',
    'intr 12345',
])


def test_machine_busy_ticks_counts_all_but_idle_and_iowait():
    assert benchcpu.machine_busy_ticks(PROC_STAT) == 1000 + 20 + 300 + 7 + 3 + 1


def test_machine_busy_ticks_of_an_old_kernel_without_steal():
    assert benchcpu.machine_busy_ticks('cpu  10 0 5 100 0 1 1\n') == 17


def test_machine_busy_ticks_without_the_aggregate_line_is_an_error():
    with pytest.raises(ValueError):
        benchcpu.machine_busy_ticks('cpu0 1 2 3 4\n')


def test_process_ticks_reads_utime_and_stime_after_the_command_name():
    # A command name with a space and a parenthesis: fields are counted after its closing one.
    line = '4242 (python3 (lab)) S 1 4242 4242 0 -1 4194560 100 0 0 0 321 123 0 0 20 0 3 0 5 0 0'
    assert benchcpu.process_ticks(line) == 321 + 123


def test_process_ticks_of_a_short_line_is_an_error():
    with pytest.raises(ValueError):
        benchcpu.process_ticks('12 (x) S 1 2')


def test_split_gives_the_rest_as_the_machine_less_the_run_and_the_server():
    assert benchcpu.split(30.0, 10.0, 4.0) == {'machine': 30.0, 'controller': 10.0, 'lab_server': 4.0,
                                               'hosts_and_rest': 16.0}
    assert benchcpu.split(1.0, 1.5, 0.0)['hosts_and_rest'] == 0.0  # never negative (tick rounding)


def test_the_meter_counts_a_child_that_burns_cpu_in_the_run_and_the_machine(tmp_path):
    meter = benchcpu.CpuMeter(server_pid=os.getpid())
    before = meter.start()
    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(3000000))'], check=True)
    spent = meter.since(before)
    assert spent['controller'] > 0.05
    assert spent['machine'] >= spent['controller'] * 0.5  # both clocks tick at their own granularity


def test_lab_server_pid_from_the_labs_pids_file(tmp_path):
    (tmp_path / 'pids.json').write_text('{"cluster": {"pid": 31337}, "hosts": {}}')
    assert benchcpu.lab_server_pid(str(tmp_path)) == 31337
    assert benchcpu.lab_server_pid(str(tmp_path / 'missing')) is None
