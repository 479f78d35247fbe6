/* SPDX-License-Identifier: BSD-3-Clause */
/* The communicator as the coll files see it: what every path shares (rank,
 * device, layout, scratch, peers' mappings, kernel argument template) and,
 * per path, an opaque state only that path reads (path.h). */
#ifndef P2PK_COLL_H
#define P2PK_COLL_H

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "coll/select/algo.h"
#include "coll/rdv/bootstrap.h"
#include "coll/kernels/coll_dev.h"
#include "coll/rdv/hosts.h"
#include "coll/select/nccl_use.h"
#include "coll/kernels/plan.h"
#include "coll/select/select.h"
#include "nccl/nccl_dl.h"
#include "p2pkit.h"

/* One rank's rendezvous settings (p2pkit_comm_init_rank): each field from
 * the caller's options where set, else from the launcher's environment
 * (torchrun's RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT, or
 * mpirun's OMPI_COMM_WORLD_*), else the defaults (127.0.0.1:29500); the
 * secret from the options, else P2PKIT_JOB_SECRET, else none ("": loopback
 * only); a launcher's run id (TORCHELASTIC_RUN_ID, PMIX_NAMESPACE,
 * OMPI_MCA_ess_base_jobid) never is one. What the options set always wins over the
 * launcher. Fails, naming the field, when the rank or count is unknown or
 * out of range, or the rank is unset while the count set is not the
 * launcher's (its RANK would be a rank of another communicator). */
typedef struct {
  int nranks, rank, device, port, timeout_s;
  const char *addr;
  const char *secret;
} p2pk_rank_opts;
p2pkit_status_t p2pk_resolve_opts(const p2pkit_comm_opts_t *o, p2pk_rank_opts *r); /* comm_rank.c */
/* rdv/init_id.c (beside p2pkit_comm_opts_init): `o`'s size and version are
 * this library's, else one line why. */
p2pkit_status_t p2pk_comm_opts_check(const p2pkit_comm_opts_t *o);
/* comm.c: a communicator's timeout in seconds, which bounds its every wait
 * for a peer: `asked` (the options' or a config's timeout_s) wins when in
 * 1..P2PK_TIMEOUT_MAX_S; -1 takes P2PKIT_TIMEOUT (600 when unset, as
 * PyTorch's default for NCCL); anything else is refused, naming `what`. */
#define P2PK_TIMEOUT_MAX_S 86400
p2pkit_status_t p2pk_comm_timeout_s(int asked, const char *what, int *out);
/* comm_rank.c: rank r's rendezvous (rank 0 accepting on listen_fd when > 0),
 * bounded by timeout_s: each step after a connection's handshake
 * (P2PK_BOOT_HANDSHAKE_MS) and every later exchange over it. */
p2pkit_status_t p2pk_rank_boot(const p2pk_rank_opts *r, int timeout_s, int listen_fd,
                               p2pk_boot **out);
/* comm_all.c: p2pkit_comm_init_all with rank i's timeout timeout_s[i] (-1:
 * P2PKIT_TIMEOUT; timeout_s NULL: P2PKIT_TIMEOUT for all): a one-process
 * split's new communicators, each with its caller's timeout. */
p2pkit_status_t p2pk_comm_init_all_timeouts(p2pkit_comm_t *comms, int ndev, const int *devs,
                                            const int *timeout_s);
/* comm_rank.c: a communicator of one process per GPU, with rank 0 accepting on
 * `listen_fd` when it is > 0 (a socket p2pkit_get_unique_id or a split
 * opened; the caller closes it). Spanning hosts, it is not finished yet:
 * comm_init.c's p2pk_comm_create adds its per-host communicator.
 * P2PK_INIT_NESTED: a spanning communicator's per-host one (p2pkit's own
 * paths only). */
#define P2PK_INIT_NESTED 1u
p2pkit_status_t p2pk_comm_init_rank_fd(const p2pkit_comm_opts_t *opts, int listen_fd,
                                       unsigned flags, p2pkit_comm_t *comm_p);
/* comm_init.c: p2pk_comm_init_rank_fd, then (spanning hosts) the per-host
 * communicator and the hierarchical path's: what every public init and
 * p2pkit_comm_split make. */
p2pkit_status_t p2pk_comm_create(const p2pkit_comm_opts_t *opts, int listen_fd,
                                 p2pkit_comm_t *comm_p);

/* mem/ipc.c: memory shared between the processes of a communicator. */
#define P2PK_SHM_NAME 64

/* Create a fresh POSIX shared-memory segment of `bytes` (mode 0600, O_EXCL,
 * random name written to `name`) and map it. The caller unlinks it once every
 * rank has it mapped. */
p2pkit_status_t p2pk_shm_create(size_t bytes, char name[P2PK_SHM_NAME], void **p_out);
/* Map a segment another rank created; refuses one of another user or mode. */
p2pkit_status_t p2pk_shm_attach(const char *name, size_t bytes, void **p_out);
void p2pk_shm_unlink(const char *name);
/* Base and size of the device allocation that holds `ptr`. */
p2pkit_status_t p2pk_alloc_range(const void *ptr, char **base_p, size_t *size_p);
/* The same, recording no error: 0, -1 when the driver lacks the call, or
 * the driver's CUresult. */
int p2pk_alloc_lookup(const void *ptr, char **base_p, size_t *size_p);
/* cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_BUFFER_ID): a process-wide id
 * of the allocation holding `ptr`, never reused, so a buffer freed (and
 * maybe another allocated at its address) is noticed. 0, -1 when the
 * driver lacks the call, or the driver's CUresult; *id_p 0 on failure. */
int p2pk_alloc_id(const void *ptr, unsigned long long *id_p);

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
  /* p2pkit_comm_split in one process: each rank's call so far (comm_init.c). */
  struct {
    int seen, color, key, max_blocks, timeout_s;
    p2pkit_comm_t *out;
  } split[P2PK_COLL_MAX_RANKS];
  int split_n;
} p2pk_group;

#define P2PK_PTR_CACHE 8

struct p2pk_worker;
struct p2pk_ce;
struct p2pk_call;
struct p2pk_trace;
struct p2pkit_comm {
  int rank, nranks, device;
  int multiproc; /* 1: process per GPU (bootstrap + IPC) */
  int staged;    /* 1: host shared memory instead of P2P, for every pair */
  uint64_t timeout_ns;
  size_t buffer_bytes;
  p2pk_sel sel; /* what decides each call's path and kernel (select.h) */
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
  void *dmb; /* process per GPU over P2P: the send/recv descriptions in host shared memory (dmbox.h) */
  size_t dmb_bytes;
  p2pk_reg *regs;
  int next_reg_id;
  p2pk_ar_args tmpl; /* kernel arguments every call starts from */
  const void *ok_ptr[P2PK_PTR_CACHE]; /* device pointers already checked */
  int ok_next;
  struct p2pk_worker *worker; /* launch_pool.c: its launch thread, or NULL */
  struct p2pk_ce *ce;         /* the copy engines' room's own state (paths/ce/ce_common.h) */
  void *path_state[P2PK_PATHS]; /* each path's own, made by its init (path.h) */
  p2pk_hosts hosts; /* which host each rank is on (comm_hosts.c) */
  int nccl_mode;    /* P2PK_NCCL_*: what NCCL may carry, alike on every rank */
  unsigned char same_machine[P2PK_COLL_MAX_RANKS]; /* rank r runs on this rank's machine */
  int nested;       /* a spanning communicator's per-host one: p2pkit's own paths */
  /* Spanning hosts: this rank's host's communicator (comm_init.c), and how
   * a path runs one call on it (group.c's p2pk_sub_launch, set with it:
   * the hierarchical path reaches the paths' table only through it). */
  struct p2pkit_comm *intra;
  p2pkit_status_t (*sub_launch)(struct p2pk_call *call);
  struct p2pk_trace *trace; /* its last calls and identity, for the desync report (trace.h) */
  volatile int aborted; /* p2pkit_comm_abort ran: every later call fails at once */
  uint64_t abort_until_ns; /* p2pkit_comm_abort: when its waits end (p2pk_now_ns) */
};

/* The bootstrap's message tags of the comm room, reg.c and the NCCL communicators. */
enum { P2PK_TAG_INFO = 1, P2PK_TAG_P2P = 2, P2PK_TAG_HANDLES = 3, P2PK_TAG_MAPPED = 4,
       P2PK_TAG_REG = 5, P2PK_TAG_DEREG = 6, P2PK_TAG_DESTROY = 7, P2PK_TAG_NCCL_ID = 8,
       P2PK_TAG_NCCL_CROSS = 9, P2PK_TAG_SPLIT = 10, P2PK_TAG_SPLIT_ID = 11 };
/* reg.c: close and free every registration of c (destroy). */
void p2pk_reg_free_all(struct p2pkit_comm *c);
/* reg.c: this rank's registration holding [buf, buf + bytes), or the one
 * numbered id (p2pk_reg.id); NULL when none. */
const p2pk_reg *p2pk_reg_holding(const struct p2pkit_comm *c, const char *buf, size_t bytes);
const p2pk_reg *p2pk_reg_numbered(const struct p2pkit_comm *c, uint64_t id);

/* layout.c: scratch layout for n ranks within `buffer` bytes per rank.
 * P2PKIT_ERR_INVALID_ARGUMENT when the buffer is too small for n ranks. */
p2pkit_status_t p2pk_layout_compute(int nranks, size_t buffer, int staged, int boxes,
                                    p2pk_layout *lay, size_t *ll_cap_p);
/* Over P2P: end the scratch with (n - 1) x depth landing slots of `slot`
 * bytes (none when slot is 0), the landing-slot path's. */
void p2pk_layout_add_cep(p2pk_layout *lay, int n, int depth, size_t slot);
/* Process per GPU, staged: end each rank's part of the host region with
 * `depth` copy-engine slots of `slot` bytes (none when slot is 0). */
void p2pk_layout_add_ce(p2pk_layout *lay, int depth, size_t slot);
/* Mailboxes per peer: P2PKIT_COLL_MAILBOXES, else 4 per multiprocessor. */
int p2pk_mailboxes_for(int sm_count);

/* comm.c: what the choices read from a communicator, from its rank count,
 * transport (staged), mode (multiproc), group (one process), settings and
 * the GPU's multiprocessors: the selector with its thresholds, the layout
 * with every path's scratch, the geometry but LL128's occupancy
 * (sel.geom.ll128_per_sm: CUDA's occupancy API at init). force NULL:
 * the environment's. */
p2pkit_status_t p2pk_comm_derive(struct p2pkit_comm *c, int sms, size_t buffer,
                                 const p2pk_algo_table *table, const p2pk_algo_force *force);
/* comm.c: free c as p2pkit_comm_destroy does but without waiting for its
 * GPU or its peers (p2pkit_comm_abort's reaper calls it once the GPU is
 * idle): one process, the group's share; else everything the rank owns. */
void p2pk_comm_release(struct p2pkit_comm *c);
/* comm_init.c: p2pkit_comm_split of a one-process communicator. */
p2pkit_status_t p2pk_split_one_process(p2pkit_comm_t comm, int color, int key,
                                       const p2pkit_config_t *cfg, p2pkit_comm_t *newcomm);

/* comm_hosts.c: this rank's host ids and NCCL setting, loading NCCL
 * when the setting allows it (`why`: the reason it does not load) and
 * handing NCCL P2PKIT_HOSTID as NCCL_HOSTID when that is unset. */
p2pkit_status_t p2pk_host_info_mine(p2pk_host_info *m, char *why, size_t len);
/* comm_hosts.c: from every rank's (infos[r], its GPU busids[r]): c->hosts
 * and c->nccl_mode, logged at INFO; fails with one line when the
 * communicator spans hosts and NCCL cannot carry it, or P2PKIT_NCCL=1
 * cannot be honoured (nccl_use.h). `why`: this rank's reason NCCL does not
 * load. */
p2pkit_status_t p2pk_comm_hosts(struct p2pkit_comm *c, const p2pk_host_info *const *infos,
                                const char *const *busids, const char *why);

/* nccl_comm.c: an NCCL communicator (ncclComm_t into *out) over a group of
 * c's ranks: every rank of c calls it at once (an all-gather over c's
 * rendezvous with `tag`); the group's `leader` (a rank of c) makes the
 * NCCL unique id, each member joins as rank `subrank` of `nsub`. */
p2pkit_status_t p2pk_nccl_comm_among(struct p2pkit_comm *c, unsigned tag, int leader, int nsub,
                                     int subrank, void **out);
/* nccl_comm.c: ncclCommInitRank on `device` (-1: none set) on a thread of
 * its own, waited for until `until_ns` (p2pk_now_ns's clock): then
 * P2PKIT_SUCCESS with NCCL's result in *r and its communicator in *comm;
 * P2PKIT_ERR_TIMEOUT (nothing set, no message: the caller's to write) when
 * it has not returned by then: the thread aborts the communicator if it
 * ever makes one. */
p2pkit_status_t p2pk_nccl_init_rank_until(const p2pk_nccl_api *api, int device, int nranks,
                                          const p2pk_nccl_id *id, int rank, uint64_t until_ns,
                                          p2pk_nccl_comm_t *comm, p2pk_nccl_result *r);

/* comm_init.c: a split's new communicator's timeout in seconds: cfg's
 * timeout_s when set (cfg NULL or -1: not), else its parent's. */
int p2pk_split_timeout_s(const struct p2pkit_comm *parent, const p2pkit_config_t *cfg);

/* errors.c: the error a kernel left behind, as a status (SUCCESS if none). */
p2pkit_status_t p2pk_comm_async_status(struct p2pkit_comm *comm);
/* Tests and the sweep: replace the environment's overrides for this comm
 * (the selector's thresholds follow). */
void p2pk_comm_set_force(struct p2pkit_comm *comm, const p2pk_algo_force *f);
/* p2pkit_all_reduce with its kernel's grid capped at max_blocks (> 0; a
 * grid setting given wins): every rank must pass the same cap (the call's
 * header carries the grid). For work that shares the GPU (grad_sync.c). */
p2pkit_status_t p2pk_all_reduce_capped(const void *sendbuf, void *recvbuf, size_t count,
                                       p2pkit_dtype_t dtype, p2pkit_redop_t op, p2pkit_comm_t c,
                                       p2pkit_stream_t stream, int max_blocks);
/* Half c's multiprocessors rounded down to 8 (at least 8): grad sync's
 * default cap. */
int p2pk_comm_half_grid(const struct p2pkit_comm *c);
/* `p2pkit perf --explain`: c's selector (its rules, thresholds and
 * algorithm table, select.h's p2pk_sel_explain), then the decision for a
 * call of `kind` (a name as p2pk_kind_name's; NULL: none) of each of the n
 * sizes (one rank's bytes), alone and in a group, out of place and in
 * place, eager or under capture. */
void p2pk_comm_explain(const struct p2pkit_comm *c, const char *kind, const size_t *bytes, int n,
                       int capture, FILE *f);
/* What the next all-reduce of `bytes` would run on the kernels. */
void p2pk_comm_choose(const struct p2pkit_comm *comm, size_t bytes, p2pk_algo_choice *c);
/* The copy engines' room (paths/ce), as the rest of the library calls it;
 * its state (c->ce) is its own. ce_common.c: c->ce made at init and freed
 * at destroy (its streams and events too); a copy on the side stream, begun
 * after what `stream` holds, and `stream` made to wait for it (a broadcast
 * root's own copy beside the kernels under capture: kern_args.c). */
p2pkit_status_t p2pk_ce_init(struct p2pkit_comm *c);
void p2pk_ce_fini(struct p2pkit_comm *c);
cudaError_t p2pk_ce_side_copy(struct p2pkit_comm *c, void *dst, const void *src, size_t bytes,
                              cudaStream_t stream);
cudaError_t p2pk_ce_side_join(struct p2pkit_comm *c, cudaStream_t stream);
/* Settings of the copy-engine paths every rank must share (comm_rank.c
 * compares them at init): the staged all-reduce's slots and chunks in
 * flight (path_ce_staged.c), the landing slots' depth and size (cep_core.c). */
size_t p2pk_sce_slot_bytes(void);
int p2pk_sce_depth(void);
int p2pk_cep_depth(void);
size_t p2pk_cep_slot_bytes(int n, int depth, int any);
/* group.c: is the calling thread inside p2pkit_group_start / _end? */
int p2pk_group_open(void);

/* launch_pool.c: launches from a thread per GPU. A job is one deferred
 * launch of a one-process communicator inside a group: run(j) makes it. */
typedef struct p2pk_job {
  struct p2pkit_comm *c;
  p2pkit_status_t (*run)(const struct p2pk_job *j);
  void *arg; /* what run needs (the caller's, alive until p2pk_jobs_run returns) */
  int kind;  /* run's to use */
} p2pk_job;
/* May c's launches wait to be made by a thread per GPU? (a one-process
 * communicator of several GPUs, P2PKIT_LAUNCH_THREADS). */
int p2pk_jobs_ok(const struct p2pkit_comm *c);
/* Queue a job (runs the queue first when it is full). */
p2pkit_status_t p2pk_job_defer(const p2pk_job *j);
/* Make every queued job of this thread: the first communicator's here, the
 * others' on their workers at once; returns when all are made, with the
 * first failure. */
p2pkit_status_t p2pk_jobs_run(void);
int p2pk_jobs_pending(void);
/* c's worker: -1 none, 0 awake (spinning or working), 1 asleep. */
int p2pk_worker_state(const struct p2pkit_comm *c);
/* Stop and free c's worker (comm_free). */
void p2pk_worker_stop(struct p2pkit_comm *c);

#endif
