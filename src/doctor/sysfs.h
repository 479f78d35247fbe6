/* SPDX-License-Identifier: BSD-3-Clause */
/* What the doctor reads from /sys and /proc, always under one root
 * (P2PKIT_SYSFS_ROOT, like hwloc's HWLOC_FSROOT) so tests point it at
 * recorded trees. Every function takes the root ("" or NULL: the real one). */
#ifndef P2PK_DOCTOR_SYSFS_H
#define P2PK_DOCTOR_SYSFS_H

#include <stddef.h>

#define P2PK_SYSFS_MAX_CHAIN 16
#define P2PK_SYSFS_MAX_GPUS 64

/* root + path ("/sys/..."), into buf. */
void p2pk_sysfs_path(const char *root, const char *path, char *buf, size_t len);
/* A text file's first line, trailing blanks removed. 0 ok, -1 missing. */
int p2pk_sysfs_read_line(const char *root, const char *path, char *buf, size_t len);
/* Up to `cap` bytes of a file. Bytes read, or -1 when it cannot be opened. */
long p2pk_sysfs_read_bytes(const char *root, const char *path, unsigned char *buf, size_t cap);

/* --- PCI ------------------------------------------------------------------ */

/* The bridges above a PCI device, from the host bridge down, read from the
 * sysfs link /sys/bus/pci/devices/BDF -> ../../../devices/pci0000:00/
 * 0000:00:01.0/0000:01:00.0/BDF. chain[] gets the bridges' bus ids (not the
 * device). Returns their count, or -1 when the device is not in sysfs. */
int p2pk_sysfs_pci_chain(const char *root, const char *busid,
                         char chain[][20], int max);
/* "8.0 GT/s PCIe" / "8 GT/s" -> 3 (PCIe generation); 0 when unknown. */
int p2pk_pcie_gen_from_speed(const char *text);

typedef struct {
  int gen, width;         /* current link; 0 unknown */
  int max_gen, max_width; /* device capability; 0 unknown */
  int numa;               /* numa_node; -1 unknown */
} p2pk_sysfs_link;

/* The link files of /sys/bus/pci/devices/BDF. 0 ok, -1 device not in sysfs. */
int p2pk_sysfs_pci_link(const char *root, const char *busid, p2pk_sysfs_link *out);

/* NVIDIA GPUs in sysfs (vendor 0x10de, class 0x0300xx or 0x0302xx), sorted by
 * bus id: what the doctor looks at when there is no driver. Count, or -1 when
 * /sys/bus/pci/devices cannot be read. */
int p2pk_sysfs_nvidia_gpus(const char *root, char busids[][20], int max);

/* --- ACS (PCIe Access Control Services) ------------------------------------ */

enum {
  P2PK_ACS_SV = 1 << 0, /* Source Validation */
  P2PK_ACS_TB = 1 << 1, /* Translation Blocking */
  P2PK_ACS_RR = 1 << 2, /* P2P Request Redirect */
  P2PK_ACS_CR = 1 << 3, /* P2P Completion Redirect */
  P2PK_ACS_UF = 1 << 4, /* Upstream Forwarding */
  P2PK_ACS_EC = 1 << 5, /* P2P Egress Control */
  P2PK_ACS_DT = 1 << 6, /* Direct Translated P2P */
  /* Bits that send peer-to-peer traffic up to the root complex. */
  P2PK_ACS_REDIRECTS = P2PK_ACS_RR | P2PK_ACS_CR | P2PK_ACS_EC
};

typedef enum {
  P2PK_ACS_ABSENT = 0,  /* readable, no ACS capability: nothing redirects */
  P2PK_ACS_PRESENT = 1, /* ctrl holds the control register */
  P2PK_ACS_NO_EXT = 2,  /* only 256 bytes of config space: no extended capabilities */
  P2PK_ACS_NO_ROOT = 3, /* fewer than 256 bytes readable: Linux gives non-root 64 */
  P2PK_ACS_UNREADABLE = 4 /* no config file */
} p2pk_acs_state;

typedef struct {
  p2pk_acs_state state;
  unsigned cap, ctrl; /* ACS capability and control registers */
  int port_type;      /* PCIe device/port type (4 root port, 5 switch upstream,
                         6 switch downstream, ...), -1 unknown */
} p2pk_acs;

/* Parse a config-space image of `n` bytes (pure). */
void p2pk_acs_parse(const unsigned char *cfg, size_t n, p2pk_acs *out);
/* Read /sys/bus/pci/devices/BDF/config and parse it. */
void p2pk_sysfs_acs(const char *root, const char *busid, p2pk_acs *out);
/* "SV,RR,CR,UF" for the bits set; "none" when none. */
void p2pk_acs_bits_str(unsigned bits, char *buf, size_t len);
/* "root port", "switch downstream port", ... ("bridge" when unknown). */
const char *p2pk_pcie_port_name(int port_type);

/* --- host: VM, IOMMU ------------------------------------------------------- */

typedef struct {
  int vm;                  /* 1 evidence of a hypervisor, 0 none found */
  char vm_name[64];        /* "QEMU", "Amazon EC2", ... ; "" when unnamed */
  char vm_evidence[128];   /* what said so */
  int cpuinfo_read;        /* /proc/cpuinfo was readable */
  int iommu_units;         /* entries in /sys/class/iommu; -1 unreadable */
  char iommu_names[96];    /* "dmar0, dmar1" */
  char cmdline_iommu[160]; /* IOMMU-related kernel parameters, "" none */
  int cmdline_read;
} p2pk_host_facts;

void p2pk_sysfs_host(const char *root, p2pk_host_facts *h);
/* The IOMMU domain type of a device's group ("DMA", "DMA-FQ", "identity",
 * "unmanaged", "blocked"); 0 ok, -1 when the device has no group. */
int p2pk_sysfs_iommu_type(const char *root, const char *busid, char *buf, size_t len);
/* The group number of a device, -1 none. */
int p2pk_sysfs_iommu_group(const char *root, const char *busid);
/* 1 when the type translates DMA addresses ("DMA", "DMA-FQ"). */
int p2pk_iommu_type_translated(const char *type);

/* --- GPUDirect RDMA: can a NIC reach GPU memory? ---------------------------- */

typedef struct {
  int modules_read;       /* /proc/modules was readable */
  char peermem[24];       /* "nvidia_peermem" or "nv_peer_mem" when loaded, else "" */
  int open_module;        /* NVIDIA's open kernel module 1, proprietary 0, -1 unknown */
  char nvidia_version[24]; /* from /proc/driver/nvidia/version, "" unknown */
  int kernel_major, kernel_minor; /* /proc/sys/kernel/osrelease, 0 unknown */
} p2pk_gdr_facts;

/* Reads /proc/modules and /sys/module (the peer-memory module),
 * /proc/driver/nvidia/version and /proc/sys/kernel/osrelease. */
void p2pk_sysfs_gdr(const char *root, p2pk_gdr_facts *out);
/* dma-buf lets a NIC map GPU memory without a peer-memory module: NVIDIA's
 * open kernel module on Linux 5.12 or later. */
int p2pk_gdr_dmabuf(const p2pk_gdr_facts *g);

#endif
