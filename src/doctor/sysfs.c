/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading /sys and /proc under one root (P2PKIT_SYSFS_ROOT). */
#include "doctor/sysfs.h"

#include <ctype.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PATH_LEN 1024

void p2pk_sysfs_path(const char *root, const char *path, char *buf, size_t len) {
  if (!root) root = "";
  size_t r = strlen(root);
  while (r > 0 && root[r - 1] == '/') r--; /* "/tmp/x/" + "/sys" */
  snprintf(buf, len, "%.*s%s", (int)r, root, path);
}

static void rstrip(char *s) {
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
}

int p2pk_sysfs_read_line(const char *root, const char *path, char *buf, size_t len) {
  char full[PATH_LEN];
  p2pk_sysfs_path(root, path, full, sizeof full);
  FILE *f = fopen(full, "r");
  if (!f) return -1;
  if (!fgets(buf, (int)len, f)) buf[0] = '\0';
  fclose(f);
  rstrip(buf);
  return 0;
}

long p2pk_sysfs_read_bytes(const char *root, const char *path, unsigned char *buf, size_t cap) {
  char full[PATH_LEN];
  p2pk_sysfs_path(root, path, full, sizeof full);
  FILE *f = fopen(full, "rb");
  if (!f) return -1;
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return (long)n;
}

/* --- PCI ------------------------------------------------------------------ */

/* Strict "dddd:bb:dd.f" (as sysfs names devices); lower-cased into out. */
static int is_bdf(const char *s, size_t n, char out[20]) {
  unsigned dom, bus, dev, fn;
  int used = 0;
  char tmp[32];
  if (n == 0 || n >= sizeof tmp) return 0;
  memcpy(tmp, s, n);
  tmp[n] = '\0';
  if (!isxdigit((unsigned char)tmp[0])) return 0;
  if (sscanf(tmp, "%x:%x:%x.%x%n", &dom, &bus, &dev, &fn, &used) != 4 || (size_t)used != n)
    return 0;
  if (bus > 0xff || dev > 0x1f || fn > 7) return 0;
  snprintf(out, 20, "%04x:%02x:%02x.%x", dom, bus, dev, fn);
  return 1;
}

int p2pk_sysfs_pci_chain(const char *root, const char *busid, char chain[][20], int max) {
  char rel[128], full[PATH_LEN], target[PATH_LEN], self[20] = "";
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s", busid);
  p2pk_sysfs_path(root, rel, full, sizeof full);
  ssize_t n = readlink(full, target, sizeof target - 1);
  if (n < 0) return -1;
  target[n] = '\0';
  is_bdf(busid, strlen(busid), self);
  int count = 0;
  for (const char *p = target; *p;) {
    size_t len = strcspn(p, "/");
    char bdf[20];
    if (is_bdf(p, len, bdf) && strcmp(bdf, self) != 0 && count < max) {
      snprintf(chain[count], 20, "%s", bdf);
      count++;
    }
    p += len;
    if (*p == '/') p++;
  }
  return count;
}

int p2pk_pcie_gen_from_speed(const char *text) {
  /* GT/s per lane of each generation. */
  static const double rate[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  char *end = NULL;
  double v = strtod(text, &end);
  if (end == text) return 0;
  for (int g = 0; g < (int)(sizeof rate / sizeof rate[0]); g++)
    if (v > rate[g] - 0.05 && v < rate[g] + 0.05) return g + 1;
  return 0;
}

static int read_int(const char *root, const char *dir, const char *file, int *out) {
  char rel[256], buf[64];
  snprintf(rel, sizeof rel, "%s/%s", dir, file);
  if (p2pk_sysfs_read_line(root, rel, buf, sizeof buf) != 0) return -1;
  char *end = NULL;
  long v = strtol(buf, &end, 0);
  if (end == buf) return -1;
  *out = (int)v;
  return 0;
}

int p2pk_sysfs_pci_link(const char *root, const char *busid, p2pk_sysfs_link *out) {
  char dir[128], rel[256], buf[64], full[PATH_LEN];
  memset(out, 0, sizeof *out);
  out->numa = -1;
  snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s", busid);
  p2pk_sysfs_path(root, dir, full, sizeof full);
  if (access(full, F_OK) != 0) return -1;
  snprintf(rel, sizeof rel, "%s/current_link_speed", dir);
  if (p2pk_sysfs_read_line(root, rel, buf, sizeof buf) == 0) out->gen = p2pk_pcie_gen_from_speed(buf);
  snprintf(rel, sizeof rel, "%s/max_link_speed", dir);
  if (p2pk_sysfs_read_line(root, rel, buf, sizeof buf) == 0)
    out->max_gen = p2pk_pcie_gen_from_speed(buf);
  int v = 0;
  /* 255 is what a link that never trained reports. */
  if (read_int(root, dir, "current_link_width", &v) == 0 && v > 0 && v <= 32) out->width = v;
  if (read_int(root, dir, "max_link_width", &v) == 0 && v > 0 && v <= 32) out->max_width = v;
  if (read_int(root, dir, "numa_node", &v) == 0 && v >= 0) out->numa = v;
  return 0;
}

static int cmp_busid(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int p2pk_sysfs_nvidia_gpus(const char *root, char busids[][20], int max) {
  char full[PATH_LEN];
  p2pk_sysfs_path(root, "/sys/bus/pci/devices", full, sizeof full);
  DIR *d = opendir(full);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && n < max) {
    char bdf[20];
    if (!is_bdf(e->d_name, strlen(e->d_name), bdf)) continue;
    char dir[128];
    int vendor = 0, cls = 0;
    snprintf(dir, sizeof dir, "/sys/bus/pci/devices/%s", e->d_name);
    if (read_int(root, dir, "vendor", &vendor) != 0 || vendor != 0x10de) continue;
    if (read_int(root, dir, "class", &cls) != 0) continue;
    /* VGA controller (0x0300) or 3D controller (0x0302); not the NVSwitch
     * bridges (0x0680) or the GPU's audio function (0x0403). */
    if ((cls >> 8) != 0x0300 && (cls >> 8) != 0x0302) continue;
    snprintf(busids[n++], 20, "%s", bdf);
  }
  closedir(d);
  qsort(busids, (size_t)n, 20, cmp_busid);
  return n;
}

/* --- ACS -------------------------------------------------------------------- */

static unsigned le16(const unsigned char *p) { return (unsigned)p[0] | (unsigned)p[1] << 8; }
static uint32_t le32(const unsigned char *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define PCI_STATUS 0x06
#define PCI_STATUS_CAP_LIST 0x10
#define PCI_CAP_PTR 0x34
#define PCI_CAP_ID_EXP 0x10
#define PCI_EXT_CAP_ID_ACS 0x000d
#define PCI_STD_SIZE 256
#define PCI_EXT_START 0x100

static int port_type(const unsigned char *cfg, size_t n) {
  if (n < 0x40 || !(cfg[PCI_STATUS] & PCI_STATUS_CAP_LIST)) return -1;
  unsigned ptr = cfg[PCI_CAP_PTR] & 0xfc;
  for (int guard = 0; ptr >= 0x40 && ptr + 4 <= n && guard < 48; guard++) {
    if (cfg[ptr] == PCI_CAP_ID_EXP) return (cfg[ptr + 2] >> 4) & 0xf;
    ptr = cfg[ptr + 1] & 0xfc;
  }
  return -1;
}

void p2pk_acs_parse(const unsigned char *cfg, size_t n, p2pk_acs *out) {
  memset(out, 0, sizeof *out);
  out->port_type = cfg ? port_type(cfg, n) : -1;
  /* Linux hands unprivileged readers the first 64 bytes only; root gets
   * 256 (conventional PCI, or no extended space exposed) or 4096. */
  if (!cfg || n == 0) {
    out->state = P2PK_ACS_UNREADABLE;
    return;
  }
  if (n < PCI_STD_SIZE) {
    out->state = P2PK_ACS_NO_ROOT;
    return;
  }
  if (n <= PCI_STD_SIZE) {
    out->state = P2PK_ACS_NO_EXT;
    return;
  }
  out->state = P2PK_ACS_ABSENT;
  size_t off = PCI_EXT_START;
  for (int guard = 0; off >= PCI_EXT_START && off + 4 <= n && guard < 64; guard++) {
    uint32_t h = le32(cfg + off);
    if (h == 0 || h == 0xffffffffu) return;
    if ((h & 0xffff) == PCI_EXT_CAP_ID_ACS) {
      if (off + 8 > n) return;
      out->state = P2PK_ACS_PRESENT;
      out->cap = le16(cfg + off + 4);
      out->ctrl = le16(cfg + off + 6);
      return;
    }
    off = (h >> 20) & 0xffc;
  }
}

void p2pk_sysfs_acs(const char *root, const char *busid, p2pk_acs *out) {
  unsigned char cfg[4096];
  char rel[128];
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/config", busid);
  long n = p2pk_sysfs_read_bytes(root, rel, cfg, sizeof cfg);
  p2pk_acs_parse(n > 0 ? cfg : NULL, n > 0 ? (size_t)n : 0, out);
}

void p2pk_acs_bits_str(unsigned bits, char *buf, size_t len) {
  static const char *names[] = {"SV", "TB", "RR", "CR", "UF", "EC", "DT"};
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; i < 7; i++) {
    if (!(bits & (1u << i))) continue;
    int w = snprintf(buf + o, len - o, "%s%s", o ? "," : "", names[i]);
    if (w < 0 || (size_t)w >= len - o) break;
    o += (size_t)w;
  }
  if (!o) snprintf(buf, len, "none");
}

const char *p2pk_pcie_port_name(int t) {
  switch (t) {
    case 4: return "root port";
    case 5: return "switch upstream port";
    case 6: return "switch downstream port";
    case 7: return "PCIe-to-PCI bridge";
    case 8: return "PCI-to-PCIe bridge";
    default: return "bridge";
  }
}

/* --- host ------------------------------------------------------------------- */

/* DMI strings of hypervisors (sys_vendor or product_name, case-insensitive). */
static const struct {
  const char *match, *name;
} vm_dmi[] = {
    {"QEMU", "QEMU"},
    {"KVM", "KVM"},
    {"Amazon EC2", "Amazon EC2"},
    {"Virtual Machine", "Microsoft Hyper-V"},
    {"VMware", "VMware"},
    {"Xen", "Xen"},
    {"VirtualBox", "VirtualBox"},
    {"innotek", "VirtualBox"},
    {"Google Compute Engine", "Google Compute Engine"},
    {"Alibaba Cloud", "Alibaba Cloud"},
    {"OpenStack", "OpenStack"},
    {"Firecracker", "Firecracker"},
    {"Cloud Hypervisor", "Cloud Hypervisor"},
    {"BHYVE", "bhyve"},
    {"Parallels", "Parallels"},
};

static int has_word(const char *line, const char *word) {
  size_t w = strlen(word);
  for (const char *p = line; (p = strstr(p, word)) != NULL; p += w) {
    int start = p == line || isspace((unsigned char)p[-1]);
    int end = p[w] == '\0' || isspace((unsigned char)p[w]);
    if (start && end) return 1;
  }
  return 0;
}

static int cpu_hypervisor_flag(const char *root, int *read_p) {
  char full[PATH_LEN], line[16384];
  p2pk_sysfs_path(root, "/proc/cpuinfo", full, sizeof full);
  FILE *f = fopen(full, "r");
  *read_p = f != NULL;
  if (!f) return 0;
  int found = 0;
  while (!found && fgets(line, sizeof line, f))
    if (strncmp(line, "flags", 5) == 0) found = has_word(line, "hypervisor");
  fclose(f);
  return found;
}

static const char *dmi_vm_name(const char *vendor, const char *product) {
  for (size_t i = 0; i < sizeof vm_dmi / sizeof vm_dmi[0]; i++) {
    size_t m = strlen(vm_dmi[i].match);
    for (const char *s = vendor; *s; s++)
      if (strncasecmp(s, vm_dmi[i].match, m) == 0) return vm_dmi[i].name;
    for (const char *s = product; *s; s++)
      if (strncasecmp(s, vm_dmi[i].match, m) == 0) return vm_dmi[i].name;
  }
  return NULL;
}

static void read_cmdline(const char *root, p2pk_host_facts *h) {
  static const char *keys[] = {"iommu=", "intel_iommu=", "amd_iommu=", "iommu.passthrough=",
                               "iommu.strict=", "pcie_acs_override=", "pci=", "vfio"};
  char full[PATH_LEN], buf[4096];
  p2pk_sysfs_path(root, "/proc/cmdline", full, sizeof full);
  FILE *f = fopen(full, "r");
  if (!f) return;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  h->cmdline_read = 1;
  size_t o = 0;
  for (char *tok = strtok(buf, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
      if (strncmp(tok, keys[k], strlen(keys[k])) == 0) {
        int w = snprintf(h->cmdline_iommu + o, sizeof h->cmdline_iommu - o, "%s%s", o ? " " : "", tok);
        if (w > 0 && (size_t)w < sizeof h->cmdline_iommu - o) o += (size_t)w;
        break;
      }
}

static void read_iommu_units(const char *root, p2pk_host_facts *h) {
  char full[PATH_LEN];
  p2pk_sysfs_path(root, "/sys/class/iommu", full, sizeof full);
  DIR *d = opendir(full);
  if (!d) {
    /* No class directory: no IOMMU driver registered; unless /sys/class is
     * itself missing, in which case we know nothing. */
    p2pk_sysfs_path(root, "/sys/class", full, sizeof full);
    h->iommu_units = access(full, F_OK) == 0 ? 0 : -1;
    return;
  }
  struct dirent *e;
  size_t o = 0;
  h->iommu_units = 0;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    h->iommu_units++;
    int w = snprintf(h->iommu_names + o, sizeof h->iommu_names - o, "%s%s", o ? ", " : "", e->d_name);
    if (w > 0 && (size_t)w < sizeof h->iommu_names - o) o += (size_t)w;
  }
  closedir(d);
}

void p2pk_sysfs_host(const char *root, p2pk_host_facts *h) {
  memset(h, 0, sizeof *h);
  char vendor[128] = "", product[128] = "", xen[32] = "";
  p2pk_sysfs_read_line(root, "/sys/devices/virtual/dmi/id/sys_vendor", vendor, sizeof vendor);
  p2pk_sysfs_read_line(root, "/sys/devices/virtual/dmi/id/product_name", product, sizeof product);
  p2pk_sysfs_read_line(root, "/sys/hypervisor/type", xen, sizeof xen);
  int flag = cpu_hypervisor_flag(root, &h->cpuinfo_read);
  const char *name = dmi_vm_name(vendor, product);
  if (flag) {
    h->vm = 1;
    snprintf(h->vm_evidence, sizeof h->vm_evidence, "the CPU flags list 'hypervisor'");
  } else if (!h->cpuinfo_read && (name || xen[0])) {
    /* Without cpuinfo, DMI is the best word we have. (Bare-metal cloud
     * instances keep the cloud's DMI vendor, so the CPU flag wins.) */
    h->vm = 1;
    snprintf(h->vm_evidence, sizeof h->vm_evidence, "DMI names '%s %s'", vendor, product);
  }
  if (h->vm) {
    if (name) snprintf(h->vm_name, sizeof h->vm_name, "%s", name);
    else if (xen[0]) snprintf(h->vm_name, sizeof h->vm_name, "%s", xen);
  }
  read_iommu_units(root, h);
  read_cmdline(root, h);
}

int p2pk_sysfs_iommu_group(const char *root, const char *busid) {
  char rel[128], full[PATH_LEN], target[PATH_LEN];
  snprintf(rel, sizeof rel, "/sys/bus/pci/devices/%s/iommu_group", busid);
  p2pk_sysfs_path(root, rel, full, sizeof full);
  ssize_t n = readlink(full, target, sizeof target - 1);
  if (n < 0) return -1;
  target[n] = '\0';
  const char *slash = strrchr(target, '/');
  const char *num = slash ? slash + 1 : target;
  char *end = NULL;
  long g = strtol(num, &end, 10);
  if (end == num || *end) return -1;
  return (int)g;
}

int p2pk_sysfs_iommu_type(const char *root, const char *busid, char *buf, size_t len) {
  int g = p2pk_sysfs_iommu_group(root, busid);
  if (g < 0) return -1;
  char rel[128];
  snprintf(rel, sizeof rel, "/sys/kernel/iommu_groups/%d/type", g);
  if (p2pk_sysfs_read_line(root, rel, buf, len) != 0) snprintf(buf, len, "unknown");
  return 0;
}

int p2pk_iommu_type_translated(const char *type) {
  return strcmp(type, "DMA") == 0 || strcmp(type, "DMA-FQ") == 0;
}

/* --- GPUDirect RDMA ------------------------------------------------------------ */

static const char *const peermem_modules[] = {"nvidia_peermem", "nv_peer_mem"};

static void read_peermem(const char *root, p2pk_gdr_facts *g) {
  char full[PATH_LEN], line[512];
  p2pk_sysfs_path(root, "/proc/modules", full, sizeof full);
  FILE *f = fopen(full, "r");
  if (f) {
    g->modules_read = 1;
    while (!g->peermem[0] && fgets(line, sizeof line, f))
      for (size_t i = 0; i < sizeof peermem_modules / sizeof peermem_modules[0]; i++) {
        size_t n = strlen(peermem_modules[i]);
        if (strncmp(line, peermem_modules[i], n) == 0 && line[n] == ' ')
          snprintf(g->peermem, sizeof g->peermem, "%s", peermem_modules[i]);
      }
    fclose(f);
  }
  /* Built into the kernel: no line in /proc/modules, a /sys/module entry. */
  for (size_t i = 0; !g->peermem[0] && i < sizeof peermem_modules / sizeof peermem_modules[0]; i++) {
    char rel[64];
    snprintf(rel, sizeof rel, "/sys/module/%s", peermem_modules[i]);
    p2pk_sysfs_path(root, rel, full, sizeof full);
    if (access(full, F_OK) == 0) snprintf(g->peermem, sizeof g->peermem, "%s", peermem_modules[i]);
  }
}

/* "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release
 * Build ..." (open) or "NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..." */
static void read_nvidia_version(const char *root, p2pk_gdr_facts *g) {
  char line[512];
  g->open_module = -1;
  if (p2pk_sysfs_read_line(root, "/proc/driver/nvidia/version", line, sizeof line) != 0) return;
  const char *km = strstr(line, "Kernel Module");
  if (!km) return;
  g->open_module = strstr(line, "Open Kernel Module") != NULL;
  for (const char *p = km + strlen("Kernel Module"); *p; p++) {
    if (!isdigit((unsigned char)*p) || !isspace((unsigned char)p[-1])) continue;
    size_t n = strspn(p, "0123456789.");
    if (memchr(p, '.', n) && n < sizeof g->nvidia_version) {
      memcpy(g->nvidia_version, p, n);
      g->nvidia_version[n] = '\0';
      break;
    }
  }
}

void p2pk_sysfs_gdr(const char *root, p2pk_gdr_facts *g) {
  memset(g, 0, sizeof *g);
  read_peermem(root, g);
  read_nvidia_version(root, g);
  char rel[64];
  if (p2pk_sysfs_read_line(root, "/proc/sys/kernel/osrelease", rel, sizeof rel) == 0 &&
      sscanf(rel, "%d.%d", &g->kernel_major, &g->kernel_minor) != 2)
    g->kernel_major = g->kernel_minor = 0;
}

int p2pk_gdr_dmabuf(const p2pk_gdr_facts *g) {
  int new_kernel = g->kernel_major > 5 || (g->kernel_major == 5 && g->kernel_minor >= 12);
  return g->open_module == 1 && new_kernel;
}
