/* SPDX-License-Identifier: BSD-3-Clause */
/* The topology model: what discovery finds and what the file readers load.
 * Plain data, so a machine recorded elsewhere classifies exactly like a live
 * one. Every reader fills this struct; the classifier and printers only read it. */
#ifndef P2PK_TOPO_H
#define P2PK_TOPO_H

#include <stdint.h>

#include "p2pkit.h"

#define P2PK_MAX_GPUS 64
#define P2PK_MAX_PCI 512
#define P2PK_MAX_NUMA 64
#define P2PK_MAX_NVL_GROUPS 16
#define P2PK_MAX_NOTES 8
#define P2PK_MAX_NICS 64
#define P2PK_BUSID_LEN 20
#define P2PK_NIC_NAME_LEN 64

/* A PCI node. Switches are whole switches (an upstream port with its
 * downstream ports), as NCCL models them; root ports are folded into their
 * host bridge. A GPU's chain of parents ends at a host bridge. */
typedef enum {
  P2PK_PCI_HOSTBRIDGE = 0,
  P2PK_PCI_SWITCH = 1,
  P2PK_PCI_GPU = 2,
  P2PK_PCI_OTHER = 3, /* NICs and the rest; a NIC's device is one (see p2pk_nic) */
} p2pk_pci_kind;

typedef struct {
  p2pk_pci_kind kind;
  char busid[P2PK_BUSID_LEN]; /* "0000:00:06.0"; a host bridge may use "0000:00" */
  int parent;                 /* index into pci[], -1 for a host bridge */
  int numa;                   /* NUMA os index (host bridges), -1 unknown */
  int link_gen, link_width;   /* current link, 0 unknown */
  int max_gen, max_width;     /* capability, 0 unknown */
  unsigned vendor, device, class_id; /* 0 unknown */
} p2pk_pci_node;

typedef struct {
  int os_index;
  char cpus[256]; /* CPU list as hwloc/nvidia-smi print it: "0-31,64-95" */
} p2pk_numa_node;

typedef enum {
  P2PK_NVL_GPU = 0,
  P2PK_NVL_SWITCH = 1,
  P2PK_NVL_CPU = 2,
  P2PK_NVL_UNKNOWN = 3,
} p2pk_nvl_peer;

/* Active NVLinks of one GPU that reach the same remote device. */
typedef struct {
  p2pk_nvl_peer peer;
  char peer_busid[P2PK_BUSID_LEN]; /* remote GPU's bus id; a switch's id or "" */
  int count;
  int version; /* NVLink version, 0 unknown */
} p2pk_nvl_group;

typedef struct {
  char name[96];
  char busid[P2PK_BUSID_LEN];
  char uuid[48];
  uint64_t memory_bytes;
  int sm_count;
  int cc_major, cc_minor;
  int mem_numa;            /* "GPU NUMA ID": the NUMA node the GPU's memory is (coherent
                              GPUs, e.g. over NVLink-C2C), P2PK_GPU_NUMA_NONE when it is
                              none, P2PK_GPU_NUMA_UNKNOWN when the source does not say */
  int pci;                 /* index into pci[] of this GPU's node, -1 unknown */
  int nvlinks_present;     /* links the GPU has, active or not; -1 unknown */
  int nvlinks_active;      /* -1 unknown */
  double nvlink_gbps;      /* one link, one direction, GB/s; 0 unknown */
  int ngroups;
  p2pk_nvl_group groups[P2PK_MAX_NVL_GROUPS];
} p2pk_gpu;

#define P2PK_GPU_NUMA_NONE (-1)
#define P2PK_GPU_NUMA_UNKNOWN (-2)

/* A network port GPUDirect RDMA can use: what nvidia-smi lists as a NIC (a
 * verbs device such as mlx5_0). It sits at a PCI node: its own device (kind
 * other), or the host bridge of its CPU when the source knows no more (NCCL's
 * <nic> straight under <cpu>). A plain network interface without RDMA (eth0
 * on virtio-net, NCCL's socket transport) is not a NIC here: nvidia-smi does
 * not list it and GPUDirect RDMA cannot use it. */
typedef struct {
  char name[P2PK_NIC_NAME_LEN]; /* "mlx5_0"; "" when the source names none */
  int pci;                      /* index into pci[] */
  int speed_mbps;               /* port speed in Mb/s (NCCL's <net speed>), 0 unknown */
  int gdr;                      /* NCCL's word on GPUDirect RDMA: 1 yes, 0 no, -1 unknown */
} p2pk_nic;

/* What the runtime and NVML say about an ordered pair. -1 = unknown. */
typedef struct {
  int cuda_access;      /* cudaDeviceCanAccessPeer */
  int attr_access;      /* cudaDevP2PAttrAccessSupported */
  int attr_atomics;     /* cudaDevP2PAttrNativeAtomicSupported */
  int attr_perf_rank;   /* cudaDevP2PAttrPerformanceRank */
  int attr_array;       /* cudaDevP2PAttrCudaArrayAccessSupported */
  p2pkit_p2p_code_t nvml[P2PKIT_P2P_CAPS]; /* P2PKIT_P2P_U when not recorded */
} p2pk_p2p;

/* Which facts the source could give. A classifier never guesses past these. */
enum {
  P2PK_KNOW_CUDA = 1 << 0,        /* names, memory, SMs from the runtime */
  P2PK_KNOW_PCI_TREE = 1 << 1,    /* switches and their nesting */
  P2PK_KNOW_HOSTBRIDGES = 1 << 2, /* which host bridge each device hangs from */
  P2PK_KNOW_NUMA = 1 << 3,        /* NUMA nodes and CPU sets */
  P2PK_KNOW_NVLINK = 1 << 4,      /* NVLink groups and counts */
  P2PK_KNOW_P2P = 1 << 5,         /* NVML / CUDA P2P status */
  P2PK_KNOW_PCIE_LINK = 1 << 6,   /* current/max PCIe generation and width */
};

struct p2pkit_topo {
  char format[16];      /* "live", "p2pkit", "hwloc-xml", "nccl-xml" */
  char source[256];     /* file name or host name it came from */
  char hostname[64];
  char driver[32];      /* NVIDIA driver version, "" unknown */
  char nvml_version[32];
  int cuda_driver;      /* cudaDriverGetVersion, 0 unknown */
  int cuda_runtime;     /* cudaRuntimeGetVersion, 0 unknown */
  unsigned known;       /* P2PK_KNOW_* bits */

  int ngpus;
  p2pk_gpu gpus[P2PK_MAX_GPUS]; /* in CUDA device order */
  int npci;
  p2pk_pci_node pci[P2PK_MAX_PCI];
  int nnuma;
  p2pk_numa_node numa[P2PK_MAX_NUMA];
  p2pk_p2p p2p[P2PK_MAX_GPUS][P2PK_MAX_GPUS]; /* [src][dst] */
  int nnics;
  p2pk_nic nics[P2PK_MAX_NICS]; /* in the source's order (mlx5_0, mlx5_1, ...) */

  int nnotes;           /* what the source could not tell, in sentences */
  char notes[P2PK_MAX_NOTES][192];
};

/* --- building a model (readers and discovery) --------------------------- */

/* Zeroed model with every P2P entry unknown. NULL on allocation failure. */
struct p2pkit_topo *p2pk_topo_new(const char *format, const char *source);
/* Append nodes; they return the new index, or -1 (and record the error) when
 * the model is full. */
int p2pk_topo_add_pci(struct p2pkit_topo *t, p2pk_pci_kind kind, const char *busid, int parent);
int p2pk_topo_add_numa(struct p2pkit_topo *t, int os_index, const char *cpus);
int p2pk_topo_add_gpu(struct p2pkit_topo *t, const char *busid);
/* A NIC named `name` ("" unnamed) at PCI node `pci`. */
int p2pk_topo_add_nic(struct p2pkit_topo *t, const char *name, int pci);
void p2pk_topo_note(struct p2pkit_topo *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Index of the PCI node / GPU with this bus id (any spelling), or -1. */
int p2pk_topo_find_pci(const struct p2pkit_topo *t, const char *busid);
int p2pk_topo_find_gpu(const struct p2pkit_topo *t, const char *busid);
/* Canonical "dddd:bb:dd.f", lower case; accepts "00000000:00:06.0", "0:6:0.0"
 * style NVML/NCCL spellings. Returns 0, or -1 when it is not a bus id. */
int p2pk_busid_normalize(const char *in, char out[P2PK_BUSID_LEN]);
/* Check invariants (parents in range and acyclic, GPUs point at GPU nodes).
 * P2PKIT_ERR_PARSE with the reason when broken. */
p2pkit_status_t p2pk_topo_validate(const struct p2pkit_topo *t);

/* --- classification ------------------------------------------------------ */

/* NUMA node a PCI node hangs from (walking up to its host bridge), -1 unknown. */
int p2pk_pci_numa(const struct p2pkit_topo *t, int pci);
/* The PCIe-path class between two GPUs (PIX..SYS), ignoring NVLink. */
p2pkit_link_t p2pk_classify_pcie(const struct p2pkit_topo *t, int a, int b);
/* The same between any two PCI nodes (a GPU's, a NIC's); a host bridge
 * stands for a device known only to hang from it. */
p2pkit_link_t p2pk_classify_pci(const struct p2pkit_topo *t, int pa, int pb);
/* GPU g to NIC n, and NIC to NIC, as nvidia-smi prints them (PIX..SYS, X). */
p2pkit_link_t p2pk_gpu_nic_link(const struct p2pkit_topo *t, int g, int n);
p2pkit_link_t p2pk_nic_nic_link(const struct p2pkit_topo *t, int a, int b);
/* The NIC nearest GPU g (the first of the best class), or -1 when there is
 * none; *link_p gets its class. */
int p2pk_nearest_nic(const struct p2pkit_topo *t, int g, p2pkit_link_t *link_p);
/* What to call NIC n: its name, else its bus id, else "NIC<n>". */
const char *p2pk_nic_label(const struct p2pkit_topo *t, int n, char *buf, size_t len);
/* One plain sentence: GPU g's nearest NIC and what the path means for
 * GPUDirect RDMA; "" when there is no NIC. */
void p2pk_nic_sentence(const struct p2pkit_topo *t, int g, char *buf, size_t len);
/* NVLinks joining a and b: direct links, or through NVSwitch the smaller of
 * the two GPUs' switch link counts. 0 when none. */
int p2pk_nvlinks_between(const struct p2pkit_topo *t, int a, int b);
/* Fill the public pair record (classification, P2P status, expected rate). */
void p2pk_pair_info(const struct p2pkit_topo *t, int a, int b, p2pkit_pair_t *out);
/* One plain sentence: how data travels from a to b and what to expect. */
void p2pk_pair_sentence(const struct p2pkit_topo *t, int a, int b, char *buf, size_t len);
/* PCIe line rate one way in GB/s for a generation and width (0 unknown). */
double p2pk_pcie_gbps(int gen, int width);
/* The fraction of that line rate a bulk copy reaches (pinned host memory to
 * or from a GPU, P2P over PCIe, the staged pipeline): pinned D2H 55 of 63
 * GB/s at Gen5 x16 on the device machine (ANCHORS.md). */
#define P2PK_PCIE_EFFICIENCY 0.87

/* --- sources (each in its own file) -------------------------------------- */

/* topo_discover.c: CUDA runtime + hwloc + NVML on this machine. */
p2pkit_status_t p2pk_topo_discover(struct p2pkit_topo **t_p);
/* GPUs the CUDA runtime sees (at least 1), or why none: NO_DRIVER "the CUDA
 * driver (libcuda.so.1) is not installed" / "... is older than this build's
 * runtime", NO_DEVICE "the CUDA runtime sees no GPU". Every entry point
 * (discovery, communicators, perf) says it the same way. */
p2pkit_status_t p2pk_gpu_count(int *n);
/* topo_hwloc.c: fill PCI tree, host bridges, NUMA and CPU sets from an hwloc
 * topology that is already loaded (live or from XML). GPUs are matched or
 * added by bus id. */
struct hwloc_topology;
p2pkit_status_t p2pk_topo_from_hwloc(struct p2pkit_topo *t, struct hwloc_topology *h);
/* Live machine. */
p2pkit_status_t p2pk_topo_load_hwloc_live(struct p2pkit_topo *t);
/* Write this machine's hwloc topology (with PCI devices) as hwloc XML, the
 * same as `lstopo --of xml` where lstopo is not installed. */
p2pkit_status_t p2pk_topo_export_hwloc_xml(const char *path);
/* topo_nvml.c: NVLink groups, PCIe link state, NVML P2P status. */
p2pkit_status_t p2pk_topo_add_nvml(struct p2pkit_topo *t);
/* topo_file.c: p2pkit's own line-based format (versioned). */
p2pkit_status_t p2pk_topo_write_file(const struct p2pkit_topo *t, FILE *out);
p2pkit_status_t p2pk_topo_read_file(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p);
/* topo_nccl.c: NCCL topology XML (NCCL_TOPO_DUMP_FILE / NCCL_TOPO_FILE). */
p2pkit_status_t p2pk_topo_read_nccl(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p);
p2pkit_status_t p2pk_topo_write_nccl(const struct p2pkit_topo *t, FILE *out);
/* topo_hwloc.c: hwloc XML held in memory. */
p2pkit_status_t p2pk_topo_read_hwloc_xml(const char *name, const char *text, size_t len,
                                         struct p2pkit_topo **t_p);
/* topo_load.c: detect the format from the contents (the root element after
 * any XML declaration, comment or DOCTYPE) and dispatch. */
typedef enum { P2PK_FMT_UNKNOWN = 0, P2PK_FMT_P2PKIT, P2PK_FMT_HWLOC, P2PK_FMT_NCCL } p2pk_topo_format;
p2pk_topo_format p2pk_topo_detect(const char *text, size_t len);
p2pkit_status_t p2pk_topo_read_any(const char *name, const char *text, size_t len,
                                   struct p2pkit_topo **t_p);

#endif
