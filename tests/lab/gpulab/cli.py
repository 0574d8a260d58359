"""Command line of the GPU lab: ``PYTHONPATH=tests/lab python -m gpulab up|down|status --dir DIR``.

    up     --dir DIR --host NAME=MODEL:GPUS[@group[,group]] ... [--cluster] [--port N]
           [--first-address 127.0.0.2] [--timeout SECONDS]
    down   --dir DIR        stop exactly what `up` started there (recorded PIDs); idempotent
    status --dir DIR [--json]
    kubeconfig --dir DIR --service-account NS/NAME --out PATH [--apply RBAC.yml ...]
           a kubeconfig whose token gets only what RBAC binds to that ServiceAccount
    kueue-admit --kubeconfig K --pod POD.json [--exclude-resource-prefix P ...] [--quota-check-strategy S]
           would the lab's Kueue admit the pod, and where (gpulab/cluster/kueue_pod.py); rc 0: admitted

The lab is a test instrument, not the product (see tests/lab/README.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from gpulab import hosts
from gpulab.cluster import access, kueue_pod


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gpulab", description="GPU lab: simulated GPU hosts over SSH")
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start lab hosts (one sshd each) and write DIR/inventory.yml")
    up.add_argument("--dir", required=True, help="lab directory (created; everything the lab writes goes here)")
    up.add_argument("--host", action="append", required=True, metavar="NAME=MODEL:GPUS[@group[,group]]",
                    help="a simulated host, e.g. gpu-a=H100-80GB:8@h100_training (repeat for more hosts)")
    up.add_argument("--cluster", action="store_true", help="also start the virtual Kubernetes API server")
    up.add_argument("--port", type=int, help="SSH port of every host (default: a free port)")
    up.add_argument("--first-address", default="127.0.0.2", help="address of the first host (loopback only)")
    up.add_argument("--timeout", type=float, help="seconds to wait for all hosts to answer SSH")
    down = commands.add_parser("down", help="stop everything `up` started in DIR")
    down.add_argument("--dir", required=True)
    status = commands.add_parser("status", help="list the lab's hosts and whether they answer SSH")
    status.add_argument("--dir", required=True)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    kubeconfig = commands.add_parser("kubeconfig", help="write a kubeconfig for a ServiceAccount (RBAC-restricted)")
    kubeconfig.add_argument("--dir", required=True)
    kubeconfig.add_argument("--service-account", required=True, metavar="NS/NAME")
    kubeconfig.add_argument("--out", required=True, help="path of the kubeconfig to write (mode 0600)")
    kubeconfig.add_argument("--apply", action="append", default=[], metavar="FILE",
                            help="YAML file of RBAC objects to create first (repeatable)")
    admit = commands.add_parser("kueue-admit", help="would the lab's Kueue admit this pod (JSON), and where")
    admit.add_argument("--kubeconfig", required=True)
    admit.add_argument("--pod", required=True, help="the pod as JSON (label kueue.x-k8s.io/queue-name, namespace)")
    admit.add_argument("--exclude-resource-prefix", action="append", default=[],
                       help="Kueue's resources.excludeResourcePrefixes (repeatable)")
    admit.add_argument("--quota-check-strategy", default="BlockUndeclared", choices=["BlockUndeclared", "IgnoreUndeclared"],
                       help="Kueue's resources.quotaCheckStrategy")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "up":
            specs = [hosts.parse_host_spec(text) for text in args.host]
            lab = hosts.up(args.dir, specs, port=args.port, first_address=args.first_address,
                           timeout=args.timeout, cluster=args.cluster)
            for host in lab["hosts"]:
                print(f"{host['name']}: {host['model']} x{host['gpus']} ssh root@{host['address']} -p {host['port']}")
            print(f"inventory: {lab['inventory']}")
            if lab.get("cluster"):
                print(f"kubeconfig: {lab['cluster']['kubeconfig']} ({lab['cluster']['url']})")
            return 0
        if args.command == "kubeconfig":
            return access.main(["--dir", args.dir, "--service-account", args.service_account,
                                "--kubeconfig", args.out] + [a for f in args.apply for a in ("--apply", f)])
        if args.command == "kueue-admit":
            return kueue_pod.main(args.kubeconfig, args.pod, args.quota_check_strategy, args.exclude_resource_prefix)
        if args.command == "down":
            stopped = hosts.down(args.dir)
            print(f"stopped: {', '.join(stopped)}" if stopped else "nothing running")
            return 0
        report = hosts.status(args.dir)
        cluster = hosts.cluster_status(args.dir)
        tools = hosts.tools_status(args.dir)
        if args.json:
            print(json.dumps({"hosts": report, "cluster": cluster, "tools": tools}, indent=1))
        elif not report:
            print(f"no lab in {args.dir}")
        for host in [] if args.json else report:
            state = "answers" if host["answers"] else ("running, not answering" if host["running"] else "stopped")
            state += " (mounts locked)" if host["locked"] else ""
            print(f"{host['name']}: {host['address']}:{host['port']} {host['model']} x{host['gpus']} {state}")
        if cluster and not args.json:
            print(f"cluster: {cluster['url']} {'running' if cluster['running'] else 'stopped'} "
                  f"(kubeconfig {cluster['kubeconfig']})")
        if tools and not args.json:
            print(f"tool server: PID {tools['pid']} {'running' if tools['running'] else 'stopped'}")
        healthy = bool(report) and all(h["answers"] for h in report) and (cluster is None or cluster["running"]) \
            and (tools is None or tools["running"])
        return 0 if healthy else 1
    except hosts.LabError as exc:
        print(f"gpulab {args.command}: {exc}", file=sys.stderr)
        return 2
