#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Build recorded /sys and /proc trees for `p2pkit doctor` tests.

Usage: make_sysfs_fixtures.py SPEC_DIR OUT_DIR
  For every SPEC_DIR/<scenario>/machine.txt, writes OUT_DIR/<scenario>/ with
  sys/... and proc/... as Linux shows them, for P2PKIT_SYSFS_ROOT. The trees
  are generated at test time so the fixture you review is machine.txt, not
  binary config-space images.

machine.txt, one directive per line ('#' starts a comment):
  include FILE                  read another description first (relative path)
  cpu_flags FLAG...             /proc/cpuinfo flags (add 'hypervisor' for a VM)
  dmi KEY=VALUE...              /sys/devices/virtual/dmi/id/KEY (quote values with spaces)
  cmdline TEXT                  /proc/cmdline
  iommu NAME...                 /sys/class/iommu/NAME (none: no IOMMU in use)
  group N type=TYPE             /sys/kernel/iommu_groups/N/type (DMA, DMA-FQ, identity)
  cfg_bytes N                   config bytes a reader gets (4096 root, 64 non-root, 256 no ext.)
  modules NAME...               loaded kernel modules: /proc/modules and /sys/module/NAME
  nvidia_version TEXT           /proc/driver/nvidia/version (the NVIDIA kernel module's line)
  osrelease TEXT                /proc/sys/kernel/osrelease
  pci BDF parent=P key=value... a PCI device under P (pciDDDD:BB host bridge or a BDF):
      class=0x060400 vendor=0x10b5 device=0x8747
      port=root|upstream|downstream|endpoint   (PCIe device/port type)
      acs=SV,RR,CR,UF,EC         ACS capability with these control bits set
      acs=off                    ACS capability present, nothing enabled
      link=SPEED/WIDTH max=SPEED/WIDTH   e.g. link=8.0/8 max=16.0/16 (GT/s, lanes)
      numa=N group=N cfg=N
"""
import os
import shlex
import struct
import sys

PORT_TYPE = {"endpoint": 0x0, "root": 0x4, "upstream": 0x5, "downstream": 0x6}
ACS_BITS = {"SV": 1 << 0, "TB": 1 << 1, "RR": 1 << 2, "CR": 1 << 3, "UF": 1 << 4,
            "EC": 1 << 5, "DT": 1 << 6}
ACS_SUPPORTED = 0x5D  # SV, RR, CR, UF, EC (what a PCIe switch port typically offers)
AER_AT, ACS_AT = 0x100, 0x148


def config_space(dev, nbytes):
    cfg = bytearray(4096)
    cls = int(dev.get("class", "0x030200"), 16)
    struct.pack_into("<HH", cfg, 0x00, int(dev.get("vendor", "0x10de"), 16),
                     int(dev.get("device", "0x0000"), 16))
    struct.pack_into("<HH", cfg, 0x04, 0x0406, 0x0010)  # command; status: capability list
    cfg[0x08] = 0xA1
    cfg[0x09], cfg[0x0A], cfg[0x0B] = cls & 0xFF, (cls >> 8) & 0xFF, (cls >> 16) & 0xFF
    cfg[0x0E] = 0x01 if (cls >> 8) == 0x0604 else 0x00
    cfg[0x34] = 0x40
    # PCI Express capability: ID 0x10, version 2, device/port type.
    cfg[0x40], cfg[0x41] = 0x10, 0x00
    struct.pack_into("<H", cfg, 0x42, 0x2 | PORT_TYPE[dev.get("port", "endpoint")] << 4)
    # Extended capabilities: AER first, then ACS, so readers must walk the list.
    acs = dev.get("acs")
    struct.pack_into("<I", cfg, AER_AT, 0x0001 | 2 << 16 | (ACS_AT if acs else 0) << 20)
    if acs:
        ctrl = 0
        if acs != "off":
            for bit in acs.split(","):
                ctrl |= ACS_BITS[bit]
        struct.pack_into("<IHH", cfg, ACS_AT, 0x000D | 1 << 16, ACS_SUPPORTED, ctrl)
    return bytes(cfg[:nbytes])


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if isinstance(data, bytes) else "w") as f:
        f.write(data)


def speed_text(gts):
    return "%s GT/s PCIe\n" % gts


def parse(spec_path, m):
    with open(spec_path) as f:
        for raw in f:
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            word, _, rest = line.partition(" ")
            if word == "include":
                parse(os.path.join(os.path.dirname(spec_path), rest.strip()), m)
            elif word == "cpu_flags":
                m["cpu_flags"] = rest.split()
            elif word == "dmi":
                for kv in shlex.split(rest):
                    k, v = kv.split("=", 1)
                    m["dmi"][k] = v
            elif word == "cmdline":
                m["cmdline"] = rest.strip()
            elif word == "iommu":
                m["iommu"] = rest.split()
            elif word == "group":
                num, kv = rest.split(None, 1)
                m["groups"][int(num)] = kv.split("=", 1)[1]
            elif word == "modules":
                m["modules"] = rest.split()
            elif word in ("nvidia_version", "osrelease"):
                m[word] = rest.strip()
            elif word == "cfg_bytes":
                m["cfg_bytes"] = int(rest)
            elif word == "pci":
                bdf, *kvs = rest.split()
                dev = dict(kv.split("=", 1) for kv in kvs)
                m["pci"][bdf] = dev
                m["order"].append(bdf)
            else:
                sys.exit("%s: unknown directive '%s'" % (spec_path, word))


def device_path(m, bdf):
    """sys/devices/pci0000:00/0000:00:01.0/.../BDF, from the parent chain."""
    parts = [bdf]
    p = m["pci"][bdf]["parent"]
    while not p.startswith("pci"):
        parts.append(p)
        p = m["pci"][p]["parent"]
    parts.append(p)
    return os.path.join("sys", "devices", *reversed(parts))


def build(spec_path, out):
    m = {"cpu_flags": None, "dmi": {}, "cmdline": None, "iommu": [], "groups": {},
         "cfg_bytes": 4096, "pci": {}, "order": [], "modules": None, "nvidia_version": None,
         "osrelease": None}
    parse(spec_path, m)
    if m["cpu_flags"] is not None:
        text = ""
        for cpu in range(2):
            text += ("processor\t: %d\nvendor_id\t: GenuineIntel\nmodel name\t: recorded CPU\n"
                     "flags\t\t: %s\n\n" % (cpu, " ".join(m["cpu_flags"])))
        write(os.path.join(out, "proc", "cpuinfo"), text)
    if m["cmdline"] is not None:
        write(os.path.join(out, "proc", "cmdline"), m["cmdline"] + "\n")
    if m["modules"] is not None:
        write(os.path.join(out, "proc", "modules"),
              "".join("%s 16384 0 - Live 0x0000000000000000\n" % n for n in m["modules"]))
        for n in m["modules"]:
            os.makedirs(os.path.join(out, "sys", "module", n), exist_ok=True)
    if m["nvidia_version"] is not None:
        write(os.path.join(out, "proc", "driver", "nvidia", "version"), m["nvidia_version"] + "\n")
    if m["osrelease"] is not None:
        write(os.path.join(out, "proc", "sys", "kernel", "osrelease"), m["osrelease"] + "\n")
    for k, v in m["dmi"].items():
        write(os.path.join(out, "sys", "devices", "virtual", "dmi", "id", k), v + "\n")
    os.makedirs(os.path.join(out, "sys", "class"), exist_ok=True)
    for name in m["iommu"]:
        os.makedirs(os.path.join(out, "sys", "class", "iommu", name), exist_ok=True)
    for num, typ in m["groups"].items():
        write(os.path.join(out, "sys", "kernel", "iommu_groups", str(num), "type"), typ + "\n")
    os.makedirs(os.path.join(out, "sys", "bus", "pci", "devices"), exist_ok=True)
    for bdf in m["order"]:
        dev = m["pci"][bdf]
        rel = device_path(m, bdf)
        d = os.path.join(out, rel)
        os.makedirs(d, exist_ok=True)
        write(os.path.join(d, "vendor"), dev.get("vendor", "0x10de") + "\n")
        write(os.path.join(d, "device"), dev.get("device", "0x0000") + "\n")
        write(os.path.join(d, "class"), "0x%06x\n" % int(dev.get("class", "0x030200"), 16))
        write(os.path.join(d, "numa_node"), dev.get("numa", "-1") + "\n")
        write(os.path.join(d, "config"),
              config_space(dev, int(dev.get("cfg", m["cfg_bytes"]))))
        for key, prefix in (("link", "current"), ("max", "max")):
            if key in dev:
                speed, width = dev[key].split("/")
                write(os.path.join(d, prefix + "_link_speed"), speed_text(speed))
                write(os.path.join(d, prefix + "_link_width"), width + "\n")
        if "group" in dev:
            target = os.path.join(out, "sys", "kernel", "iommu_groups", dev["group"])
            os.makedirs(target, exist_ok=True)
            os.symlink(os.path.relpath(target, d), os.path.join(d, "iommu_group"))
        link = os.path.join(out, "sys", "bus", "pci", "devices", bdf)
        os.symlink(os.path.relpath(d, os.path.dirname(link)), link)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    spec_dir, out_dir = sys.argv[1], sys.argv[2]
    for name in sorted(os.listdir(spec_dir)):
        spec = os.path.join(spec_dir, name, "machine.txt")
        if os.path.isfile(spec):
            build(spec, os.path.join(out_dir, name))


if __name__ == "__main__":
    main()
