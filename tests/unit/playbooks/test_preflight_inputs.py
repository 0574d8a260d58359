"""Issue 21 (9, 10): preflight refuses the inputs that used to fail late in a run, and verify.yml uses the
same validator (gpufleet_verify_pods=ALWAYS was accepted there, refused by site.yml's preflight).

Every host runs with ansible_connection=local and declares its GPU model: nothing connects anywhere.
"""
import os
import subprocess
from test_preflight import ANSIBLE_PLAYBOOK

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLANTED = 's3cr3t-Planted-Pa55word-0x9f'


def run_playbook(name, inventory, *extra):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, '.build'), ANSIBLE_NOCOLOR='1')
    return subprocess.run([ANSIBLE_PLAYBOOK, '-i', inventory, os.path.join(REPO, 'playbooks', name),
                           '-e', 'ansible_connection=local'] + list(extra),
                          capture_output=True, text=True, env=env, timeout=300, check=False)


def refused_output(tmp_path, playbook, gpu_hosts, *extra):
    """Run ``playbook`` with an inventory whose gpu_hosts are ``gpu_hosts`` (YAML, indented for ``hosts:``);
    it must fail: return what it printed."""
    (tmp_path / 'hosts.yml').write_text('all:\n  children:\n    gpu_hosts:\n      hosts:\n' + gpu_hosts)
    proc = run_playbook(playbook, str(tmp_path / 'hosts.yml'), *extra)
    assert proc.returncode != 0, proc.stdout[-2000:]
    return proc.stdout + proc.stderr


INVENTORY = '''
all:
  children:
    gpu_hosts:
      hosts:
        h100-a:
          gpufleet_gpu_model: H100-80GB
          mig_config: all-balanced
          gpufleet_node_name: "h100-a;reboot"
        h100-b:
          gpufleet_gpu_model: H100-80GB
          mig_config: all-balanced
  vars:
    verify_probe_max_inflation: -1
    verify_probe_min_share: 2
    verify_probe_seconds: 1000000000
    gpufleet_rollout_lock_duration: 0
    gpufleet_registry: "mirror.example:99999"
    gpufleet_image_pull_secrets: [""]
    gpufleet_registry_credentials: {name: regcred, username: "ro:bot", password: "%s"}
    http_proxy: "http://bob:%s@proxy.example:3128\\nLD_PRELOAD=/tmp/x.so"
''' % (PLANTED, PLANTED)


def test_preflight_lists_the_inputs_that_used_to_fail_late(tmp_path):
    (tmp_path / 'hosts.yml').write_text(INVENTORY)
    proc = run_playbook('preflight.yml', str(tmp_path / 'hosts.yml'))
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    for words in ('h100-a: verify_probe_max_inflation must be', 'h100-a: verify_probe_min_share must be',
                  'h100-a: verify_probe_seconds must be', 'h100-a: gpufleet_rollout_lock_duration must be',
                  "h100-a: gpufleet_node_name 'h100-a;reboot' is not a Kubernetes node name",
                  "port '99999'", 'image_pull_secrets[0]', 'registry_credentials.username',
                  'proxy.http_proxy', 'h100-b: verify_probe_min_share must be'):
        assert words in output, words
    assert "h100-b: gpufleet_node_name" not in output
    assert PLANTED not in output


def test_verify_refuses_what_site_preflight_refuses(tmp_path):
    output = refused_output(tmp_path, 'verify.yml', '''        h100-a:
          gpufleet_gpu_model: H100-80GB
''', '-e', 'gpufleet_verify_pods=ALWAYS', '-e', 'verify_probe_min_share=nan')
    assert "gpufleet_verify_pods must be 'always', 'changed' or 'never', got 'ALWAYS'" in output
    assert 'verify_probe_min_share must be' in output
    assert "Read each host's GPUs" not in output  # refused before anything else ran


def test_preflight_refuses_items_selecting_one_gpu_with_different_layouts(tmp_path):
    """Issue 21 (11): the preflight plans with mig_plan's code, which now refuses overlapping selectors."""
    output = refused_output(tmp_path, 'preflight.yml', '''        a100-a:
          gpufleet_gpu_model: A100-40GB
          mig_config: clash
          mig_configs:
            clash:
              - {devices: all, mig-enabled: true, mig-devices: {"1g.5gb": 7}}
              - {devices: [0], mig-enabled: true, mig-devices: {"3g.20gb": 2}}
''')
    assert 'items 0 and 1 both select GPU(s) 0 of A100-40GB with different layouts' in output


def test_preflight_refuses_gpu_client_names_that_are_no_systemd_units(tmp_path):
    """mig_gpu_clients reach systemctl's argv (is-active, stop, start): an option or a path is refused first."""
    output = refused_output(tmp_path, 'preflight.yml', '''        h100-a:
          gpufleet_gpu_model: H100-80GB
          mig_gpu_clients: [kubelet, "--now", "-H", "a b", "../x", ""]
        h100-b:
          gpufleet_gpu_model: H100-80GB
          mig_gpu_clients: [kubelet, nvidia-dcgm.service, gpu-agent@0]
''')
    assert 'Preflight found 5 problem(s); nothing was changed' in output
    for index, unit in ((1, '--now'), (2, '-H'), (3, 'a b'), (4, '../x'), (5, '')):
        assert "h100-a: mig_gpu_clients[%d] '%s' is not a systemd unit name" % (index, unit) in output, unit
    assert 'h100-b: mig_gpu_clients' not in output


def test_site_refuses_the_later_plays_inputs_in_preflight_before_the_operator_play(tmp_path):
    """Issue 43 (3, 4): the DRA driver's release inputs, the claim templates, the report directory, a sharing
    config with replicas 0 and a host name that is no node name used to pass preflight; site.yml went on to the
    operator play (here: no cluster at all) and they were refused, if at all, by their own plays later."""
    report_file = tmp_path / 'not-a-dir'
    report_file.write_text('x')
    output = refused_output(tmp_path, 'site.yml', '''        h100-a:
          gpufleet_gpu_model: H100-80GB
          gpu_sharing_config: {name: ts0, strategy: time-slicing, resources: [{name: nvidia.com/gpu, replicas: 0}]}
        "h100;reboot":
          gpufleet_gpu_model: H100-80GB
''', '-e', 'gpufleet_report_dir=%s' % report_file, '-e', 'dra_driver_namespace=DRA_ns',
                            '-e', 'dra_driver_chart_version=25.12', '-e', '{"dra_driver_values": "x"}',
                            '-e', '{"gpufleet_dra_claim_templates": [{"namespaces": ["Team_A"], "count": 0}]}')
    assert 'Preflight found' in output and 'nothing was changed' in output
    for words in ("gpufleet_report_dir '%s' exists and is not a directory" % report_file,
                  "h100-a: gpu_sharing_config: sharing config 'ts0' resources[0] (nvidia.com/gpu): replicas must be >= 2, got 0",
                  "h100;reboot: inventory host name 'h100;reboot' is not a Kubernetes node name",
                  "h100-a: dra_driver_namespace: invalid Namespace name 'DRA_ns'",
                  "h100-a: dra_driver_chart_version: '25.12' is not a DRA driver version",
                  "h100-a: dra_driver_values must be a mapping of chart values, got 'x'",
                  "h100-a: gpufleet_dra_claim_templates: claim_templates[0]: namespace 'Team_A' is not a DNS label",
                  "h100-a: gpufleet_dra_claim_templates: claim_templates[0]: count must be a whole number"):
        assert words in output, words
    assert 'PLAY [Cluster - the GPU Operator]' not in output  # nothing after preflight ran
