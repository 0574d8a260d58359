"""The read-only ``nvidia-smi mig`` listings: ``-lgip``, ``-lgipp``, ``-lgi``, ``-lci``, ``-lcip``."""

from __future__ import annotations

from typing import List, Optional, Sequence

from gpulab import driver
from gpulab.gpustate import Gpu
from gpulab.models import load_model
from gpulab.smi.common import RC_NOT_FOUND, RC_OK, ci_rows, gi_rows, nothing_found, out

_LGIP_TITLES = (
    " GPU instance profiles:",
    " GPU   Name               ID    Instances   Memory     P2P    SM    DEC   ENC",
    "                                Free/Total   GiB              CE    JPEG  OFA",
)


def _table_head(width: int, titles: Sequence[str]) -> str:
    """Print a table's top border, its title lines and the ``=`` rule; returns the border."""
    border = "+" + "-" * width + "+"
    out(border)
    for title in titles:
        out("|" + title.ljust(width) + "|")
    out("|" + "=" * width + "|")
    return border


def mig_lgip(gpus: Sequence[Gpu]) -> int:
    """Layout of the real 580 capture (tests/fixtures/h200/mig_lgip.txt); Free counts from
    driver.free_instances."""
    capable = [gpu for gpu in gpus if gpu.mig_capable]
    if not capable:
        out("No MIG-supported devices found.")
        return RC_NOT_FOUND
    border = _table_head(79, _LGIP_TITLES)
    for gpu in capable:
        for profile in load_model(gpu.model).profiles:
            free = f"{driver.free_instances(gpu, profile)}/{profile.instances_total}"
            out(f"|{gpu.index:>4}  {profile.full_name:<18}{profile.profile_id:>4}     {free:<11}"
                f"{profile.memory_gib:<11}{profile.p2p:<7}{profile.sm:<7}{profile.dec:<6}{profile.enc:<4}|")
            out(f"|{'':62}{profile.ce:>2}{'':5}{profile.jpeg:<6}{profile.ofa:<4}|")
            out(border)
    return RC_OK


def mig_lgipp(gpus: Sequence[Gpu]) -> int:
    """Static possible placements (docs/reference/specs.md §1.1, §3.1 format)."""
    capable = [gpu for gpu in gpus if gpu.mig_capable]
    if not capable:
        out("No MIG-supported devices found.")
        return RC_NOT_FOUND
    for gpu in capable:
        for profile in load_model(gpu.model).profiles:
            label = "Placements:" if len(profile.starts) > 1 else "Placement :"
            starts = ",".join(str(s) for s in profile.starts)
            out(f"GPU {gpu.index:>2} Profile ID {profile.profile_id:>2} {label} {{{starts}}}:{profile.size}")
    return RC_OK


def mig_lgi(gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """Table of docs/reference/specs.md §4.4."""
    rows = gi_rows(gpus, gi_filter)
    empty = nothing_found(gpus, rows, "GPU instances")
    if empty:
        out(empty)
        return RC_OK
    border = _table_head(52, (" GPU instances:", " GPU   Name          Profile  Instance   Placement",
                              "                       ID       ID       Start:Size"))
    for gpu, gi in rows:
        out(f"|{gpu.index:>4}  {'MIG ' + gi.profile:<16}{gi.profile_id:>3}{gi.gi_id:>9}{f'{gi.start}:{gi.size}':>13}     |")
        out(border)
    return RC_OK


def mig_lci(gpus: Sequence[Gpu], gi_filter: Optional[List[int]], ci_filter: Optional[List[int]]) -> int:
    """Table of docs/reference/specs.md §4.5 (newer drivers, with the Placement column)."""
    rows = list(ci_rows(gpus, gi_filter, ci_filter))
    empty = nothing_found(gpus, rows, "compute instances")
    if empty:
        out(empty)
        return RC_OK
    border = _table_head(68, (" Compute instances:", " GPU     GPU       Name             Profile   Instance   Placement",
                              "       Instance                       ID        ID       Start:Size", "         ID"))
    for gpu, gi, ci in rows:
        spec = load_model(gpu.model)
        placement = f"{driver.ci_start(ci, gi, spec)}:{driver.ci_slices(ci, gi, spec)}"
        out(f"|{gpu.index:>4}{gi.gi_id:>7}{'':7}{'MIG ' + ci.profile:<20}{ci.profile_id:>2}{ci.ci_id:>10}{placement:>13}     |")
        out(border)
    return RC_OK


def mig_lcip(gpus: Sequence[Gpu], gi_filter: Optional[List[int]]) -> int:
    """CI profiles per GI; the default (whole-GI) profile is marked ``*`` (docs/reference/specs.md §4.5). The
    table shape is a modelling choice (no capture with MIG enabled)."""
    gis = gi_rows(gpus, gi_filter)
    empty = nothing_found(gpus, gis, "GPU instances")
    if empty:
        out(empty)
        return RC_OK
    width = 86
    border = _table_head(width, (" Compute instance profiles:",
                                 " GPU     GPU       Name             Profile  Instances   Exclusive       Shared",
                                 "       Instance                       ID     Free/Total     SM       DEC   ENC   OFA",
                                 "         ID                                                          CE    JPEG"))
    for gpu, gi in gis:
        spec = load_model(gpu.model)
        profile = spec.profile(str(gi.profile_id))
        g = profile.compute_slices if profile else 1
        used = sum(driver.ci_slices(ci, gi, spec) for ci in gi.compute_instances)
        options = driver.ci_profiles(gi, spec)
        for slices, ci_profile_id, name in options:
            total = g // slices
            free = (g - used) // slices
            star = "*" if slices == g else " "
            sm = (profile.sm * slices) // g if profile else 0
            line1 = (f"{gpu.index:>4}{gi.gi_id:>7}{'':7}{'MIG ' + name:<20}{ci_profile_id:>2}{star}"
                     f"{f'{free}/{total}':>9}{sm:>12}{profile.dec if profile else 0:>10}{profile.enc if profile else 0:>6}"
                     f"{profile.ofa if profile else 0:>6}")
            line2 = f"{'':64}{profile.ce if profile else 0:>6}{profile.jpeg if profile else 0:>6}"
            out("|" + line1.ljust(width) + "|")
            out("|" + line2.ljust(width) + "|")
            out(border)
    return RC_OK
