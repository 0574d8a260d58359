"""HTTP server of the lab's virtual Kubernetes cluster (a test instrument, not the product).

    from gpulab.cluster import server
    pid, url = server.start(lab_dir, hosts)      # subprocess; returns once it answers
    server.stop(lab_dir)                         # SIGTERM to the PID recorded in cluster.json
    server.metrics(lab_dir, reset=False)         # request counts per "<verb> <resource>"
    lab = server.serve_in_thread(lab_dir, hosts) # in-process (tests): lab.url, lab.store, lab.stop()

    python -m gpulab.cluster.server --dir DIR [--port N] [--hosts-file FILE] [--no-controllers]

``hosts`` is a list of ``{"name", "state_file", "labels"?, "address"?}``; each becomes a Node of
that name. Files written in DIR: ``kubeconfig`` (server URL + bearer-token user; mode 0600),
``cluster.json`` (``{"pid", "url", "port", "token", "kubeconfig", "ca_file"}``),
``cluster.log``, ``pki/`` (a private CA and the serving certificate). Listens on 127.0.0.1 only,
over HTTPS (kubectl and helm send bearer tokens only over TLS).
"""

from __future__ import annotations

import argparse
import base64
import datetime
import http.server
import ipaddress
import json
import logging
import os
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from gpulab.cluster import faults as _faults
from gpulab.cluster import kueue as _kueue
from gpulab.cluster import manager
from gpulab.cluster.dra import api as _dra_api
from gpulab.cluster.api import Api, Request
from gpulab.cluster.errors import ApiError
from gpulab.cluster.registration import NODE_STATE_ANNOTATION, add_nodes, node_object
from gpulab.cluster.store import Store

LOG = logging.getLogger("gpulab.cluster.server")


# ------------------------------------------------------------------------ HTTP

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY on every connection, as kube-apiserver has it (Go's net package turns Nagle's
    # algorithm off on every TCP connection: src/net/tcpsock.go, newTCPConn). With Nagle on, the body
    # of each response waited for the client's delayed ACK of its headers: ~40 ms per request.
    disable_nagle_algorithm = True
    server_version = "gpulab-apiserver"
    api: Api  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        LOG.debug("%s - %s", self.address_string(), format % args)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        started = time.monotonic()
        body = self._read_body()
        request = Request.from_target(self.command, self.path, dict(self.headers.items()), body)
        response = self.api.handle(request)
        if response.drop_connection:
            self.close_connection = True
            LOG.info("%s %s -> dropped (fault)", self.command, self.path)
            return
        self.send_response(response.code)
        self.send_header("Content-Type", response.content_type)
        self.send_header("Cache-Control", "no-cache, private")
        for name, value in response.headers.items():
            self.send_header(name, value)
        if response.stream is not None:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            self.wfile.flush()
            try:
                for chunk in response.stream:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:  # the client went away (ssl.SSLError is an OSError too)
                self.close_connection = True
            finally:
                close = getattr(response.stream, "close", None)
                if close:
                    close()
        else:
            self.send_header("Content-Length", str(len(response.body)))
            self.end_headers()
            self.wfile.write(response.body)
        LOG.info("%s %s -> %d (%.1f ms)", self.command, self.path, response.code,
                 (time.monotonic() - started) * 1000)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve  # noqa: N815


class _HTTPServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # clients dropping connections, TLS EOFs
            LOG.debug("connection from %s ended: %s", client_address, exc)
            return
        LOG.exception("error while serving %s", client_address)


# --------------------------------------------------------------------- the lab

@dataclass
class LabContext:
    """What controllers get: see tests/lab/ARCHITECTURE.md, "Contracts"."""
    dir: str
    hosts: List[Dict[str, Any]]
    faults: _faults.FaultRegistry
    log: logging.Logger
    url: str = ""
    extra: Dict[str, Any] = field(default_factory=dict)


class LabServer:
    """A running API server (in this process)."""

    def __init__(self, lab_dir: str, hosts: List[Dict[str, Any]], port: int = 0,
                 controllers: bool = True, fault_registry: Optional[_faults.FaultRegistry] = None,
                 token: Optional[str] = None, write_files: bool = True):
        self.dir = os.path.abspath(lab_dir)
        os.makedirs(self.dir, exist_ok=True)
        self.hosts = list(hosts)
        self.store = Store()
        add_nodes(self.store, self.hosts)
        _kueue.install(self.store)  # Kueue's CRDs, as in a cluster where Kueue is installed
        self.kubernetes_version = _dra_api.kubernetes_version()  # GPULAB_KUBERNETES_VERSION
        _dra_api.install(self.store, self.kubernetes_version)  # resource.k8s.io/v1 from 1.34 on
        self.faults = fault_registry if fault_registry is not None else _faults.REGISTRY
        self.token = token or secrets.token_hex(16)
        self.stopping = threading.Event()
        self.api = Api(self.store, self.faults, self.token, self.stopping)
        self.api.version = _dra_api.version_document(self.kubernetes_version, self.api.version)
        handler = type("Handler", (_Handler,), {"api": self.api})
        self.httpd = _HTTPServer(("127.0.0.1", port), handler)
        self.ca_file, cert_file, key_file = ensure_pki(os.path.join(self.dir, "pki"))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        context.set_alpn_protocols(["http/1.1"])
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True, do_handshake_on_connect=False)
        self.port = self.httpd.server_address[1]
        self.url = "https://127.0.0.1:%d" % self.port
        self.controllers: List[Any] = []
        self._threads: List[threading.Thread] = []
        self.kubeconfig = os.path.join(self.dir, "kubeconfig")
        if write_files:
            write_kubeconfig(self.kubeconfig, self.url, self.token, self.ca_file)
        if controllers:
            self._start_controllers()

    def _start_controllers(self) -> None:
        """The controller manager (manager.py): its static list of controllers, in order."""
        context = LabContext(self.dir, self.hosts, self.faults,
                             logging.getLogger("gpulab.cluster.controllers"), self.url)
        self.controllers.append(manager.start(self.store, context))
        LOG.info("controllers started: %s", ", ".join(name for name, _step in self.controllers[-1].steps))

    def serve_in_background(self) -> "LabServer":
        for target in (self.httpd.serve_forever, self._reaper):
            thread = threading.Thread(target=target, daemon=True,
                                      name="gpulab-%s" % target.__name__)
            thread.start()
            self._threads.append(thread)
        return self

    def _reaper(self) -> None:
        while not self.stopping.wait(1.0):
            try:
                self.store.reap()
            except ApiError:
                LOG.exception("reaping terminating pods failed")

    def stop(self) -> None:
        self.stopping.set()
        for handle in reversed(self.controllers):
            stop = getattr(handle, "stop", None)
            if stop:
                try:
                    stop()
                except Exception:  # keep shutting down the rest
                    LOG.exception("stopping controller %r failed", handle)
        self.httpd.shutdown()
        self.httpd.server_close()


def serve_in_thread(lab_dir: str, hosts: List[Dict[str, Any]], port: int = 0,
                    controllers: bool = False,
                    fault_registry: Optional[_faults.FaultRegistry] = None) -> LabServer:
    """Start a server in this process (for tests). Controllers are off unless asked for.
    DIR/cluster.json is written too (so faults.add_remote/server.metrics work); its pid is this
    process, which server.stop() never signals (it only stops `gpulab.cluster.server` processes)."""
    lab = LabServer(lab_dir, hosts, port, controllers, fault_registry).serve_in_background()
    _write_json(os.path.join(lab.dir, "cluster.json"),
                {"pid": os.getpid(), "url": lab.url, "port": lab.port, "token": lab.token,
                 "kubeconfig": lab.kubeconfig, "ca_file": lab.ca_file, "in_process": True})
    return lab


def ensure_pki(pki_dir: str) -> Tuple[str, str, str]:
    """A private CA and a serving certificate for 127.0.0.1/localhost (kept per lab dir).
    Returns (ca_cert_path, server_cert_path, server_key_path). Clients such as kubectl and helm
    only send bearer tokens over TLS, hence TLS even on loopback."""
    ca_path, cert_path, key_path = (os.path.join(pki_dir, n) for n in
                                    ("ca.crt", "server.crt", "server.key"))
    if all(os.path.exists(p) for p in (ca_path, cert_path, key_path)):
        return ca_path, cert_path, key_path
    os.makedirs(pki_dir, mode=0o700, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    not_before, not_after = now - datetime.timedelta(hours=1), now + datetime.timedelta(days=365)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpulab-ca")])
    ca_cert = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
               .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(not_before).not_valid_after(not_after)
               .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                            crl_sign=True, content_commitment=False,
                                            key_encipherment=False, data_encipherment=False,
                                            key_agreement=False, encipher_only=False,
                                            decipher_only=False), critical=True)
               .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before).not_valid_after(not_after)
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    for path, data in (
            (ca_path, ca_cert.public_bytes(pem)), (cert_path, cert.public_bytes(pem)),
            (key_path, key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()))):
        fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(path + ".tmp", path)
    return ca_path, cert_path, key_path


def write_kubeconfig(path: str, url: str, token: str, ca_file: str,
                     user: str = "gpulab-admin") -> None:
    with open(ca_file, "rb") as handle:
        ca_data = base64.b64encode(handle.read()).decode()
    text = (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        "- name: gpulab\n"
        "  cluster:\n"
        "    certificate-authority-data: %s\n"
        "    server: %s\n"
        "contexts:\n"
        "- name: gpulab\n"
        "  context:\n"
        "    cluster: gpulab\n"
        "    user: %s\n"
        "    namespace: default\n"
        "current-context: gpulab\n"
        "preferences: {}\n"
        "users:\n"
        "- name: %s\n"
        "  user:\n"
        "    token: %s\n" % (ca_data, url, user, user, token))
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def _write_json(path: str, data: Dict[str, Any]) -> None:
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2)
    os.replace(temporary, path)


# ------------------------------------------------------------- subprocess API

def _lab_pythonpath() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(lab_dir: str, hosts: List[Dict[str, Any]], port: int = 0, timeout: float = 10.0,
          controllers: bool = True, python: Optional[str] = None) -> Tuple[int, str]:
    """Start the API server as a background process; returns (pid, url) once /version answers.
    Raises RuntimeError (with the log tail) when it does not come up within `timeout`."""
    lab_dir = os.path.abspath(lab_dir)
    os.makedirs(lab_dir, exist_ok=True)
    hosts_file = os.path.join(lab_dir, "cluster-hosts.json")
    _write_json(hosts_file, {"hosts": hosts})
    info_path = os.path.join(lab_dir, "cluster.json")
    if os.path.exists(info_path):
        os.unlink(info_path)
    argv = [python or sys.executable, "-m", "gpulab.cluster.server", "--dir", lab_dir,
            "--port", str(port), "--hosts-file", hosts_file]
    if not controllers:
        argv.append("--no-controllers")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_lab_pythonpath(), env.get("PYTHONPATH"))
                                        if p)
    log_path = os.path.join(lab_dir, "cluster.log")
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   env=env, start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError("the lab API server exited with %s; see %s:\n%s"
                               % (process.returncode, log_path, _tail(log_path)))
        try:
            with open(info_path, encoding="utf-8") as handle:
                info = json.load(handle)
            context = ssl.create_default_context(cafile=info["ca_file"])
            with urllib.request.urlopen(info["url"] + "/version", timeout=2, context=context):
                return process.pid, info["url"]
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    process.terminate()
    raise RuntimeError("the lab API server did not answer within %.0f s; see %s:\n%s"
                       % (timeout, log_path, _tail(log_path)))


def _tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""


def _is_our_server(pid: int) -> bool:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return b"gpulab.cluster.server" in handle.read()
    except OSError:
        return False


def stop(lab_dir: str, timeout: float = 10.0) -> bool:
    """Stop the server started by start() for lab_dir (by its recorded PID). True if stopped."""
    info_path = os.path.join(os.path.abspath(lab_dir), "cluster.json")
    try:
        with open(info_path, encoding="utf-8") as handle:
            pid = int(json.load(handle)["pid"])
    except (OSError, ValueError, KeyError):
        return False
    if not _is_our_server(pid):
        return False  # stale file; the PID is not (or no longer) our server
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_our_server(pid):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    if _is_our_server(pid):
        os.kill(pid, signal.SIGKILL)
    return True


def metrics(lab_dir: str, reset: bool = False) -> Dict[str, Any]:
    """Request counts of the running server of lab_dir: {"total", "requests": {"<verb> <res>"}}.
    With reset=True the counters restart from zero (the returned snapshot is the zeroed one)."""
    return _faults.lab_call(lab_dir, "POST" if reset else "GET",
                            "/lab/metrics/reset" if reset else "/lab/metrics")


# ------------------------------------------------------------------------ main

def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpulab.cluster.server",
                                     description="Lab-only virtual Kubernetes API server.")
    parser.add_argument("--dir", required=True, help="lab directory (kubeconfig, logs)")
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any)")
    parser.add_argument("--hosts-file", help='JSON {"hosts": [{"name", "state_file", ...}]}')
    parser.add_argument("--no-controllers", action="store_true",
                        help="serve the API only (no operator/scheduler/kubelet)")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    lab_dir = os.path.abspath(args.dir)
    os.makedirs(lab_dir, exist_ok=True)
    logging.basicConfig(filename=os.path.join(lab_dir, "cluster.log"),
                        level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    hosts: List[Dict[str, Any]] = []
    if args.hosts_file:
        with open(args.hosts_file, encoding="utf-8") as handle:
            loaded = json.load(handle)
        hosts = loaded["hosts"] if isinstance(loaded, dict) else loaded
    lab = LabServer(lab_dir, hosts, args.port, controllers=not args.no_controllers)
    done = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        del signum, frame
        done.set()
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    lab.serve_in_background()
    _write_json(os.path.join(lab_dir, "cluster.json"),
                {"pid": os.getpid(), "url": lab.url, "port": lab.port, "token": lab.token,
                 "kubeconfig": lab.kubeconfig, "ca_file": lab.ca_file})
    LOG.info("lab API server on %s (pid %d, %d nodes)", lab.url, os.getpid(), len(hosts))
    done.wait()
    LOG.info("stopping")
    lab.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["start", "stop", "metrics", "serve_in_thread", "LabServer", "LabContext", "write_kubeconfig",
           "node_object", "add_nodes", "NODE_STATE_ANNOTATION"]
