# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse nvidia-smi output and assemble per-GPU facts. Pure functions, no I/O.

Every parser works on tokens, not column positions: table widths change between drivers
(docs/reference/specs.md §4.3 shows 79- and 81-character `-lgip` tables) and older drivers omit columns
(`-lci` without Placement, `-L` with legacy MIG UUIDs). Which commands to run, and how few,
is decided by `commands_for()` so that the module and its tests agree on the count.
"""

from __future__ import annotations

import csv
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple

# The --query-gpu fields the facts need, in the order the parser expects them.
QUERY_FIELDS = ('index', 'name', 'uuid', 'pci.bus_id', 'pci.device_id', 'memory.total',
                'mig.mode.current', 'mig.mode.pending', 'driver_version')
QUERY_ARGV = ('--query-gpu=' + ','.join(QUERY_FIELDS), '--format=csv,noheader,nounits')

# Messages nvidia-smi prints instead of a table (docs/reference/specs.md §4.3-4.4, 5).
NO_MIG_ENABLED = 'No MIG-enabled devices found'
NO_MIG_SUPPORTED = 'No MIG-supported devices found'
NO_GPU_INSTANCES = 'No GPU instances found'
NO_COMPUTE_INSTANCES = 'No compute instances found'
NO_DEVICES = 'No devices were found'
NOT_AVAILABLE = ('[N/A]', 'N/A', '[Not Supported]', 'Not Supported', '')
# "nothing to list" answers: not errors, whatever the exit code (docs/reference/specs.md §4.3, 5).
EMPTY_ANSWERS = (NO_MIG_ENABLED, NO_MIG_SUPPORTED, NO_GPU_INSTANCES, NO_COMPUTE_INSTANCES)

# `nvidia-smi -i N` + these: the MIG mode of one GPU (read after a mode change).
MODE_QUERY_ARGV = ('--query-gpu=index,mig.mode.current,mig.mode.pending', '--format=csv,noheader')

Row = Dict[str, Any]  # one parsed record (a GPU, an instance, a process ...)
Summary = Dict[str, List[Row]]  # parse_summary(): 'mig_devices' and 'processes'
Placements = Dict[int, Dict[int, Tuple[Tuple[int, ...], int]]]  # gpu -> GI profile id -> (starts, size)


class ParseError(ValueError):
    """nvidia-smi printed something this parser does not understand."""


def _cells(line: str) -> List[str]:
    """Split a table row into its '|'-separated cells, stripped."""
    return [c.strip() for c in line.strip().strip('|').split('|')]


def _table_rows(text: str) -> List[List[str]]:
    """Whitespace tokens of every table body row (lines starting with '|'), headers included."""
    rows = []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped.startswith('|') or set(stripped) <= set('|=+-'):
            continue
        rows.append(stripped.strip('|').replace('|', ' ').split())
    return rows


def _to_int(text: str) -> Optional[int]:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _mode(text: str) -> Optional[bool]:
    value = text.strip()
    if value in NOT_AVAILABLE:
        return None
    if value.lower() == 'enabled':
        return True
    if value.lower() == 'disabled':
        return False
    raise ParseError('unexpected MIG mode value %r' % text)


def _mib(text: str) -> Optional[int]:
    match = re.match(r'^\s*(\d+)(\s*MiB)?\s*$', text)
    return int(match.group(1)) if match else None


def parse_query_gpus(text: str) -> List[Row]:
    """Rows of `nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv[,noheader][,nounits]`."""
    rows = []
    for record in csv.reader(text.splitlines(), skipinitialspace=True):
        if not record or not ''.join(record).strip():
            continue
        if record[0].strip() == 'index':  # a header line (format without noheader)
            continue
        if len(record) != len(QUERY_FIELDS):
            raise ParseError('expected %d comma-separated fields, got %d in %r' % (
                len(QUERY_FIELDS), len(record), ','.join(record)))
        values = dict(zip(QUERY_FIELDS, (v.strip() for v in record)))
        index = _to_int(values['index'])
        if index is None:
            raise ParseError('GPU index is not a number in %r' % ','.join(record))
        current = _mode(values['mig.mode.current'])
        pending = _mode(values['mig.mode.pending'])
        rows.append({
            'index': index,
            'name': values['name'],
            'uuid': values['uuid'],
            'pci_bus_id': values['pci.bus_id'],
            'pci_device_id': values['pci.device_id'].upper().replace('0X', '0x'),
            'memory_total_mib': _mib(values['memory.total']),
            'driver_version': values['driver_version'],
            'mig_current': current,
            'mig_pending': pending,
        })
    return rows


_GPU_LINE = re.compile(r'^GPU\s+(\d+):\s+(.*?)\s+\(UUID:\s*(\S+?)\)\s*$')
_MIG_LINE = re.compile(r'^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*(\S+?)\)\s*$')


def parse_list_gpus(text: str) -> List[Row]:
    """`nvidia-smi -L`: GPUs with their MIG devices (R470+ and legacy R450 MIG UUIDs)."""
    gpus: List[Row] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        gpu = _GPU_LINE.match(line)
        if gpu:
            gpus.append({'index': int(gpu.group(1)), 'name': gpu.group(2), 'uuid': gpu.group(3),
                         'mig_devices': []})
            continue
        mig = _MIG_LINE.match(line)
        if mig and gpus:
            gpus[-1]['mig_devices'].append({'profile': mig.group(1), 'device': int(mig.group(2)),
                                            'uuid': mig.group(3)})
            continue
        if NO_DEVICES in line:
            return []
        raise ParseError('unexpected line in nvidia-smi -L output: %r' % line)
    return gpus


def parse_gpu_instance_profiles(text: str) -> Dict[int, List[Row]]:
    """`nvidia-smi mig -lgip`: profiles per GPU index, in the order printed.

    Each profile is printed on two rows: `GPU MIG <name> ID free/total GiB P2P SM DEC ENC`
    then `CE JPEG OFA`.
    """
    result: Dict[int, List[Row]] = {}
    last: Optional[Row] = None
    for tokens in _table_rows(text):
        if len(tokens) >= 5 and tokens[1] == 'MIG' and _to_int(tokens[0]) is not None:
            free_total = tokens[4].split('/')
            last = {
                'name': tokens[2],
                'gi_profile_id': _to_int(tokens[3]),
                'instances_free': _to_int(free_total[0]),
                'instances_total': _to_int(free_total[-1]),
                'memory_gib': float(tokens[5]) if len(tokens) > 5 else None,
                'multiprocessors': _to_int(tokens[7]) if len(tokens) > 7 else None,
            }
            result.setdefault(int(tokens[0]), []).append(last)
        elif last is not None and len(tokens) == 3 and all(_to_int(t) is not None for t in tokens):
            last['copy_engines'] = int(tokens[0])
            last = None
    return result


_PLACEMENT_LINE = re.compile(
    r'^GPU\s+(\d+)\s+Profile\s+ID\s+(\d+)\s+Placements?\s*:\s*\{([\d,\s]*)\}\s*:\s*(\d+)\s*$')


def parse_gpu_instance_placements(text: str) -> Placements:
    """`nvidia-smi mig -lgipp`: {gpu: {profile id: (starts, size)}}."""
    result: Placements = {}
    for line in text.splitlines():
        match = _PLACEMENT_LINE.match(line.strip())
        if not match:
            continue
        starts = tuple(int(s) for s in match.group(3).split(',') if s.strip())
        result.setdefault(int(match.group(1)), {})[int(match.group(2))] = (starts, int(match.group(4)))
    return result


def _start_size(token: str) -> Optional[Tuple[int, int]]:
    match = re.match(r'^(\d+):(\d+)$', token)
    return (int(match.group(1)), int(match.group(2))) if match else None


def parse_gpu_instances(text: str) -> List[Row]:
    """`nvidia-smi mig -lgi` rows: gpu, profile, profile id, GI id, placement."""
    instances = []
    for tokens in _table_rows(text):
        if len(tokens) >= 6 and tokens[1] == 'MIG' and _to_int(tokens[0]) is not None:
            placement = _start_size(tokens[5])
            instances.append({
                'gpu': int(tokens[0]),
                'profile': tokens[2],
                'gi_profile_id': _to_int(tokens[3]),
                'gi_id': _to_int(tokens[4]),
                'start': placement[0] if placement else None,
                'size': placement[1] if placement else None,
            })
    return instances


def parse_compute_instances(text: str) -> List[Row]:
    """`nvidia-smi mig -lci` rows (with or without the newer Placement column)."""
    instances = []
    for tokens in _table_rows(text):
        if len(tokens) >= 6 and tokens[2] == 'MIG' and _to_int(tokens[0]) is not None:
            placement = _start_size(tokens[6]) if len(tokens) > 6 else None
            instances.append({
                'gpu': int(tokens[0]),
                'gi_id': _to_int(tokens[1]),
                'profile': tokens[3],
                'ci_profile_id': _to_int(tokens[4]),
                'ci_id': _to_int(tokens[5]),
                'start': placement[0] if placement else None,
                'size': placement[1] if placement else None,
            })
    return instances


def _section(text: str, title: str) -> str:
    """The lines of a plain `nvidia-smi` table section, from its title to the next blank line."""
    lines = text.splitlines()
    for position, line in enumerate(lines):
        if line.strip().strip('|').strip().startswith(title):
            section = []
            for following in lines[position + 1:]:
                if not following.strip():
                    break
                section.append(following)
            return '\n'.join(section)
    return ''


def parse_summary(text: str) -> Summary:
    """Plain `nvidia-smi`: the MIG devices table (GPU, GI, CI, device) and the processes table."""
    mig_devices = []
    for line in _section(text, 'MIG devices:').splitlines():
        cells = _cells(line)
        tokens = cells[0].split() if cells else []
        if len(tokens) == 4 and all(_to_int(t) is not None for t in tokens):
            gpu, gi_id, ci_id, device = (int(t) for t in tokens)
            mig_devices.append({'gpu': gpu, 'gi_id': gi_id, 'ci_id': ci_id, 'device': device})
    processes = []
    for line in _section(text, 'Processes:').splitlines():
        if not line.strip().startswith('|') or set(line.strip()) <= set('|=+-'):
            continue
        tokens = line.strip().strip('|').split()
        # GPU GI CI PID Type name... memory; GI/CI are 'N/A' on a GPU without MIG.
        if len(tokens) < 7 or _to_int(tokens[0]) is None or _to_int(tokens[3]) is None:
            continue
        processes.append({
            'gpu': int(tokens[0]),
            'gi_id': _to_int(tokens[1]),
            'ci_id': _to_int(tokens[2]),
            'pid': int(tokens[3]),
            'type': tokens[4],
            'name': ' '.join(tokens[5:-1]),
            'used_memory_mib': _mib(tokens[-1].replace('MiB', ' MiB')),
        })
    return {'mig_devices': mig_devices, 'processes': processes}


def commands_for(query_rows: List[Row], gather_profiles: bool = True) -> List[Tuple[str, ...]]:
    """The nvidia-smi calls needed after `--query-gpu` and the plain summary, given the GPUs found.

    Profiles (`-lgip`/`-lgipp`) only when a GPU is MIG-capable (and `gather_profiles`); instances
    and MIG UUIDs (`-lgi`/`-lci`/`-L`) only when MIG is currently enabled somewhere.
    """
    calls: List[Tuple[str, ...]] = []
    if any(row['mig_current'] for row in query_rows):
        calls.extend([('-L',), ('mig', '-lgi'), ('mig', '-lci')])
    if gather_profiles and any(row['mig_current'] is not None for row in query_rows):
        calls.extend([('mig', '-lgip'), ('mig', '-lgipp')])
    return calls


def needs_summary(query_rows: List[Row], gather_processes: bool = True) -> bool:
    """The plain `nvidia-smi` table: for the compute processes, and always when MIG is enabled on a
    GPU (its MIG device numbers name the instances)."""
    return gather_processes or any(row['mig_current'] for row in query_rows)


def empty_answer(out: str, err: str) -> bool:
    """nvidia-smi printed a "nothing to list" answer (docs/reference/specs.md §4.3, 5): not an error, whatever the exit code."""
    return any(message in out + err for message in EMPTY_ANSWERS)


def no_gpu_reason(rc: int, out: str, err: str) -> Optional[str]:
    """Why a failed or empty `--query-gpu` means "no GPU here" rather than an error (None: an error)."""
    text = (err or out).strip()
    if NO_DEVICES in text or (rc == 0 and not out.strip()):
        return 'nvidia-smi found no GPU: %s' % (text or 'empty output')
    return None


def parse_mode_query(text: str) -> Tuple[bool, bool]:
    """`nvidia-smi -i N` + MODE_QUERY_ARGV: (current, pending) MIG mode of that GPU."""
    fields = [f.strip() for f in text.strip().splitlines()[0].split(',')]
    return fields[1] == 'Enabled', fields[2] == 'Enabled'


def facts_from_outputs(query_rows: List[Row], summary: Optional[Summary], outputs: Mapping[Tuple[str, ...], str]) -> List[Row]:
    """build_gpu_facts from the raw output of the calls commands_for() asked for (``summary`` None: the
    plain table was not read, see ``needs_summary``)."""
    return build_gpu_facts(
        query_rows, summary,
        list_gpus=parse_list_gpus(outputs[('-L',)]) if ('-L',) in outputs else None,
        gpu_instances=parse_gpu_instances(outputs.get(('mig', '-lgi'), '')),
        compute_instances=parse_compute_instances(outputs.get(('mig', '-lci'), '')),
        profiles=parse_gpu_instance_profiles(outputs.get(('mig', '-lgip'), '')),
        placements=parse_gpu_instance_placements(outputs.get(('mig', '-lgipp'), '')),
    )


def build_gpu_facts(query_rows: List[Row], summary: Optional[Summary], list_gpus: Optional[List[Row]] = None,
                    gpu_instances: Optional[List[Row]] = None, compute_instances: Optional[List[Row]] = None,
                    profiles: Optional[Dict[int, List[Row]]] = None,
                    placements: Optional[Placements] = None) -> List[Row]:
    """Join the parsed outputs into the `gpufleet_gpus` facts, one dict per GPU.

    Arguments are the results of parse_query_gpus, parse_summary, parse_list_gpus,
    parse_gpu_instances, parse_compute_instances, parse_gpu_instance_profiles and
    parse_gpu_instance_placements; the optional ones are None when not run (see commands_for).
    Without the summary (not read: ``needs_summary``), ``processes`` is None (not gathered).
    """
    ids = _MigDeviceIds(summary, list_gpus)
    facts = []
    for row in sorted(query_rows, key=lambda r: r['index']):
        index = row['index']
        instances = _instances(index, gpu_instances or [], compute_instances or [], ids) if row['mig_current'] else []
        facts.append({
            'index': index,
            'name': row['name'],
            'uuid': row['uuid'],
            'pci_bus_id': row['pci_bus_id'],
            'pci_device_id': row['pci_device_id'],
            'memory_total_mib': row['memory_total_mib'],
            'driver_version': row['driver_version'],
            'mig': {
                'capable': row['mig_current'] is not None,
                'current': bool(row['mig_current']),
                'pending': bool(row['mig_pending']),
                'change_pending': row['mig_current'] is not None and row['mig_current'] != row['mig_pending'],
                'instances': instances,
            },
            'supported_profiles': _supported_profiles(index, profiles or {}, placements or {}),
            'processes': _processes(index, summary['processes'], ids) if summary is not None else None,
        })
    return facts


class _MigDeviceIds:
    """MIG device index and UUID of a (gpu, GI, CI), from the summary table and `-L`."""

    def __init__(self, summary: Optional[Summary], list_gpus: Optional[List[Row]]) -> None:
        self.uuids: Dict[Tuple[int, Optional[int]], str] = {}  # (gpu, device index) -> uuid
        for gpu in list_gpus or []:
            for device in gpu['mig_devices']:
                self.uuids[(gpu['index'], device['device'])] = device['uuid']
        self.devices = dict(((d['gpu'], d['gi_id'], d['ci_id']), d['device']) for d in (summary or {}).get('mig_devices', []))

    def device(self, gpu: int, gi_id: Optional[int], ci_id: Optional[int]) -> Optional[int]:
        return self.devices.get((gpu, gi_id, ci_id))

    def uuid(self, gpu: int, device: Optional[int]) -> Optional[str]:
        return self.uuids.get((gpu, device))


def _instances(index: int, gpu_instances: List[Row], compute_instances: List[Row], ids: _MigDeviceIds) -> List[Row]:
    instances = []
    for gi in sorted((g for g in gpu_instances if g['gpu'] == index), key=lambda g: g['gi_id']):
        cis = []
        for ci in sorted((c for c in compute_instances if c['gpu'] == index and c['gi_id'] == gi['gi_id']),
                         key=lambda c: c['ci_id']):
            device = ids.device(index, gi['gi_id'], ci['ci_id'])
            cis.append({'ci_id': ci['ci_id'], 'profile': ci['profile'],
                        'ci_profile_id': ci['ci_profile_id'],
                        'device': device, 'uuid': ids.uuid(index, device)})
        instances.append({
            'profile': gi['profile'],
            'gi_profile_id': gi['gi_profile_id'],
            'gi_id': gi['gi_id'],
            'placement': {'start': gi['start'], 'size': gi['size']},
            'compute_instances': cis,
            # The MIG device UUID (of the GI's first CI: one CI per GI is the usual case).
            'uuid': cis[0]['uuid'] if cis else None,
        })
    return instances


def _supported_profiles(index: int, profiles: Dict[int, List[Row]], placements: Placements) -> List[Row]:
    supported = []
    gpu_placements = placements.get(index, {})
    for profile in profiles.get(index, []):
        starts, size = gpu_placements.get(profile['gi_profile_id'], ((), None))
        entry = dict(profile)
        entry['placements'] = [{'start': s, 'size': size} for s in starts]
        supported.append(entry)
    return supported


def _processes(index: int, processes: List[Row], ids: _MigDeviceIds) -> List[Row]:
    result = []
    for process in processes:
        if process['gpu'] != index:
            continue
        entry = dict(process)
        entry['mig_device_uuid'] = None
        if process['gi_id'] is not None:
            entry['mig_device_uuid'] = ids.uuid(index, ids.device(index, process['gi_id'], process['ci_id']))
        result.append(entry)
    return result


def layout_of(gpu_fact: Row) -> Dict[str, int]:
    """Profile -> count of a GPU's current instances (the form layouts are written in)."""
    counts: Dict[str, int] = {}
    for instance in gpu_fact['mig']['instances']:
        counts[instance['profile']] = counts.get(instance['profile'], 0) + 1
    return counts
