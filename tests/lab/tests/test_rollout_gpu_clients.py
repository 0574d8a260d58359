"""playbooks/rollout.yml on a node where a third-party GPU client runs (issue 25, part 6).

The operator v26.7.0 labels every GPU node ``nvidia.com/gpu.deploy.client=true``
(controllers/state_manager.go, gpu-operator #2607) so that node agents which hold the GPUs
(monitoring agents, health checkers) select it, and the MIG manager of mig-parted v0.15.0 pauses
that label when the node carries it and waits until every DaemonSet pod whose nodeSelector uses
the key is gone (pkg/mig/reconfigure/reconfigure.go, mig-parted #426). A host MIG change by the
collection must do the same: else the agent keeps the GPU open and the mode change stays pending.
"""

from __future__ import annotations

import json

import pytest

from gpulab import gpustate, hosts
from test_mig_failures import _flat
from test_operand_gpu_clients import AGENT_NS, CLIENT, agent_daemonset
from test_rollout_live_operator import start_live_lab

pytestmark = pytest.mark.lab_hosts

NODE = "cl-h100"


def _agent_pods(lab) -> list:
    pods = json.loads(lab.kubectl("get", "pods", "-n", AGENT_NS, "--field-selector", "spec.nodeName=%s" % NODE,
                                  "-o", "json"))["items"]
    return [p["metadata"]["name"] for p in pods if (p.get("status") or {}).get("phase") == "Running"
            and not p["metadata"].get("deletionTimestamp")]


def _agent_attached(lab) -> bool:
    return any(c.startswith(AGENT_NS + "/") for c in gpustate.load(lab.state_files[NODE]).gpu_client_pods)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    lab_dir = str(tmp_path_factory.mktemp("clientlab"))
    lab = start_live_lab(lab_dir, [NODE + "=H100-80GB:1"],
                         lambda lab, n: "nvidia-device-plugin-daemonset" in lab.running_operands(n)
                         and lab.deploy_labels(n).get(CLIENT) == "true")
    try:
        lab.kubectl("create", "namespace", AGENT_NS)
        lab.kubectl("apply", "-f", "-", stdin=json.dumps(agent_daemonset()))
        lab.wait("the agent holding the GPU", lambda: _agent_pods(lab) and _agent_attached(lab))
        yield lab
    finally:
        hosts.down(lab_dir)


def test_a_host_mig_change_pauses_third_party_gpu_clients_and_restores_their_label(live, tmp_path):
    result = live.rollout(tmp_path, NODE, "all-1g.10gb")
    output = _flat(result.stdout + result.stderr)
    assert result.returncode == 0, output[-4000:]
    state = gpustate.load(live.state_files[NODE])
    assert state.gpus[0].mig_current and len(state.gpus[0].gpu_instances) == 7, output[-4000:]
    assert state.reboots == 0
    assert live.deploy_labels(NODE)[CLIENT] == "true"  # its previous value
    assert "gpufleet.sharing/paused-operands" not in (live.node(NODE)["metadata"].get("annotations") or {})
    agent = live.wait("the agent back on the node", lambda: _agent_attached(live) and _agent_pods(live))
    (tmp_path / "again").mkdir()
    again = live.rollout(tmp_path / "again", NODE, "all-1g.10gb")
    assert again.returncode == 0, _flat(again.stdout + again.stderr)[-4000:]
    assert _agent_pods(live) == agent  # converged: the second run bounces nothing
    assert live.deploy_labels(NODE)[CLIENT] == "true"
