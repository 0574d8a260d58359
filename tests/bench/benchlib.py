"""What the benchmarks share: a failed ansible run said as its cause (task, host, message).

A benchmark whose run fails reports which task failed on which host and the module's own message
(``msg``, and ``diagnosis`` when the module gives one, as gpu_operator does on a readiness
timeout), instead of the last few thousand characters of the output. Pure text in, text out
(tests/unit/test_bench_failures.py).
"""
import json
import re

_TASK = re.compile(r'^TASK \[(?P<task>.*)\] \**\s*$')
_FAILED = re.compile(r'^(?:fatal|failed): \[(?P<host>[^\]]+)\](?:: (?:FAILED|UNREACHABLE)!| \(item=.*\)) => (?P<body>\{.*)$')
_RECAP = re.compile(r'^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)', re.M)
_COLOR = re.compile(r'\x1b\[[0-9;]*m')  # ansible-runner's stdout keeps the callback's colours
MESSAGE_LIMIT = 600


def _body(text):
    """The result dict printed after ``=>`` (one line with the default callback), or its raw text."""
    try:
        body = json.loads(text)
    except ValueError:
        return {'msg': text.strip()}
    return body if isinstance(body, dict) else {'msg': str(body)}


def _shorten(text, limit=MESSAGE_LIMIT):
    text = ' '.join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + '...'


def failures(output):
    """Every failed task of an ansible-playbook output: [{'task', 'host', 'message', 'diagnosis'}], in order."""
    found, task = [], None
    for line in _COLOR.sub('', output).splitlines():
        match = _TASK.match(line)
        if match:
            task = match.group('task')
            continue
        if line.strip() == '...ignoring' and found:  # ignore_errors: the failure just printed is no cause
            found.pop()
            continue
        match = _FAILED.match(line)
        if not match:
            continue
        body = _body(match.group('body'))
        message = body.get('msg') or body.get('stderr') or body.get('module_stderr') or 'no message'
        entry = {'task': task or '?', 'host': match.group('host'), 'message': _shorten(message)}
        if body.get('diagnosis'):
            entry['diagnosis'] = _shorten(json.dumps(body['diagnosis'], sort_keys=True))
        found.append(entry)
    return found


def recap(output):
    """PLAY RECAP per host: {'host': {'changed', 'unreachable', 'failed'}}."""
    return dict((m.group(1), {'changed': int(m.group(3)), 'unreachable': int(m.group(4)), 'failed': int(m.group(5))})
                for m in _RECAP.finditer(output))


def failure_report(what, output, stderr='', returncode=None):
    """One short paragraph: what failed, then each failed task as 'task [host]: message' (and its diagnosis)."""
    found = failures(output)
    lines = ['%s failed%s' % (what, '' if returncode is None else ' (rc=%s)' % returncode)]
    for entry in found:
        lines.append('  task "%s" on %s: %s' % (entry['task'], entry['host'], entry['message']))
        if entry.get('diagnosis'):
            lines.append('    diagnosis: %s' % entry['diagnosis'])
    if not found:
        unreachable = [host for host, counts in recap(output).items() if counts['unreachable']]
        if unreachable:
            lines.append('  unreachable: %s' % ', '.join(sorted(unreachable)))
        else:  # no task failed: an error before the play (syntax, inventory), said on stderr or at the end
            tail = (stderr or output).strip().splitlines()[-5:]
            lines.extend('  ' + _shorten(line, 300) for line in tail)
    return '\n'.join(lines)


class RunFailed(RuntimeError):
    """A benchmark's ansible run failed; its message is failure_report()'s."""

    def __init__(self, what, proc):
        super().__init__(failure_report(what, proc.stdout or '', proc.stderr or '', proc.returncode))
