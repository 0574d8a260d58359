"""Run a collection module the way Ansible does (args file in argv) and return its JSON result."""
import json
import os
import subprocess
import sys

import callback_diff

UNIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(os.path.dirname(os.path.dirname(UNIT)), '.build')


def run_module(name, args, tmp_path, check_mode=False, env=None, diff=False):
    payload = dict(args)
    payload['_ansible_check_mode'] = check_mode
    payload['_ansible_diff'] = diff
    args_file = tmp_path / ('%s-args.json' % name)
    args_file.write_text(json.dumps({'ANSIBLE_MODULE_ARGS': payload}))
    environ = dict(os.environ, PYTHONPATH=BUILD)
    environ.update(env or {})
    proc = subprocess.run(
        [sys.executable, '-m', 'ansible_collections.gpufleet.sharing.plugins.modules.%s' % name, str(args_file)],
        capture_output=True, text=True, env=environ, timeout=120, check=False)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        raise AssertionError('module %s printed no JSON (rc=%d): %s %s' % (name, proc.returncode, proc.stdout, proc.stderr))
    if 'diff' in result:
        callback_diff.render(result['diff'])  # every diff must print (issue 43 #7)
    return result
