/* The communicator as the coll files see it. */
#ifndef P2PK_COLL_H
#define P2PK_COLL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/algo.h"
#include "coll/bootstrap.h"
#include "coll/coll_dev.h"
#include "coll/dmbox.h"
#include "coll/plan.h"
#include "p2pkit.h"

/* One rank's rendezvous settings (p2pkit_comm_init_rank): each field from
 * the caller's options where set, else from the launcher's environment
 * (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or
 * mpirun's OMPI_COMM_WORLD_*), else the defaults (127.0.0.1:29500); the
 * secret from the options, P2PKIT_JOB_SECRET, TORCHELASTIC_RUN_ID,
 * PMIX_NAMESPACE or OMPI_MCA_ess_base_jobid, in that order, else none (a
 * warning above one rank). Fails, naming the field, when the rank or count
 * is unknown or out of range, or the options and the launcher disagree. */
typedef struct {
  int nranks, rank, device, port, timeout_s;
  const char *addr;
  const char *secret;
} p2pk_rank_opts;
p2pkit_status_t p2pk_resolve_opts(const p2pkit_comm_opts_t *o, p2pk_rank_opts *r);

/* A registered user buffer: id is its position in the collective order of
 * registrations, the same on every rank. */
typedef struct p2pk_reg {
  int id;
  char *buf;
  size_t bytes;
  char *peer[P2PK_COLL_MAX_RANKS];     /* each rank's buffer, as this process maps it */
  void *ipc_base[P2PK_COLL_MAX_RANKS]; /* opened IPC mappings to close (process per GPU) */
  struct p2pk_reg *next;
} p2pk_reg;

/* One process driving several GPUs: the communicators made by one
 * p2pkit_comm_init_all share this; the last destroy frees it. */
typedef struct p2pk_group {
  pthread_mutex_t lock;
  int n, live;
  struct p2pkit_comm *comms[P2PK_COLL_MAX_RANKS];
  char *stage; /* staged: cudaHostAlloc'ed region, portable and mapped */
} p2pk_group;

#define P2PK_PTR_CACHE 8
#define P2PK_SCE_EVENTS (1 + 3 * P2PK_SCE_DEPTH_MAX) /* start; d2h, h2d, reduce per slot */
#define P2PK_LOGGED_CE (1ULL << 63)
#define P2PK_CEP_STREAMS 5 /* the copy-engine paths' one-thread kernel streams (ce_p2p_mp.c) */
#define P2PK_CEP_EVKINDS 5 /* kinds of event between them and the copy streams, per slot */
#define P2PK_CEP_TRACE_MAX 96 /* timing events of one traced call (P2PKIT_CEP_TRACE) */

struct p2pk_worker;
struct p2pkit_comm {
  int rank, nranks, device;
  struct p2pk_worker *worker; /* launch_pool.c: its launch thread, or NULL */
  int launch_threads;         /* one process: P2PKIT_LAUNCH_THREADS, read at init */
  int multiproc; /* 1: process per GPU (bootstrap + IPC) */
  int staged;    /* 1: host shared memory instead of P2P, for every pair */
  uint64_t timeout_ns;
  size_t buffer_bytes;
  p2pk_algo_table table;
  p2pk_algo_force force;
  int grid_cap; /* this call's kernel grid cap (p2pk_all_reduce_capped), else 0 */
  /* Every kernel's grid cap over P2P (P2PKIT_MAX_BLOCKS at init, then
   * p2pkit_comm_set_max_blocks; 0: none). p2pk_comm_grid_cap joins it with
   * grid_cap. */
  int max_blocks;
  p2pk_algo_geom geom;
  p2pk_layout lay;
  char *scratch;                         /* my device scratch */
  char *peer[P2PK_COLL_MAX_RANKS];       /* every rank's scratch as mapped here */
  void *peer_ipc[P2PK_COLL_MAX_RANKS];   /* IPC mappings to close */
  char *stage;                           /* host staging region (all ranks' parts) */
  size_t stage_bytes;
  int stage_registered;                  /* cudaHostRegister'ed by this comm */
  int32_t *host_err;                     /* cudaHostAlloc'ed, mapped: kernel error words */
  p2pk_boot *boot;
  p2pk_group *group;
  p2pk_reg *regs;
  int next_reg_id;
  p2pk_ar_args tmpl; /* kernel arguments every call starts from */
  const void *ok_ptr[P2PK_PTR_CACHE]; /* device pointers already checked */
  int ok_next;
  uint64_t logged; /* (collective, algorithm, protocol) already logged at INFO, a bit each;
                     P2PK_LOGGED_CE: send/recv over the copy engine */
  /* Copy-engine broadcast (p2p.c, one process): made on first use. */
  cudaStream_t ce_side;  /* root: the copies to the peers, beside its own copy (and,
                            under capture on the kernel path, its own copy beside the
                            kernel: allreduce.c); staged all-reduce: the copies to host memory */
  cudaEvent_t ce_ev[3];  /* [0] receiver ready, [1] root start, [2] root done (both uses) */
  int bcast_ce_logged;
  /* Copy-engine staged all-reduce (ce_staged.c, both modes): made on first use. */
  cudaStream_t sce_h2d;                  /* the copies from host memory */
  cudaEvent_t sce_ev[P2PK_SCE_EVENTS];   /* see ce_staged.c */
  char *sce_buf;                         /* device: peers' chunks, [peer slot][depth] */
  size_t sce_buf_bytes;
  int sce_logged;
  unsigned ce_logged; /* copy engines over P2P (ce_p2p.c): collectives already logged, a bit each */
  uint64_t ce_q;      /* ce_p2p.c: chunks so far (chunk q lands in slot q % depth) */
  size_t ce_layout;   /* ce_p2p.c: the last call's chunk bytes x depth (its slots' layout) */
  size_t ce_min[P2PK_COLL_KINDS]; /* p2pk_ce_min per collective, fixed at init (no lookups per call) */
  uint64_t sce_seq; /* process per GPU: copy-engine chunks so far (the same on every rank) */
  int sce_depth;    /* chunks in flight (P2PKIT_STAGED_CE_DEPTH), fixed at init */
  /* Copy engines over P2P, process per GPU (ce_p2p_mp.c): chunks pushed
   * to each peer and received from it so far (the peer counts the same;
   * they pick the slots, turn by turn across calls). */
  uint64_t cep_sent[P2PK_COLL_MAX_RANKS], cep_recvd[P2PK_COLL_MAX_RANKS];
  size_t cep_p2p_min; /* send/recv over the copy engines from this size (0: never) */
  size_t sendrecv_ce_min; /* one process, eagerly: P2PKIT_SENDRECV_CE_MIN, fixed at init (p2p.c) */
  size_t bcast_self_ce; /* under capture, a broadcast root out of place on the kernel path
                           copies its own buffer by copy engine from this size (0: never) */
  int bcast_self_logged; /* that path's INFO line was written */
  size_t ts_rooted_min; /* more than 2 ranks over P2P: broadcast and reduce from this size take
                           the rooted two-shot (P2PKIT_ROOTED_TWOSHOT_MIN; 0: never) */
  size_t cep_direct_p2p_min; /* one process under capture, both ends in a group: straight in */
  /* Collectives through the landing slots from these sizes (0: never):
   * with a process per GPU ce_min[] as well; one process under capture only. */
  size_t cep_min[P2PK_COLL_KINDS];
  int cep_cap;        /* the call being enqueued is under graph capture */
  int cep_cap_ok;     /* the landing slots may run under capture (p2pk_ce_waits_ok):
                         else the kernels there */
  /* Claims of the second slot halves since the other claim stream last
   * started at a call's START: whole pushes on W, all-reduce results on W2
   * (start() in ce_p2p_mp.c says why). */
  int cep_w_rbusy, cep_w2_rbusy;
  /* Its one-thread kernels' streams and the events between them and the
   * copy streams ([kind][chunk % depth]; ce_p2p_mp.c), made at init with
   * the landing slots (the staged path, ce_staged.c, makes its own on
   * first use). */
  cudaStream_t cep_stream[P2PK_CEP_STREAMS];
  cudaEvent_t cep_ev[P2PK_CEP_EVKINDS][P2PK_SCE_DEPTH_MAX];
  unsigned cep_logged;
  int cep_memops; /* posts as stream memory operations: 0 not decided yet, 1 yes, 2 no (kernels) */
  /* Process per GPU over P2P: send/recv straight into registered receive
   * buffers (ce_p2p_mp.c, dmbox.h): the receivers' descriptions and the
   * decisions in host shared memory; calls over the copy engines per peer
   * so far (both ends count alike); how long a host waits for its peer
   * (dmb_wait_ns), and per peer how many calls still wait not at all after
   * one that waited in vain (as sender, as receiver). */
  void *dmb;
  size_t dmb_bytes;
  int dmb_on;
  uint64_t dmb_wait_ns;
  uint64_t dmb_sent[P2PK_COLL_MAX_RANKS], dmb_recvd[P2PK_COLL_MAX_RANKS];
  uint32_t dmb_rest[P2PK_COLL_MAX_RANKS], dmb_rrest[P2PK_COLL_MAX_RANKS];
  uint64_t dmb_missed; /* host waits in vain so far (the first few logged) */
  uint64_t dmb_wait_max_ns, dmb_wait_ns_sum; /* host waits for peers: the longest, all */
  uint64_t dmb_direct, dmb_slots; /* sends that went straight in / through the slots */
  uint64_t dmb_rhow[2]; /* receives into a registered buffer: [0] the slots, [1] straight in */
  uint64_t dmb_why[P2PK_DMB_WHY_COUNT]; /* sends through the slots, by why (P2PK_DMB_WHY_*) */
  /* P2PKIT_SENDRECV_MAP (recvmap.c): receives into buffers not registered
   * may go straight in, their allocations shared on demand; the state
   * (the receiver's handles, the sender's mappings) made on first use. */
  int dmb_map;
  struct p2pk_map *dmb_map_state;
  uint64_t dmb_mapped; /* sends straight into a buffer mapped on demand */
  /* P2PKIT_CEP_TRACE (process per GPU, fixed at init): timing events of the
   * last call over the landing slots and what each marks; its timeline is
   * logged at the next such call or at destroy. */
  int cep_trace, cep_tr_on, cep_tr_n;
  uint64_t cep_tr_calls;
  char cep_tr_name[16];
  cudaEvent_t cep_tr_ev[P2PK_CEP_TRACE_MAX];
  char cep_tr_what[P2PK_CEP_TRACE_MAX][12];
};

/* Run one list of steps on `stream` (ce_p2p_mp.c): a list of posts only,
 * when `memops` allows, as stream memory operations (cuStreamWriteValue64,
 * resolved at run time through the runtime; the GPU's front end writes
 * them, no multiprocessor is needed); anything else, or when those are
 * unavailable or P2PKIT_CEP_MEMOPS=0, as one launch of the one-thread step
 * kernel. */
cudaError_t p2pk_cep_run(struct p2pkit_comm *c, const p2pk_cep_steps *st, int memops,
                         cudaStream_t stream);
/* Whether p2pk_cep_run writes posts as memory operations (decided on first use). */
int p2pk_cep_memops(struct p2pkit_comm *c);

/* Streams and events of the copy-engine paths, made on first use (on the
 * current GPU). */
static inline cudaError_t p2pk_lazy_event(cudaEvent_t *ev) {
  return *ev ? cudaSuccess : cudaEventCreateWithFlags(ev, cudaEventDisableTiming);
}
static inline cudaError_t p2pk_lazy_stream(cudaStream_t *s) {
  return *s ? cudaSuccess : cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}

/* A collective waiting in a group for a copy-engine path (p2p.c; root 0
 * but for broadcast, op SUM where the collective has none). */
typedef struct {
  int kind; /* P2PK_COLL_* */
  struct p2pkit_comm *c;
  const void *send;
  void *recv;
  size_t count, bytes;
  p2pkit_dtype_t dtype;
  p2pkit_redop_t op;
  int root;
  p2pkit_stream_t stream;
} p2pk_ce_pending;

/* ce_staged.c: set[r] is rank r's call of one all-reduce (all checked
 * alike, every rank of one process's staged communicator). */
p2pkit_status_t p2pk_staged_ce_allreduce(p2pk_ce_pending *const *set, int n);
/* The same for a process-per-GPU staged communicator, on its own (this
 * rank's GPU current; not under stream capture); see ce_staged.c. */
cudaError_t p2pk_staged_ce_allreduce_mp(struct p2pkit_comm *c, const void *send, void *recv,
                                        size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op,
                                        cudaStream_t stream);
/* Bytes of each copy-engine slot a process-per-GPU staged communicator's
 * host part holds (0: none, the copy engines are off); comm.c lays them out. */
size_t p2pk_sce_slot_bytes(void);
/* Chunks in flight per peer: P2PKIT_STAGED_CE_DEPTH within 2..P2PK_SCE_DEPTH_MAX. */
int p2pk_sce_depth(void);
/* Elements per chunk of the copy-engine staged all-reduce: chunk_bytes
 * rounded down to 16 bytes, whole elements, at least one. */
size_t p2pk_sce_chunk_elems(size_t chunk_bytes, size_t es);
/* The copy-engine paths' side and h2d/gather streams, events and device
 * buffer (at least `need` bytes) of one rank, made on first use; makes its
 * GPU current (ce_staged.c). */
cudaError_t p2pk_ce_prepare(struct p2pkit_comm *c, size_t need);
/* sce_ev[P2PK_CE_EV_START]: where a rank's stream stood at the call. */
#define P2PK_CE_EV_START 0
/* One process, set[r] rank r's call: p2pk_ce_prepare every rank, record its
 * START on its stream, and make every rank's h2d/gather stream wait for
 * every rank's START (no copy touches a buffer still in use), its side
 * stream too unless side_own (then only for its own: a side stream that
 * only reads its rank's input and writes landing slots, which the caller
 * guards, need not wait for the peers to finish their last call).
 * *bad: the rank a failure came from. */
cudaError_t p2pk_ce_start(p2pk_ce_pending *const *set, int n, size_t need, int side_own, int *bad);
/* Rank c's copy-engine device buffer: slot s (of `depth`) of the chunks of
 * cb bytes that come from rank src != c->rank. */
static inline char *p2pk_ce_land(const struct p2pkit_comm *c, int src, int depth, int s, size_t cb) {
  const int n = c->nranks;
  return c->sce_buf + ((size_t)((src - c->rank - 1 + n) % n) * (size_t)depth + (size_t)s) * cb;
}
/* The local reduce kernel on `stream` with the copy-engine paths' grid (a
 * block per 64 KiB, at most one per multiprocessor and at most `cap` when
 * cap > 0; ce_staged.c). */
cudaError_t p2pk_ce_local_reduce(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                 const p2pk_lr_args *la, int cap, cudaStream_t stream);
/* out = src[0] op ... op src[n-1] (src[me] this rank's input), lb bytes,
 * on `stream` (a local kernel; ce_staged.c). */
cudaError_t p2pk_ce_reduce_chunk(const struct p2pkit_comm *c, p2pkit_dtype_t dtype,
                                 p2pkit_redop_t op, const char *const *src, char *out, size_t lb,
                                 cudaStream_t stream);
/* ce_p2p.c: set[r] is rank r's call of one collective `kind` (all checked
 * alike, every rank of one process's communicator, none capturing): over
 * the copy engines (through host memory for a staged all-reduce). */
p2pkit_status_t p2pk_ce_collective(p2pk_ce_pending *const *set, int n, int kind);
/* Smallest share (bytes per rank) of `kind` that takes the copy engines
 * on this communicator (one process: waiting in a group; process per GPU:
 * at once, when its slots exist); 0: never (a collective without a
 * copy-engine path in this mode). */
size_t p2pk_ce_min(const struct p2pkit_comm *c, int kind);
/* The GPU's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS, else CUDA's 8). */
int p2pk_ce_queues(void);
/* Whether the copy-engine paths that wait on other ranks' flags on
 * several streams may run (eagerly, or under capture): P2PK_CE_QUEUES
 * hardware queues, and under capture at most 2 ranks. */
int p2pk_ce_waits_ok(const struct p2pkit_comm *c, int capture);
#define P2PK_CE_QUEUES 8 /* hardware queues those paths need */
/* The bootstrap's message tags of comm.c and reg.c. */
enum { P2PK_TAG_INFO = 1, P2PK_TAG_P2P = 2, P2PK_TAG_HANDLES = 3, P2PK_TAG_MAPPED = 4,
       P2PK_TAG_REG = 5, P2PK_TAG_DEREG = 6, P2PK_TAG_DESTROY = 7 };
/* reg.c: close and free every registration of c (destroy). */
void p2pk_reg_free_all(struct p2pkit_comm *c);
/* reg.c: this rank's registration holding [buf, buf + bytes), or the one
 * numbered id (p2pk_reg.id); NULL when none. */
const p2pk_reg *p2pk_reg_holding(const struct p2pkit_comm *c, const char *buf, size_t bytes);
const p2pk_reg *p2pk_reg_numbered(const struct p2pkit_comm *c, uint64_t id);
/* c->ce_min[] from p2pk_ce_min, at init and when the forced settings change. */
void p2pk_ce_min_fill(struct p2pkit_comm *c);
/* The landing-slot paths' settings, read once at init after
 * p2pk_ce_min_fill (trace, straight in and its wait): a later
 * change of the forced settings keeps them (re-reading them there would
 * undo a wait a caller had set on the communicator). */
void p2pk_cep_settings(struct p2pkit_comm *c);
/* recvmap.c (P2PKIT_SENDRECV_MAP). The receiver: describe the allocation
 * holding buf (offset, id, size, IPC handle) into *d; 1 if it did, 0 when
 * the setting is off or it cannot be shared. The sender: where peer t's
 * described receive lands in this process (mapping its allocation the
 * first time), or NULL: the slots. How many peer allocations it maps; and
 * closing them all (destroy, after the GPU is idle). */
int p2pk_map_describe(struct p2pkit_comm *c, const char *buf, size_t bytes, p2pk_dmb_desc *d);
char *p2pk_map_peer(struct p2pkit_comm *c, int t, const p2pk_dmb_desc *d, size_t bytes);
int p2pk_map_count(const struct p2pkit_comm *c);
void p2pk_map_free(struct p2pkit_comm *c);
/* Where rank r's shard of an all-reduce of `count` elements of es bytes
 * over n ranks lies: shards of equal length (a multiple of 256 bytes) in
 * rank order, the last one shorter or empty (*off = count, *len = 0). */
void p2pk_ce_shard(size_t count, int n, size_t es, int r, size_t *off, size_t *len);
/* What rank t receives of a copy-engine collective `kind` of `count`
 * elements (es bytes) with `root`: all-reduce its shard (p2pk_ce_shard),
 * reduce-scatter its share (t x count, count elements), reduce the whole
 * message at the root, broadcast the whole message at every rank but the
 * root; nothing otherwise (*off = 0, *len = 0). */
void p2pk_ce_owned(int kind, size_t count, int n, size_t es, int root, int t, size_t *off,
                   size_t *len);
/* Elements of chunk k (K each) of len elements; 0 past its end. */
static inline size_t p2pk_ce_part(size_t len, size_t k, size_t K) {
  return len <= k * K ? 0 : len - k * K < K ? len - k * K : K;
}
/* The landing slots' total per rank: P2PKIT_CE_LAND (16 MiB - 4 GiB), else
 * P2PK_CE_LAND_DEFAULT. 192 MiB: on 2 GPUs two 96 MiB slots. Twice that
 * made send/recv with a process per GPU slower at 256 - 512 MiB and no
 * faster at 1 GiB, and only the one-process graph all-reduce at 1 GiB
 * gained (~1.4%, with 128 MiB chunks; docs/decisions/copy-engine-thresholds.md). */
#define P2PK_CE_LAND_DEFAULT ((size_t)192 << 20)
size_t p2pk_ce_land_max(void);
/* Chunk bytes of the copy-engine all-reduce and reduce-scatter over P2P
 * for a shard of this size on n ranks with `depth` chunks in flight:
 * P2PKIT_CE_CHUNK if set, else half the shard within 16..64 MiB; either
 * way the landing slots ((n - 1) x depth chunks a rank) stay within
 * p2pk_ce_land_max(). */
size_t p2pk_ce_chunk_bytes(size_t shard_bytes, int n, int depth);
/* Chunks in flight per peer of the copy-engine collectives over P2P:
 * P2PKIT_CE_DEPTH within 2..P2PK_SCE_DEPTH_MAX. */
int p2pk_ce_depth(void);

/* ce_p2p_mp.c: the copy-engine collectives over P2P through the landing
 * slots (all-reduce, reduce-scatter, reduce, broadcast) with a process per
 * GPU, eagerly and under capture, and with one process under capture, on
 * this rank's GPU (current); `capturing`: whether `stream` is being
 * captured (the caller asked already). */
cudaError_t p2pk_cep_collective(struct p2pkit_comm *c, int kind, const void *send, void *recv,
                                size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                                cudaStream_t stream, int capturing);
/* p2p.c: 1 while ce_flush launches a call that must take the kernel (some
 * of its ranks' streams capture and some do not). */
int p2pk_group_kernel_only(void);
/* Is the calling thread inside p2pkit_group_start / _end? */
int p2pk_group_open(void);
/* One process, every rank's call of an all-reduce or broadcast in set[]
 * (checked alike), every stream capturing: the copy engines push straight
 * into the peers' outputs (all-reduce: the results; the contributions go
 * through the landing slots), handshakes through rdy/fin flags a graph can
 * replay. */
p2pkit_status_t p2pk_cep_direct(p2pk_ce_pending *const *set, int n, int kind);
/* Send/recv of one group over the copy engines, process per GPU: sends
 * on the side stream, receives on `stream` (this rank's GPU current). */
typedef struct {
  int send, peer;
  char *buf;
  size_t bytes;
  /* One process under capture with both ends in one group: the other
   * end's buffer (a send pushes straight into it; a receive's is only
   * tested for NULL), else NULL (the landing slots). */
  char *peer_buf;
} p2pk_cep_xfer;
cudaError_t p2pk_cep_p2p(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops,
                         cudaStream_t stream);
/* Bytes of each landing slot a communicator over P2P of n ranks keeps in its scratch for `depth` chunks in flight per peer
 * (P2PKIT_CE_CHUNK, at most and by default p2pk_ce_land_max() / ((n - 1) x
 * depth), rounded up to 4 KiB); 0 when `any` is 0 (no copy-engine
 * collective is on). */
size_t p2pk_cep_slot_bytes(int n, int depth, int any);
/* Landing slots per peer: P2PKIT_CE_DEPTH if set
 * (2..P2PK_SCE_DEPTH_MAX), else 2. */
int p2pk_cep_depth(void);
/* Send/recv through the landing slots from this size (P2PKIT_SENDRECV_CE_MIN
 * when set, else its process-per-GPU default; 0: never). */
size_t p2pk_cep_p2p_min(const struct p2pkit_comm *c);
/* One process under capture, a send and its receive in one group: the
 * copy engine pushes straight into the receive buffer from this size
 * (P2PKIT_SENDRECV_CE_MIN when set, else 64 MiB; 0: never). */
size_t p2pk_cep_direct_p2p_min(const struct p2pkit_comm *c);
/* Would a communicator over P2P with these settings use the landing-slot
 * path (ce_p2p_mp.c: a process per GPU, or one process under capture), so
 * it needs landing slots? */
int p2pk_cep_wanted(const struct p2pkit_comm *c);
/* The threshold of `kind` from the settings alone (whether or not the
 * landing slots exist), which every rank must share. */
size_t p2pk_ce_min_setting(const struct p2pkit_comm *c, int kind);
/* The threshold of `kind` through the landing slots (ce_p2p_mp.c) from the
 * settings alone: with a process per GPU p2pk_ce_min_setting's but for the
 * broadcast under capture; one process (under capture only) the
 * under-capture defaults (cap_default in ce_p2p.c), all-reduce and
 * broadcast straight into the peers' outputs. */
size_t p2pk_cep_min_setting(const struct p2pkit_comm *c, int kind);
/* The landing-slot path's streams and events, made at init so that no
 * call under capture creates them. */
cudaError_t p2pk_cep_prepare(struct p2pkit_comm *c);
/* P2PKIT_CEP_TRACE: log the last traced call's timeline if one is pending
 * (waits for it), then forget it. */
void p2pk_cep_trace_flush(struct p2pkit_comm *c);
void p2pk_cep_log_flags(struct p2pkit_comm *c);

/* layout.c: scratch layout for n ranks within `buffer` bytes per rank.
 * P2PKIT_ERR_INVALID_ARGUMENT when the buffer is too small for n ranks. */
p2pkit_status_t p2pk_layout_compute(int nranks, size_t buffer, int staged, int boxes,
                                    p2pk_layout *lay, size_t *ll_cap_p);
/* Over P2P: end the scratch with (n - 1) x depth landing slots of `slot`
 * bytes (none when slot is 0), ce_p2p_mp.c's. */
void p2pk_layout_add_cep(p2pk_layout *lay, int n, int depth, size_t slot);
/* Process per GPU, staged: end each rank's part of the host region with
 * `depth` copy-engine slots of `slot` bytes (none when slot is 0). */
void p2pk_layout_add_ce(p2pk_layout *lay, int depth, size_t slot);
/* Mailboxes per peer: P2PKIT_COLL_MAILBOXES, else 2 per multiprocessor (a
 * block uses 2, so the grid can fill the GPU with the largest mailboxes). */
int p2pk_mailboxes_for(int sm_count);
/* allreduce.c: the error a kernel left behind, as a status (SUCCESS if none). */
p2pkit_status_t p2pk_comm_async_status(struct p2pkit_comm *comm);
/* allreduce.c, shared by every collective and send/recv: */
/* Communicator, type, operation (when has_op) and count; *es_p the element size. */
p2pkit_status_t p2pk_coll_check_args(struct p2pkit_comm *c, const char *name, p2pkit_dtype_t dtype,
                                     int has_op, p2pkit_redop_t op, size_t count, size_t *es_p);
/* Device memory of this rank's GPU (cached); *direct_ok: plain device memory. */
p2pkit_status_t p2pk_coll_check_ptr(struct p2pkit_comm *c, const void *p, const char *what,
                                    int *direct_ok);
/* Make the communicator's GPU current (*prev: the caller's), and back,
 * turning a launch error into a status. */
p2pkit_status_t p2pk_coll_enter(struct p2pkit_comm *c, const char *name, int *prev);
p2pkit_status_t p2pk_coll_leave(struct p2pkit_comm *c, const char *name, int prev, cudaError_t e);
/* One collective (P2PK_COLL_*): checks, plan, choice, one launch. */
p2pkit_status_t p2pk_coll_launch(struct p2pkit_comm *c, int kind, const void *sendbuf,
                                 void *recvbuf, size_t count, p2pkit_dtype_t dtype,
                                 p2pkit_redop_t op, int root, p2pkit_stream_t stream);
/* p2p.c: a collective inside a group that may go over the copy engines
 * (one process, at least p2pk_ce_min(c, kind) bytes per rank) waits in the
 * group's queue; returns 1 when it was queued. Every other collective first
 * calls p2pk_group_collective(), which launches what the queue holds, so
 * launches keep the callers' order. */
int p2pk_group_defer(struct p2pkit_comm *c, int kind, const void *sendbuf, void *recvbuf,
                     size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root, size_t bytes,
                     p2pkit_stream_t stream);
p2pkit_status_t p2pk_group_collective(void);
/* launch_pool.c: launches from a thread per GPU. A job is one deferred
 * launch of a one-process communicator inside a group: a collective's
 * kernel (p2pk_coll_launch) or one communicator's sends and receives. */
typedef struct p2pk_job {
  struct p2pkit_comm *c;
  p2pkit_status_t (*run)(const struct p2pk_job *j);
  int kind, root, grid_cap;
  const void *send;
  void *recv;
  size_t count;
  p2pkit_dtype_t dtype;
  p2pkit_redop_t op;
  p2pkit_stream_t stream;
  const void *ops; /* send/recv: the operations (the caller's, alive until p2pk_jobs_run returns) */
  int nops;
} p2pk_job;
/* May c's launches wait to be made by a thread per GPU? (a one-process
 * communicator of several GPUs, P2PKIT_LAUNCH_THREADS, not while jobs
 * run). p2p.c adds the group's rules and the stream's capture status
 * (p2pk_group_job_ok). */
int p2pk_jobs_ok(const struct p2pkit_comm *c);
/* Queue a job (runs the queue first when it is full). */
p2pkit_status_t p2pk_job_defer(const p2pk_job *j);
/* Make every queued job of this thread: the first communicator's here, the
 * others' on their workers at once; returns when all are made, with the
 * first failure. */
p2pkit_status_t p2pk_jobs_run(void);
int p2pk_jobs_pending(void);
/* 1 while p2pk_jobs_run makes this thread's jobs (nothing is deferred then). */
int p2pk_jobs_running(void);
/* c's worker: -1 none, 0 awake (spinning or working), 1 asleep. */
int p2pk_worker_state(const struct p2pkit_comm *c);
/* Stop and free c's worker (comm_free). */
void p2pk_worker_stop(struct p2pkit_comm *c);
/* p2p.c: inside a group (not while its queues are being launched),
 * p2pk_jobs_ok, and `stream` not capturing (under capture the launch cost
 * is paid once, at capture: the calling thread and capture's thread rules
 * stay out of it). */
int p2pk_group_job_ok(const struct p2pkit_comm *c, p2pkit_stream_t stream);
/* Tests and the sweep: replace the environment's overrides for this comm. */
void p2pk_comm_set_force(struct p2pkit_comm *comm, const p2pk_algo_force *f);
/* The grid cap of a kernel launched now over P2P: the smaller of the call's
 * (grid_cap) and the communicator's (max_blocks) that are set; 0: none. */
static inline int p2pk_comm_grid_cap(const struct p2pkit_comm *c) {
  if (c->staged) return 0;
  const int a = c->grid_cap, b = c->max_blocks;
  return a > 0 && (b <= 0 || a < b) ? a : b > 0 ? b : 0;
}

/* p2pkit_all_reduce with its kernel's grid capped at max_blocks (> 0; a
 * grid setting given wins): every rank must pass the same cap (the call's
 * header carries the grid). For work that shares the GPU (grad_sync.c). */
p2pkit_status_t p2pk_all_reduce_capped(const void *sendbuf, void *recvbuf, size_t count,
                                       p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                       p2pkit_stream_t stream, int max_blocks);
/* Half c's multiprocessors rounded down to 8 (at least 8): grad sync's
 * default cap. */
int p2pk_comm_half_grid(const struct p2pkit_comm *c);
/* What a collective (P2PK_COLL_*) of `block` bytes per rank runs: the table
 * and settings, then the grid rule (two blocks per SM for large calls). */
void p2pk_coll_choose(const struct p2pkit_comm *c, int kind, size_t block, p2pk_algo_choice *ch);
/* Does a broadcast or reduce of `block` bytes take the rooted two-shot
 * (coll_dev.h's p2pk_ts_shard)? P2PKIT_ALGO=twoshot: always (any rank
 * count; P2PKIT_ALGO otherwise: never); else on more than 2 ranks over
 * P2P from P2PKIT_ROOTED_TWOSHOT_MIN. */
int p2pk_coll_rooted_twoshot(const struct p2pkit_comm *c, int kind, size_t block);
/* The choices of each call, from the communicator's fixed state alone (no
 * CUDA; the CPU tests dump them for every collective, mode and size): */
/* comm.c: what the choices read from a communicator, from its rank count,
 * transport (staged), mode (multiproc), settings (force, table; group and
 * launch_threads for one process) and the GPU's multiprocessors: the
 * layout, the copy-engine thresholds and the geometry, but LL128's
 * occupancy (geom.ll128_per_sm: CUDA's occupancy API at init). */
p2pkit_status_t p2pk_comm_derive(struct p2pkit_comm *c, int sms, size_t buffer);
/* allreduce.c: does a call not waiting in a group's queue take a copy-engine
 * path (process per GPU: ce_staged.c or ce_p2p_mp.c; one process under
 * capture: the landing slots)? `capturing`: its stream is being captured. */
int p2pk_coll_ce_ok(const struct p2pkit_comm *c, int kind, size_t block, int capturing);
/* The kernel's algorithm, protocol and grid of a call with plan pl. */
void p2pk_coll_kernel_choice(const struct p2pkit_comm *c, int kind, size_t block,
                             const p2pk_coll_plan *pl, p2pk_algo_choice *ch);
/* Does a broadcast root out of place on the kernel path, under capture,
 * copy its own buffer by copy engine beside the kernel? */
int p2pk_coll_self_ce(const struct p2pkit_comm *c, int kind, size_t block);
/* p2p.c: does a send or receive of `bytes` go through the landing slots
 * (process per GPU)? Its kernel grid otherwise (per operation, capped so
 * that every block of both ends is resident). The smallest pair of one
 * process, both ends in one group, that the copy engine moves (capture
 * 0: by events; 1: straight into the receive buffer; 0: never). */
int p2pk_p2p_slots(const struct p2pkit_comm *c, size_t bytes, int capture);
void p2pk_p2p_op_choice(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *ch);
size_t p2pk_p2p_pair_min(const struct p2pkit_comm *c, int capture);
/* p2p.c: does a collective of one process in a group wait for its group's
 * end (the copy engines)? And there, with every rank's call of it (whole),
 * `cap` of the nr ranks' streams capturing: which way it goes. */
int p2pk_group_waits(const struct p2pkit_comm *c, int kind, size_t bytes);
enum { P2PK_GROUP_EVENTS, P2PK_GROUP_DIRECT, P2PK_GROUP_KERNELS, P2PK_GROUP_EACH };
int p2pk_group_route(const p2pk_ce_pending *a, int whole, int cap, int nr, int in_place);
/* What the next all-reduce of `bytes` would run (p2pk_coll_choose). */
void p2pk_comm_choose(const struct p2pkit_comm *comm, size_t bytes, p2pk_algo_choice *c);

#endif
