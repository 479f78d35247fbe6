/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * p2pkit: move data between the GPUs of one machine as fast as the links allow.
 *
 * One public header. Every call returns a p2pkit_status_t; p2pkit_strerror()
 * names it and p2pkit_last_error() gives the detail (thread-local) of the last
 * failure on the calling thread. Handles are opaque. Outputs (`*_p`) are set only
 * on success.
 *
 * Layers (a lower one never calls a higher one):
 *   core (status, log, settings) <- topo (discovery, classification)
 *   <- xfer (copies) <- coll (communicators, collectives) <- CLI, benchmarks.
 *
 * ABI. libp2pkit.so's soname is libp2pkit.so.MAJOR; within a major version
 * from 1.0 on, a program built against an older header runs with a newer
 * library. Before 1.0 a minor release may change the ABI (CHANGELOG.md says
 * where): rebuild against each 0.x. The options structs a caller fills
 * (p2pkit_config_t, p2pkit_comm_opts_t, p2pkit_grad_sync_opts_t) start with
 * their size and version, set by their _INIT macro or _init function: a
 * library knows which fields a caller built against another header has, and
 * refuses, in one line, a size or version it does not know. Structs the
 * library fills (p2pkit_gpu_t, p2pkit_pair_t, p2pkit_nic_t) and enums change
 * only with the soname; enums only grow, at their end.
 */
#ifndef P2PKIT_H
#define P2PKIT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(P2PKIT_BUILDING)
#define P2PKIT_API __attribute__((visibility("default")))
#else
#define P2PKIT_API
#endif

/* The one place the version is written: CMake, pyproject.toml (the wheel),
 * p2pkit.pc and the CMake package read these three lines. */
#define P2PKIT_VERSION_MAJOR 0
#define P2PKIT_VERSION_MINOR 1
#define P2PKIT_VERSION_PATCH 0
/* MAJOR*10000 + MINOR*100 + PATCH, like NCCL_VERSION_CODE. */
#define P2PKIT_VERSION_CODE \
  (P2PKIT_VERSION_MAJOR * 10000 + P2PKIT_VERSION_MINOR * 100 + P2PKIT_VERSION_PATCH)

/* ---------------------------------------------------------------- core ---- */

typedef enum {
  P2PKIT_SUCCESS = 0,
  P2PKIT_ERR_INVALID_ARGUMENT = 1, /* a caller's value is out of range or NULL */
  P2PKIT_ERR_NO_MEMORY = 2,        /* host or device allocation failed */
  P2PKIT_ERR_NO_DRIVER = 3,        /* no NVIDIA driver / CUDA driver too old */
  P2PKIT_ERR_NO_DEVICE = 4,        /* driver present, no usable GPU */
  P2PKIT_ERR_CUDA = 5,             /* a CUDA runtime call failed */
  P2PKIT_ERR_NVML = 6,             /* NVML missing or a call failed */
  P2PKIT_ERR_IO = 7,               /* a file could not be read or written */
  P2PKIT_ERR_PARSE = 8,            /* a file's contents are malformed */
  P2PKIT_ERR_UNSUPPORTED = 9,      /* valid request this machine/build can't do */
  P2PKIT_ERR_SYSTEM = 10,          /* a system call failed */
  P2PKIT_ERR_TIMEOUT = 11,         /* a peer did not answer in time */
  P2PKIT_ERR_REMOTE = 12,          /* a peer reported an error or died */
  P2PKIT_ERR_INTERNAL = 13,        /* a bug in p2pkit */
  P2PKIT_STATUS_COUNT
} p2pkit_status_t;

/* Short description of a status, never NULL. */
P2PKIT_API const char *p2pkit_strerror(p2pkit_status_t status);
/* Detail of the last failure on this thread ("" when none). */
P2PKIT_API const char *p2pkit_last_error(void);
/* Runtime version, comparable to P2PKIT_VERSION_CODE. */
P2PKIT_API int p2pkit_version(void);
/* An integer setting of the registry (`p2pkit env` lists them) as the
 * library reads it, for code built on p2pkit: *value_p the value in force,
 * *is_set_p (may be NULL) 1 when the environment sets it. A name that is
 * no integer setting, or a value outside its range: an error naming it. */
P2PKIT_API p2pkit_status_t p2pkit_setting_int(const char *name, int64_t *value_p, int *is_set_p);

/* CUDA stream without pulling in CUDA headers; same type as cudaStream_t. */
typedef struct CUstream_st *p2pkit_stream_t;

/* ---------------------------------------------------------------- topo ---- */

typedef struct p2pkit_topo *p2pkit_topo_t;

/* How two GPUs are joined, as `nvidia-smi topo -m` says it. */
typedef enum {
  P2PKIT_LINK_SELF = 0,   /* X    */
  P2PKIT_LINK_NVLINK = 1, /* NV#  bonded NVLinks, direct or through NVSwitch */
  P2PKIT_LINK_PIX = 2,    /* at most one PCIe switch */
  P2PKIT_LINK_PXB = 3,    /* several PCIe switches, no host bridge */
  P2PKIT_LINK_PHB = 4,    /* through a PCIe host bridge */
  P2PKIT_LINK_NODE = 5,   /* between host bridges of one NUMA node */
  P2PKIT_LINK_SYS = 6,    /* across the SMP interconnect between NUMA nodes */
  P2PKIT_LINK_UNKNOWN = 7
} p2pkit_link_t;

/* nvidia-smi topo -p2p codes. */
typedef enum {
  P2PKIT_P2P_OK = 0,  /* OK  */
  P2PKIT_P2P_CNS = 1, /* chipset not supported */
  P2PKIT_P2P_GNS = 2, /* GPU not supported */
  P2PKIT_P2P_TNS = 3, /* topology not supported */
  P2PKIT_P2P_NS = 4,  /* not supported (also: disabled by regkey) */
  P2PKIT_P2P_U = 5    /* unknown / not recorded */
} p2pkit_p2p_code_t;

typedef enum {
  P2PKIT_P2P_READ = 0,
  P2PKIT_P2P_WRITE = 1,
  P2PKIT_P2P_ATOMICS = 2,
  P2PKIT_P2P_NVLINK = 3,
  P2PKIT_P2P_CAPS = 4
} p2pkit_p2p_cap_t;

typedef struct {
  int src, dst;
  p2pkit_link_t link;       /* what nvidia-smi topo -m prints */
  p2pkit_link_t pcie;       /* the PCIe path class, also when NVLink joins them */
  int nvlinks;              /* bonded NVLinks (0 when none) */
  int p2p;                  /* 1 direct access works, 0 it does not, -1 unknown */
  p2pkit_p2p_code_t caps[P2PKIT_P2P_CAPS]; /* NVML status per capability */
  int cuda_access;          /* cudaDeviceCanAccessPeer, -1 unknown */
  int cuda_atomics;         /* cudaDevP2PAttrNativeAtomicSupported, -1 unknown */
  int cuda_perf_rank;       /* cudaDevP2PAttrPerformanceRank, -1 unknown */
  double line_gbps;         /* raw line rate of the path, one way, GB/s (0 unknown) */
  double expected_gbps;     /* what a copy should reach one way, GB/s */
  char label[8];            /* "X", "NV18", "PIX", ... */
} p2pkit_pair_t;

typedef struct {
  int index;
  char name[96];
  char busid[20];           /* "0000:00:06.0" */
  uint64_t memory_bytes;
  int sm_count;
  int cc_major, cc_minor;
  int numa;                 /* NUMA node, -1 unknown */
  char cpus[256];           /* CPU affinity list, "0-31", "" unknown */
  int pcie_gen, pcie_width; /* current link, 0 unknown */
  int pcie_max_gen, pcie_max_width;
  int nvlinks_active, nvlinks_present;
  double nvlink_gbps;       /* one link, one direction, GB/s; 0 unknown */
} p2pkit_gpu_t;

/* Discover this machine: CUDA runtime, hwloc, NVML (loaded at run time).
 * P2PKIT_ERR_NO_DRIVER / P2PKIT_ERR_NO_DEVICE when there is nothing to see.
 * P2PKIT_TOPO_FILE set: that recorded machine instead, as p2pkit_topo_load
 * reads it (as the `p2pkit` command does); its errors name the setting. */
P2PKIT_API p2pkit_status_t p2pkit_topo_discover(p2pkit_topo_t *topo_p);
/* Read a recorded machine: p2pkit's own file, an hwloc XML export, or an NCCL
 * topology dump; the format is detected from the contents. */
P2PKIT_API p2pkit_status_t p2pkit_topo_load(const char *path, p2pkit_topo_t *topo_p);
P2PKIT_API p2pkit_status_t p2pkit_topo_save(p2pkit_topo_t topo, const char *path);
/* Write NCCL's topology XML (for NCCL_TOPO_FILE). */
P2PKIT_API p2pkit_status_t p2pkit_topo_write_nccl(p2pkit_topo_t topo, const char *path);
P2PKIT_API void p2pkit_topo_destroy(p2pkit_topo_t topo);

P2PKIT_API int p2pkit_topo_gpu_count(p2pkit_topo_t topo);
P2PKIT_API p2pkit_status_t p2pkit_topo_gpu(p2pkit_topo_t topo, int gpu, p2pkit_gpu_t *gpu_p);
P2PKIT_API p2pkit_status_t p2pkit_topo_pair(p2pkit_topo_t topo, int src, int dst,
                                            p2pkit_pair_t *pair_p);
P2PKIT_API const char *p2pkit_link_name(p2pkit_link_t link);
P2PKIT_API const char *p2pkit_p2p_code_name(p2pkit_p2p_code_t code);

enum {
  P2PKIT_PRINT_MATRIX = 1 << 0,    /* nvidia-smi topo -m */
  P2PKIT_PRINT_P2P = 1 << 1,       /* nvidia-smi topo -p2p r/w/a/n */
  P2PKIT_PRINT_SENTENCES = 1 << 2, /* one sentence per pair */
  P2PKIT_PRINT_JSON = 1 << 3,      /* the versioned JSON document instead */
  P2PKIT_PRINT_ALL = 7
};
P2PKIT_API p2pkit_status_t p2pkit_topo_print(p2pkit_topo_t topo, FILE *out, int flags);

/* NICs: the network ports GPUDirect RDMA can use, as `nvidia-smi topo -m`
 * lists them (rows NIC0.. and its "NIC Legend"); interfaces without RDMA
 * (virtio-net, sockets) are not among them. */
typedef struct {
  int index;
  char name[64];  /* "mlx5_0"; "" when the source names none */
  char busid[20]; /* its PCI device; "" when only its CPU socket is known */
  int numa;       /* NUMA node, -1 unknown */
  int speed_mbps; /* port speed, 0 unknown */
} p2pkit_nic_t;

P2PKIT_API int p2pkit_topo_nic_count(p2pkit_topo_t topo);
P2PKIT_API p2pkit_status_t p2pkit_topo_nic(p2pkit_topo_t topo, int nic, p2pkit_nic_t *nic_p);
/* How GPU `gpu` reaches NIC `nic` over PCIe: PIX..SYS as nvidia-smi prints it. */
P2PKIT_API p2pkit_status_t p2pkit_topo_gpu_nic(p2pkit_topo_t topo, int gpu, int nic,
                                               p2pkit_link_t *link_p);

/* ---------------------------------------------------------------- xfer ---- */

typedef struct p2pkit_ctx *p2pkit_ctx_t;

typedef enum {
  P2PKIT_PATH_AUTO = 0,          /* choose per pair from the topology */
  P2PKIT_PATH_P2P_CE = 1,        /* cudaMemcpyPeerAsync with peer access on */
  P2PKIT_PATH_P2P_SM_PUSH = 2,   /* kernel on the source GPU writes the peer */
  P2PKIT_PATH_P2P_SM_PULL = 3,   /* kernel on the destination GPU reads the peer */
  P2PKIT_PATH_STAGED = 4,        /* pipelined through pinned host memory */
  P2PKIT_PATH_STAGED_SERIAL = 5, /* one D2H then one H2D (baseline) */
  P2PKIT_PATH_DRIVER = 6,        /* cudaMemcpyPeerAsync with peer access off */
  P2PKIT_PATH_COUNT
} p2pkit_path_t;

P2PKIT_API const char *p2pkit_path_name(p2pkit_path_t path);

/* A copy context: the topology (discovered when `topo` is NULL; the context
 * then owns it), per-pair peer-access state and staging buffers. Thread-safe. */
P2PKIT_API p2pkit_status_t p2pkit_ctx_create(p2pkit_topo_t topo, p2pkit_ctx_t *ctx_p);
P2PKIT_API void p2pkit_ctx_destroy(p2pkit_ctx_t ctx);
/* What P2PKIT_PATH_AUTO picks for src -> dst at this size, and why (the text
 * the log prints, e.g. "P2P/NVLink/CE"; valid until this thread's next call). */
P2PKIT_API p2pkit_status_t p2pkit_copy_choose(p2pkit_ctx_t ctx, int src_dev, int dst_dev,
                                              size_t bytes, p2pkit_path_t *path_p,
                                              const char **why_p);
/* Copy `bytes` from src (on src_dev) to dst (on dst_dev), ordered on `stream`
 * (a stream of the source device; NULL = that device's legacy stream). */
P2PKIT_API p2pkit_status_t p2pkit_copy(p2pkit_ctx_t ctx, void *dst, int dst_dev,
                                       const void *src, int src_dev, size_t bytes,
                                       p2pkit_stream_t stream, p2pkit_path_t path);

/* ---------------------------------------------------------------- coll ---- */

typedef struct p2pkit_comm *p2pkit_comm_t;

typedef enum {
  P2PKIT_FLOAT32 = 0,
  P2PKIT_FLOAT16 = 1,
  P2PKIT_BFLOAT16 = 2,
  P2PKIT_FLOAT64 = 3,
  P2PKIT_INT32 = 4,
  P2PKIT_INT64 = 5,
  P2PKIT_UINT8 = 6,
  /* Through NCCL only (p2pkit's own paths refuse them: "int8 needs the NCCL
   * path"); the fp8 types are CUDA's __nv_fp8_e4m3 / __nv_fp8_e5m2. */
  P2PKIT_INT8 = 7,
  P2PKIT_UINT32 = 8,
  P2PKIT_UINT64 = 9,
  P2PKIT_FLOAT8_E4M3 = 10,
  P2PKIT_FLOAT8_E5M2 = 11,
  P2PKIT_DTYPE_COUNT
} p2pkit_dtype_t;

typedef enum {
  P2PKIT_SUM = 0,
  P2PKIT_PROD = 1,
  P2PKIT_MIN = 2,
  P2PKIT_MAX = 3,
  P2PKIT_AVG = 4,
  P2PKIT_REDOP_COUNT
} p2pkit_redop_t;

P2PKIT_API size_t p2pkit_dtype_size(p2pkit_dtype_t dtype); /* 0 when invalid */
P2PKIT_API const char *p2pkit_dtype_name(p2pkit_dtype_t dtype);
P2PKIT_API const char *p2pkit_redop_name(p2pkit_redop_t op);

/* Rendezvous for one process per GPU. Unset fields (-1 / NULL) come from the
 * launcher's environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
 * MASTER_PORT (torchrun) or OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK
 * (mpirun); the secret from P2PKIT_JOB_SECRET only (a launcher's run id,
 * such as TORCHELASTIC_RUN_ID, is never one). A launcher variable that is
 * set but malformed is an error naming it. Ranks prove the secret to each
 * other (HMAC-SHA256, OpenSSL's libcrypto loaded at run time) and never send
 * it. Off loopback the secret must hold 128 bits: 32 hex digits or 22 other
 * characters (`openssl rand -hex 16`, `p2pkit env --new-secret`); without
 * one, addr must be a loopback address and only this user's processes may
 * join (docs/rendezvous.md). */
#define P2PKIT_COMM_OPTS_VERSION 1

typedef struct {
  size_t size;          /* sizeof(p2pkit_comm_opts_t) as the caller compiled it */
  unsigned int version; /* P2PKIT_COMM_OPTS_VERSION */
  int nranks;
  int rank;
  int device;          /* CUDA device of this rank; -1: LOCAL_RANK */
  const char *addr;    /* address rank 0 listens on; NULL: MASTER_ADDR or 127.0.0.1 */
  int port;            /* -1: MASTER_PORT */
  const char *secret;  /* per-job secret every rank knows; NULL: P2PKIT_JOB_SECRET */
  int timeout_s;       /* 1..86400 s for every wait for a peer; -1: P2PKIT_TIMEOUT, else 600 */
} p2pkit_comm_opts_t;

/* "Take everything from the environment": -1 / NULL everywhere. */
#define P2PKIT_COMM_OPTS_INIT \
  { sizeof(p2pkit_comm_opts_t), P2PKIT_COMM_OPTS_VERSION, -1, -1, -1, NULL, -1, NULL, -1 }

/* Fill `opts` as P2PKIT_COMM_OPTS_INIT does. */
P2PKIT_API void p2pkit_comm_opts_init(p2pkit_comm_opts_t *opts);
/* One process driving `ndev` GPUs: comms[i] is rank i on devs[i]
 * (devs NULL: devices 0..ndev-1). Each rank allocates its device scratch
 * once here: P2PKIT_BUFFER_SIZE (128 MiB by default over P2P) plus the
 * mid-size protocol's area (about 2.13 x P2PKIT_LL128_MAX, 68 MiB by
 * default; P2PKIT_LL128_MAX=0 drops it). */
P2PKIT_API p2pkit_status_t p2pkit_comm_init_all(p2pkit_comm_t *comms, int ndev, const int *devs);
/* One process per GPU (collective over all ranks; fails after the timeout if
 * a rank never arrives). `opts` NULL: everything from the environment; else
 * refused, in one line, when its size or version is not this library's. */
P2PKIT_API p2pkit_status_t p2pkit_comm_init_rank(const p2pkit_comm_opts_t *opts,
                                                 p2pkit_comm_t *comm_p);
P2PKIT_API p2pkit_status_t p2pkit_comm_destroy(p2pkit_comm_t comm);
P2PKIT_API int p2pkit_comm_rank(p2pkit_comm_t comm);
P2PKIT_API int p2pkit_comm_size(p2pkit_comm_t comm);
P2PKIT_API int p2pkit_comm_device(p2pkit_comm_t comm);
/* Most thread blocks each collective kernel of `comm` takes over P2P (as
 * NCCL's maxCTAs), so collectives overlapping compute leave it
 * multiprocessors: the grid each call would choose, capped (a send/recv
 * group shares it out, at least one block per operation). 0: no cap (the
 * default, or P2PKIT_MAX_BLOCKS at init). Applies to calls made after it;
 * not inside a group. Every rank must use the same value: set it on each
 * communicator of p2pkit_comm_init_all, and with a process per GPU on each
 * rank at the same point (ranks whose grids differ fail: a collective with
 * a mismatch error, a send/recv at the timeout). The copy engines' transfers use
 * no multiprocessors; the host-memory (staged) transport keeps its own
 * small grids. */
P2PKIT_API p2pkit_status_t p2pkit_comm_set_max_blocks(p2pkit_comm_t comm, int max_blocks);
/* The cap in force (0: none); -1 for a NULL communicator. */
P2PKIT_API int p2pkit_comm_max_blocks(p2pkit_comm_t comm);

/* Register a device buffer so collectives on it skip the staging copy,
 * and (one process per GPU) large receives, out-of-place all-to-all blocks
 * and all-gather blocks into it can take the sender's copy straight in,
 * with no landing slot (P2PKIT_SENDRECV_DIRECT). P2PKIT_SENDRECV_MAP=1
 * gives unregistered receive buffers the same, each allocation mapped by
 * its senders on first use until the communicator is destroyed: the
 * caller must not free such a buffer before then.
 * Collective: every rank registers its buffer in the same order. */
P2PKIT_API p2pkit_status_t p2pkit_comm_register(p2pkit_comm_t comm, void *buf, size_t bytes,
                                                void **handle_p);
P2PKIT_API p2pkit_status_t p2pkit_comm_deregister(p2pkit_comm_t comm, void *handle);

/* One process, several GPUs: bracket the per-rank calls of one collective.
 * As with NCCL, work inside a group may be enqueued only at the outermost
 * p2pkit_group_end: sends and receives, and large collectives, which then
 * use the copy engines (broadcast from P2PKIT_BCAST_CE_MIN; over P2P
 * all-reduce, reduce-scatter, all-gather and out-of-place all-to-all from
 * P2PKIT_CE_ALLREDUCE_MIN, _REDUCE_SCATTER_MIN, _ALL_GATHER_MIN,
 * _ALL_TO_ALL_MIN; without P2P all-reduce from
 * P2PKIT_STAGED_CE_MIN). The copy-engine all-reduce and reduce-scatter
 * over P2P keep a landing buffer of at most 192 MiB per GPU, made on first
 * use. The other calls' kernels are launched at p2pkit_group_end too, each
 * GPU's by a thread of its own at once (P2PKIT_LAUNCH_THREADS=0: by the
 * calling thread, at the call); a call's argument errors still come back
 * from the call itself. */
P2PKIT_API p2pkit_status_t p2pkit_group_start(void);
P2PKIT_API p2pkit_status_t p2pkit_group_end(void);

/* Stream-ordered, capturable in a CUDA graph; the same bits on every rank.
 * count 0 is a successful no-op; sendbuf == recvbuf is in-place.
 * On sm_90+ the kernels over P2P are programmatic dependent launches
 * (P2PKIT_PDL=0 turns that off) and let the stream's next kernel launch
 * early: a kernel of yours launched after one with programmatic stream
 * serialization must call cudaGridDependencySynchronize() before it reads
 * the result (the CUDA rule for such launches; plain launches wait anyway). */
P2PKIT_API p2pkit_status_t p2pkit_all_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                             p2pkit_dtype_t dtype, p2pkit_redop_t op,
                                             p2pkit_comm_t comm, p2pkit_stream_t stream);
/* The error a collective left on the device (a peer timed out or died, or
 * called with other arguments); *status_p is P2PKIT_SUCCESS while there is
 * none. Once set, every later call on the communicator returns it. A peer
 * that failed tells this rank through the device: it shows here once a
 * kernel of this rank has run into it, at the latest in the next call,
 * which then fails at once. */
P2PKIT_API p2pkit_status_t p2pkit_comm_get_async_error(p2pkit_comm_t comm,
                                                       p2pkit_status_t *status_p);

/* The other collectives (NCCL's semantics; counts are per rank's share as in
 * NCCL: all_gather's recvbuf holds nranks * count, reduce_scatter's sendbuf
 * nranks * count, all_to_all's buffers nranks * count each). */
P2PKIT_API p2pkit_status_t p2pkit_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                            p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                                            p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_reduce(const void *sendbuf, void *recvbuf, size_t count,
                                         p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                                         p2pkit_comm_t comm, p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_all_gather(const void *sendbuf, void *recvbuf, size_t count,
                                             p2pkit_dtype_t dtype, p2pkit_comm_t comm,
                                             p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                                 p2pkit_dtype_t dtype, p2pkit_redop_t op,
                                                 p2pkit_comm_t comm, p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_all_to_all(const void *sendbuf, void *recvbuf, size_t count,
                                             p2pkit_dtype_t dtype, p2pkit_comm_t comm,
                                             p2pkit_stream_t stream);
/* Point to point; a rank that sends and receives at once brackets both with
 * p2pkit_group_start/end. */
P2PKIT_API p2pkit_status_t p2pkit_send(const void *sendbuf, size_t count, p2pkit_dtype_t dtype,
                                       int peer, p2pkit_comm_t comm, p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_recv(void *recvbuf, size_t count, p2pkit_dtype_t dtype,
                                       int peer, p2pkit_comm_t comm, p2pkit_stream_t stream);

/* Uneven all-to-all, NCCL-based libraries' shape: this rank sends
 * sendcounts[p] elements from sendbuf + sdispls[p] to rank p, which
 * receives them at recvbuf + rdispls[this rank] (its recvcounts[this rank]
 * must be the same number). Counts and displacements are in elements,
 * arrays of the communicator's size; zeros are allowed, and each rank's
 * counts may differ from every other's. The blocks this rank sends to
 * itself and receives from itself are one size; no send block may overlap
 * a receive block. A group of sends and receives inside the library: each
 * pair of ranks takes the path its one message size selects, whatever the
 * other ranks' sizes. Stream-ordered and capturable like send/recv; one
 * process driving several GPUs: every rank's call inside one group. */
P2PKIT_API p2pkit_status_t p2pkit_all_to_allv(const void *sendbuf, const size_t *sendcounts,
                                              const size_t *sdispls, void *recvbuf,
                                              const size_t *recvcounts, const size_t *rdispls,
                                              p2pkit_dtype_t dtype, p2pkit_comm_t comm,
                                              p2pkit_stream_t stream);
/* Rooted gather and scatter, moving only what each rank needs (a group of
 * sends and receives, as above). gather: every rank's `count` elements of
 * sendbuf land in the root's recvbuf at rank * count (recvbuf: nranks *
 * count elements on the root, unused and may be NULL elsewhere). scatter:
 * the root's sendbuf (nranks * count elements, unused elsewhere) is cut in
 * rank order, block r into rank r's recvbuf (count elements). In place on
 * the root: sendbuf == recvbuf + root * count elements (gather) or recvbuf
 * == sendbuf + root * count elements (scatter). */
P2PKIT_API p2pkit_status_t p2pkit_gather(const void *sendbuf, void *recvbuf, size_t count,
                                         p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                                         p2pkit_stream_t stream);
P2PKIT_API p2pkit_status_t p2pkit_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                          p2pkit_dtype_t dtype, int root, p2pkit_comm_t comm,
                                          p2pkit_stream_t stream);

/* --------------------------------------------------------------- NCCL ---- */
/* NCCL as the engine underneath (libnccl.so.2, loaded at run time;
 * P2PKIT_NCCL_LIB names another). P2PKIT_NCCL picks what it carries:
 *   auto (default)  where no measured p2pkit path beats NCCL: 3-4 ranks
 *                   from the sizes measured slower (all-reduce from 2 MiB,
 *                   broadcast, reduce and reduce-scatter from 4 MiB a
 *                   rank), more than 4 ranks on one host, the types only
 *                   NCCL has (P2PKIT_INT8 ...), communicators spanning
 *                   hosts; without NCCL, p2pkit's own paths (one INFO line);
 *   0               never: p2pkit's own paths, NCCL's types refused,
 *                   communicators spanning hosts refused at init;
 *   1               every call.
 * A communicator of 3 ranks or more, spanning hosts, or under
 * P2PKIT_NCCL=1 makes its NCCL communicator at init, the unique id passed
 * over p2pkit's own rendezvous; one of 2 ranks at the first call that needs
 * it (not under capture). Ranks sharing a GPU need a host id each (NCCL
 * refuses two ranks on one GPU of one host): P2PKIT_HOSTID, which p2pkit
 * hands NCCL as NCCL_HOSTID unless that is set. One process driving
 * several GPUs: NCCL's calls need every rank's call in one group (a call
 * alone takes p2pkit's kernels) and are enqueued at the group's end.
 * P2PKIT_DEBUG=INFO names each call's path and the rule that chose it. */

/* Hand p2pkit the caller's NCCL communicator (an ncclComm_t over the same
 * ranks, rank for rank, on the same GPU) for the calls that go through
 * NCCL, instead of p2pkit's own (destroyed if made). p2pkit never destroys
 * or aborts it; it must outlive `comm`. Each rank
 * adopts its own; every rank must, or none. P2PKIT_ERR_UNSUPPORTED when
 * NCCL is off on `comm`. All or nothing: when it fails (no GPU memory for
 * the 32 MiB scratch of NCCL's in-place all-to-all, made first), p2pkit's
 * own communicator is kept and the caller's not taken. */
P2PKIT_API p2pkit_status_t p2pkit_comm_adopt_nccl(p2pkit_comm_t comm, void *nccl_comm);

/* ----------------------------------------------------------------- ddp ---- */
/* Gradient sync for data-parallel training (src/ddp/README.md). Register every
 * gradient once, in the model's parameter order (as model.parameters()); p2pkit
 * groups them into buckets in reverse order (the last parameters' gradients,
 * ready first in the backward pass, go into the first bucket), one data type per
 * bucket. During backward, mark each gradient ready on the stream that produced
 * it; when a bucket is complete (and every earlier bucket has been launched:
 * all ranks launch buckets in the same order) it is averaged over the ranks on
 * the communication stream, overlapping the rest of the backward pass.
 * p2pkit_grad_sync_wait() makes the compute stream wait for every bucket.
 * A gradient registered with buf NULL lives inside its bucket (no copies; take
 * its address with p2pkit_grad_sync_grad after build); one registered with the
 * caller's buffer is copied into the bucket and back. */
typedef struct p2pkit_grad_sync *p2pkit_grad_sync_t;

#define P2PKIT_GRAD_SYNC_OPTS_VERSION 1

typedef struct {
  size_t size;                  /* sizeof(p2pkit_grad_sync_opts_t) as the caller compiled it */
  unsigned int version;         /* P2PKIT_GRAD_SYNC_OPTS_VERSION */
  size_t bucket_bytes;          /* 0: P2PKIT_BUCKET_SIZE (25 MiB) */
  size_t first_bucket_bytes;    /* 0: P2PKIT_FIRST_BUCKET_SIZE (1 MiB) */
  p2pkit_stream_t comm_stream;  /* NULL: p2pkit creates a non-blocking one */
  /* Most thread blocks a bucket's all-reduce kernel takes, as it shares the
   * GPU with the backward pass: 0 P2PKIT_GRAD_SYNC_BLOCKS (default: half
   * the multiprocessors, rounded down to 8), -1 no cap. */
  int max_blocks;
} p2pkit_grad_sync_opts_t;

/* The defaults: 0 / NULL everywhere. */
#define P2PKIT_GRAD_SYNC_OPTS_INIT \
  { sizeof(p2pkit_grad_sync_opts_t), P2PKIT_GRAD_SYNC_OPTS_VERSION, 0, 0, NULL, 0 }

/* Fill `opts` as P2PKIT_GRAD_SYNC_OPTS_INIT does. */
P2PKIT_API void p2pkit_grad_sync_opts_init(p2pkit_grad_sync_opts_t *opts);
/* `opts` NULL: defaults; else refused, in one line, when its size or
 * version is not this library's. The communicator must outlive the grad
 * sync. */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_create(p2pkit_comm_t comm,
                                                   const p2pkit_grad_sync_opts_t *opts,
                                                   p2pkit_grad_sync_t *gs_p);
/* Before build. buf NULL: p2pkit owns the gradient (a view into its bucket). */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_register(p2pkit_grad_sync_t gs, void *buf,
                                                     size_t count, p2pkit_dtype_t dtype);
/* Collective (every rank, same registrations): lay out, allocate and register
 * the buckets. */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_build(p2pkit_grad_sync_t gs);
/* Address of gradient `index` (registration order): its view in the bucket, or
 * the caller's buffer. After build. */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_grad(p2pkit_grad_sync_t gs, size_t index,
                                                 void **ptr_p);
/* Buckets after build, and each one's payload bytes and gradient count. */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_bucket_count(p2pkit_grad_sync_t gs, size_t *n_p);
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_bucket_info(p2pkit_grad_sync_t gs, size_t bucket,
                                                        size_t *bytes_p, size_t *ngrads_p);
/* The gradient at `buf` (a registered address) is complete once `stream`'s
 * work so far is. Twice in one step, or an unregistered address: an error. */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_mark_ready(p2pkit_grad_sync_t gs, const void *buf,
                                                       p2pkit_stream_t stream);
/* End of the step: `stream` waits for every bucket (gradients averaged and,
 * for caller buffers, copied back). A gradient never marked ready: an error
 * naming it (the step is reset; the other ranks' buckets will time out). */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_wait(p2pkit_grad_sync_t gs, p2pkit_stream_t stream);
/* Waits for the communication stream; frees the buckets (collective). */
P2PKIT_API p2pkit_status_t p2pkit_grad_sync_destroy(p2pkit_grad_sync_t gs);


/* ------------------------------------------------------- creation by id ---- */
/* Communicator creation as with NCCL (ncclGetUniqueId / ncclCommInitRank):
 * one process makes an id, hands it to every rank by any means (a file, an
 * MPI broadcast, torch.distributed's store), and each rank calls
 * p2pkit_comm_init_rank_config with the id, the rank count and its rank.
 * Everything the rendezvous needs comes from the id and the arguments;
 * nothing from the launcher's environment (RANK, WORLD_SIZE, MASTER_PORT,
 * P2PKIT_JOB_SECRET...), so a job may hold any number of communicators of
 * any subsets of its processes. */

#define P2PKIT_UNIQUE_ID_BYTES 128

/* Opaque; copy it as 128 bytes. It names the address and port rank 0
 * listens on and a random secret of this communicator, with a version and
 * a checksum (a damaged id is refused). */
typedef struct {
  char internal[P2PKIT_UNIQUE_ID_BYTES];
} p2pkit_unique_id_t;

/* Make an id in the process that will be rank 0. It opens the listening
 * socket at once, on an ephemeral port (kept open, as NCCL keeps its root
 * socket, until this process's rank 0 init with the id takes it over), at
 * the first address that binds of: MASTER_ADDR if set, this host's name
 * resolved, 127.0.0.1. The secret comes from getrandom(). An init that
 * fails before the rendezvous leaves the socket to a retry. An id made in
 * another process works too when that process has exited (rank 0 then binds
 * the port itself). At most 64 ids of a process may await their init. */
P2PKIT_API p2pkit_status_t p2pkit_get_unique_id(p2pkit_unique_id_t *id);

#define P2PKIT_CONFIG_VERSION 1

/* Options of p2pkit_comm_init_rank_config. Start from P2PKIT_CONFIG_INIT
 * (size and version let later versions add fields without breaking callers
 * built against this header); -1 means the default. */
typedef struct {
  size_t size;          /* sizeof(p2pkit_config_t) as the caller compiled it */
  unsigned int version; /* P2PKIT_CONFIG_VERSION */
  int device;           /* CUDA device of this rank; -1: the calling thread's current one */
  int timeout_s;        /* 1..86400 s for every wait for a peer; -1: P2PKIT_TIMEOUT, else 600 */
  int max_blocks;       /* grid cap (p2pkit_comm_set_max_blocks); -1: P2PKIT_MAX_BLOCKS */
  int reserved[11];     /* 0 */
} p2pkit_config_t;

#define P2PKIT_CONFIG_INIT \
  { sizeof(p2pkit_config_t), P2PKIT_CONFIG_VERSION, -1, -1, -1, {0} }

/* Rank `rank` of `nranks` of the communicator named by `id` (collective over
 * those ranks; `config` NULL: the defaults). Refuses, with one line, a
 * damaged id, a config of another size or a newer version, or nonzero
 * reserved fields. */
P2PKIT_API p2pkit_status_t p2pkit_comm_init_rank_config(p2pkit_comm_t *comm, int nranks,
                                                        const p2pkit_unique_id_t *id, int rank,
                                                        const p2pkit_config_t *config);

/* ------------------------------------------------- split and abort ---- */

/* NCCL_SPLIT_NOCOLOR: the rank joins no new communicator. */
#define P2PKIT_SPLIT_NOCOLOR (-1)

/* Split `comm` as ncclCommSplit does: collective over every rank of
 * `comm`; the ranks that give the same `color` (0 or more) form one new
 * communicator on their same GPUs, ranked by `key` (equal keys by their
 * rank in `comm`); P2PKIT_SPLIT_NOCOLOR joins none (*newcomm NULL).
 * `config` (NULL: the defaults): timeout_s and max_blocks, -1 for the
 * parent's; device must be -1 or the parent's. With a process per GPU the
 * new communicator's rendezvous is arranged over the parent's: each new
 * communicator's rank 0 listens on a port its kernel picks (on loopback
 * when all its ranks share its machine) with a fresh secret, announced over
 * the parent's authenticated rendezvous; nothing comes from the launcher's
 * environment, so the parent's job may hold any number of them. A new
 * communicator spanning hosts is hierarchical or NCCL's like any other;
 * one on one host takes p2pkit's own paths. One process driving every GPU
 * (p2pkit_comm_init_all): call it for each rank in turn; each newcomm is
 * set when the last rank's call returns. The new communicators are
 * independent of `comm` (destroy each; either may go first). */
P2PKIT_API p2pkit_status_t p2pkit_comm_split(p2pkit_comm_t comm, int color, int key,
                                             const p2pkit_config_t *config,
                                             p2pkit_comm_t *newcomm);

/* Give `comm` up without waiting for anyone, as ncclCommAbort: returns
 * within about two seconds even when peers are dead or hang, leaving what
 * has not finished by then (NCCL's own abort among it) to finish on a
 * thread of its own. The ranks
 * waiting on this one fail at once (their kernels see its abort word: the
 * call's error is P2PKIT_ERR_REMOTE, "gave up"), or at their timeout where
 * they cannot see it; NCCL's communicators under it are aborted. Frees
 * `comm` (do not use it after), its memory once its GPU is idle (never, on
 * a GPU that does not become idle). For a failed job, not for teardown:
 * p2pkit_comm_destroy waits for the peers. */
P2PKIT_API p2pkit_status_t p2pkit_comm_abort(p2pkit_comm_t comm);

/* Write this rank's desync report of `comm` now: its last calls
 * (P2PKIT_TRACE_RING of them: each one's number, collective, type, count,
 * root or peer, operation, path, stream, enqueue time, whether it was
 * launched), its host, process, GPU and communicator, its asynchronous
 * error, and which of its peers' processes on this machine are alive, as
 * a new file (0600) in P2PKIT_TRACE_DIR; `p2pkit trace DIR` reads every
 * rank's and names the rank and the call that went wrong
 * (docs/desync.md). `reason` (NULL: none) is written with it. For a
 * watchdog that found the job stuck or failed: safe while another thread
 * makes calls on `comm` (never while one destroys it); no wait on the GPU
 * or on any peer. p2pkit itself writes one on a timeout, an asynchronous
 * error or p2pkit_comm_abort, and on P2PKIT_TRACE_SIGNAL.
 * P2PKIT_ERR_UNSUPPORTED when P2PKIT_TRACE_DIR=off; P2PKIT_ERR_IO naming
 * the directory or file when it cannot be written (another user's
 * directory, one every user may write without the sticky bit, a full
 * disk), with nothing left behind. */
P2PKIT_API p2pkit_status_t p2pkit_comm_dump_trace(p2pkit_comm_t comm, const char *reason);

/* ----------------------------------------------------------------- cli ---- */

/* The `p2pkit` command (docs/cli.md) with main's arguments (argv[1] the
 * subcommand); returns its exit status (0 ok, 1 failure, 2 usage or no
 * GPU). The installed program is a main() around it, so the command runs
 * the library's one copy of the code. It writes to stdout and stderr; the
 * program ignores SIGPIPE so that a closed pipe is a failed write (exit 1). */
P2PKIT_API int p2pkit_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif /* P2PKIT_H */
