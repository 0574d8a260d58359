#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.sharing contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_operator_images
short_description: List the images a GPU Operator chart version will pull, for mirroring
version_added: 0.3.0
description:
  - Before anything is installed, lists every image (C(registry/path/name:tag)) that the chosen chart
    version pulls with the given values, plus O(extra_images) (the verification pods' image), so that
    an air-gapped user can copy exactly these to a mirror registry.
  - Which values hold images is read from the chart itself (C(helm show values), C(helm show chart)) and from
    each subchart it carries (node-feature-discovery's own values; a repository chart is pulled to a temporary
    directory for that), that is every mapping with C(repository) and C(image) (C(version), empty meaning the
    chart's C(appVersion)) and every C(image) mapping with C(repository) and C(tag) (empty meaning the
    subchart's C(appVersion)).
  - Lists exactly what will be pulled with the values, as GPU Operator v26.7.0 decides it
    (docs/reference/specs.md §17.7) - node-feature-discovery when C(nfd.enabled); not the components the
    values leave off or the operator does not deploy (the sandbox and kubevirt device plugins, vGPU and
    VFIO managers, CC manager without C(sandboxWorkloads.enabled); the DRA driver without C(gpuCluster.deployCR);
    the driver manager, nvidia-fs and gdrdrv without the driver).
  - The driver, nvidia-fs (GDS), gdrdrv and vGPU manager images are listed once per node OS with the
    C(-<os>) tag suffix the operator appends (C(595.91.07-ubuntu22.04), C(rhel9)), from O(node_os) or
    O(node_facts); an OS the operator does not know, or a driver-type image without any OS, is an error.
  - Needs no cluster and no network for a local chart or one already in helm's cache; it changes nothing.
  - With O(registry), each entry also names the image in the mirror (the same rewrite as
    M(gpufleet.sharing.gpu_operator) O(registry)).
author:
  - gpufleet maintainers (@gpufleet)
attributes:
  check_mode:
    support: full
    description: Runs the same in check mode; it only reads the chart.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    platforms: posix
    support: full
    description: Runs where helm is installed, usually the controller.
options:
  chart_ref:
    description: The chart (repository chart, C(oci://) reference or local path), as for M(gpufleet.sharing.gpu_operator).
    type: str
    default: nvidia/gpu-operator
  chart_version:
    description:
      - Chart version (C(vMAJOR.MINOR.PATCH)); required for a repository or C(oci://) chart.
      - A value that does not parse (C(26.7), C(latest)) is refused before helm runs, since helm would read it as a
        version range and pick a chart.
    type: str
  values:
    description: Chart values that will be installed (an image or C(enabled) set here counts).
    type: dict
    default: {}
  driver_enabled:
    description: Value C(driver.enabled), as given to M(gpufleet.sharing.gpu_operator).
    type: bool
  toolkit_enabled:
    description: Value C(toolkit.enabled).
    type: bool
  mig_manager_enabled:
    description: Value C(migManager.enabled).
    type: bool
  node_os:
    description:
      - The OS tags of the GPU nodes, as the operator makes them from NFD's labels (C(<ID><VERSION_ID>),
        major version only for rhel, rocky and ol), such as V(ubuntu22.04), V(ubuntu24.04), V(rhel9), V(rhcos4.16).
      - For a list made before any host is reachable; when given, O(node_facts) is not used.
    type: list
    elements: str
    default: []
  node_facts:
    description:
      - The GPU hosts' facts, each C(host), C(distribution) (C(ansible_distribution) or the os-release C(ID))
        and C(version) (C(ansible_distribution_version)); their OS tags are used when O(node_os) is empty.
    type: list
    elements: dict
    default: []
  registry:
    description: Mirror registry (V(host[:port][/path]), no scheme, no trailing slash); adds C(mirror) to each entry.
    type: str
  extra_images:
    description: Further images to list, such as the verification pods' image.
    type: list
    elements: str
    default: []
  helm_binary:
    description: The helm executable.
    type: str
    default: helm
"""

EXAMPLES = r"""
- name: Images of the pinned chart, for the mirror
  gpufleet.sharing.gpu_operator_images:
    chart_version: v26.7.0
    driver_enabled: true
    node_os: [ubuntu22.04, ubuntu24.04]
    registry: registry.example.com:5000/gpu
    extra_images: [nvcr.io/nvidia/cuda:12.6.3-base-ubuntu24.04]
  register: images
  delegate_to: localhost
"""

RETURN = r"""
images:
  description: Each image, the values path that names it (C((collection)) for O(extra_images)) and its mirror name.
  returned: always
  type: list
  elements: dict
  sample: [{image: nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless, value: dcgmExporter,
            mirror: registry.example.com:5000/gpu/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless}]
text:
  description: The images, one per line (sorted).
  returned: always
  type: str
chart:
  description: Name, version and appVersion of the chart read.
  returned: always
  type: dict
"""

from typing import Any, Dict

from ansible.module_utils.common.process import get_bin_path

from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._gpu_operator import ValuesError, build_values
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._helm import Helm, HelmCommand, HelmError, find_helm
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._image_plan import OsError, fleet_os_tags
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._images import (
    ImageError, chart_images, full_chart_values, mirror_image, registry_problems)
from ansible_collections.gpufleet.sharing.plugins.module_utils.base._module import GpuFleetModule
from ansible_collections.gpufleet.sharing.plugins.module_utils.operator._operator_release import chart_version_problems

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = dict(
    chart_ref=dict(type="str", default="nvidia/gpu-operator"),
    chart_version=dict(type="str"),
    values=dict(type="dict", default={}),
    driver_enabled=dict(type="bool"),
    toolkit_enabled=dict(type="bool"),
    mig_manager_enabled=dict(type="bool"),
    node_os=dict(type="list", elements="str", default=[]),
    node_facts=dict(type="list", elements="dict", default=[]),
    registry=dict(type="str"),
    extra_images=dict(type="list", elements="str", default=[]),
    helm_binary=dict(type="str", default="helm"),
)


class ImagesModule(GpuFleetModule):
    expected_errors = (HelmError, ImageError, OsError, ValuesError)


def main() -> None:
    ImagesModule(ARGUMENT_SPEC).run(run)


def run(mod: GpuFleetModule) -> None:
    p = mod.params
    problems = chart_version_problems(p["chart_version"]) + registry_problems(p["registry"])
    if problems:
        mod.fail("; ".join(problems), problems=problems)
    os_tags = fleet_os_tags(p["node_os"], p["node_facts"])
    values = build_values(p["values"], mig_manager_enabled=p["mig_manager_enabled"],
                          driver_enabled=p["driver_enabled"], toolkit_enabled=p["toolkit_enabled"])
    helm = Helm(HelmCommand(find_helm(p["helm_binary"], get_bin_path)),
                lambda argv, data: mod.ansible.run_command(argv, data=data, binary_data=False))
    meta = helm.chart_metadata(p["chart_ref"], p["chart_version"])
    chart_values = full_chart_values(helm.values_text(p["chart_ref"], p["chart_version"]),
                                     helm.subcharts(p["chart_ref"], p["chart_version"]))
    images = chart_images(chart_values, values, str(meta.get("appVersion") or meta["version"]), p["extra_images"], os_tags)
    if p["registry"]:
        for entry in images:
            entry["mirror"] = mirror_image(entry["image"], p["registry"])
    mod.result.update(images=images, text="".join(entry["image"] + "\n" for entry in images),
                      chart={key: meta.get(key) for key in ("name", "version", "appVersion")})


if __name__ == "__main__":
    main()
