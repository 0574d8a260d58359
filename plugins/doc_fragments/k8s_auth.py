# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Connection options shared by every module that talks to the Kubernetes API (see _k8s.py)."""

from __future__ import annotations


class ModuleDocFragment:

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - Path to a kubeconfig file.
      - When neither O(kubeconfig), O(context) nor O(host) is given, the in-cluster service account
        is used inside a pod, otherwise the default kubeconfig (E(KUBECONFIG) or C(~/.kube/config)).
      - Can also be set with E(K8S_AUTH_KUBECONFIG).
    type: path
  context:
    description:
      - Context of the kubeconfig to use instead of its current context.
      - Can also be set with E(K8S_AUTH_CONTEXT).
    type: str
  host:
    description:
      - URL of the API server, overriding the one from the kubeconfig.
      - Can also be set with E(K8S_AUTH_HOST).
    type: str
  api_key:
    description:
      - Bearer token for the API server. Never logged.
      - Can also be set with E(K8S_AUTH_API_KEY).
    type: str
  validate_certs:
    description:
      - Verify the API server's TLS certificate. Defaults to what the kubeconfig says.
      - Can also be set with E(K8S_AUTH_VERIFY_SSL).
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description:
      - CA bundle used to verify the API server.
      - Can also be set with E(K8S_AUTH_SSL_CA_CERT).
    type: path
    aliases: [ssl_ca_cert]
  client_cert:
    description:
      - Client certificate for mutual TLS.
      - Can also be set with E(K8S_AUTH_CERT_FILE).
    type: path
    aliases: [cert_file]
  client_key:
    description:
      - Key of O(client_cert).
      - Can also be set with E(K8S_AUTH_KEY_FILE).
    type: path
    aliases: [key_file]
  request_timeout:
    description:
      - Timeout in seconds of one API request. Failed requests (HTTP 5xx, 429, timeouts, connection
        errors) are retried a bounded number of times with exponential backoff.
    type: float
    default: 30
requirements:
  - kubernetes (the Python client) on the host that runs the module
"""
