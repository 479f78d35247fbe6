/* SPDX-License-Identifier: BSD-3-Clause */
/* The path interface. A path is one way a call's data moves (the kernels
 * over P2P, the kernels through host memory, the copy engines by events,
 * through landing slots, straight into the outputs, through host memory;
 * one rank's own copy): one module, one p2pk_path of functions, its own
 * state in c->path_state[id], which only it reads. The selector (select.h)
 * picks the path of each call; group.c hands the call to it. To add a
 * path: a module defining a p2pk_path, its id in select.h, its entry in
 * paths.c, and the selector's rules (and thresholds) that choose it. */
#ifndef P2PK_PATH_H
#define P2PK_PATH_H

#include "coll/coll.h"

/* P2PK_MODE_SPAN: a communicator spanning hosts (process per GPU, no
 * p2pkit transport of its own: only the paths that serve it are made). */
enum { P2PK_MODE_ONE = 1, P2PK_MODE_PER_GPU = 2, P2PK_MODE_SPAN = 4 };
#define P2PK_GROUP_OPS 64 /* calls one thread's group holds */
enum { P2PK_XPORT_P2P = 1, P2PK_XPORT_SHM = 2 };

/* One call, checked and planned: a collective of one rank, or one send or
 * receive. */
typedef struct p2pk_call {
  struct p2pkit_comm *c;
  int kind;        /* P2PK_COLL_* or P2PK_SENDRECV */
  const void *send;
  void *recv;      /* send/recv: the buffer (send: read, receive: written) */
  size_t count;    /* elements */
  size_t bytes;    /* one rank's share (send/recv: the message) */
  size_t esize;    /* element bytes */
  p2pkit_dtype_t dtype;
  p2pkit_redop_t op; /* P2PKIT_SUM where the collective has none */
  int root;        /* broadcast, reduce; send/recv: the peer */
  int is_send;     /* send/recv: 1 send, 0 receive */
  int grid_cap;    /* the call's grid cap (p2pk_all_reduce_capped), else 0 */
  int direct_ok;   /* recvbuf is plain device memory (peers may write it) */
  int capture;     /* its stream is being captured (-1: not asked) */
  p2pkit_stream_t stream;
  p2pk_coll_plan plan; /* collectives: what moves where (plan.h) */
  p2pk_decision d;     /* the selector's */
  char *peer_buf;  /* send/recv, one process: the other end's buffer when
                      the copy engines push straight into it */
  uint64_t trace_at; /* its place in the communicator's ring (trace.c) */
} p2pk_call;

enum { P2PK_CAPTURE_EAGER = 1, P2PK_CAPTURE_GRAPH = 2 };

typedef struct p2pk_path {
  int id; /* P2PK_PATH_*; its name is the selector's (p2pk_path_name) */
  /* What it can carry (NCCL's canConnect): a call of one of its kinds on a
   * communicator of one of its modes and transports, eagerly or under
   * capture as `captures` says. A path with launch_group but no launch takes
   * a one-process collective only with every rank's call; send/recv needs
   * sendrecv or sendrecv_pairs. The selector's rules lie within these
   * (test_decisions checks every rule and every decision), and group.c
   * refuses a decision that does not (p2pk_path_can). */
  uint32_t kinds;      /* bit per P2PK_COLL_* and P2PK_SENDRECV */
  uint32_t modes;      /* P2PK_MODE_* */
  uint32_t transports; /* P2PK_XPORT_* */
  uint32_t captures;   /* P2PK_CAPTURE_* */
  /* The scratch it needs beyond the kernels' areas, added to c->lay from
   * the selector's settings (NULL: none). */
  void (*scratch)(const struct p2pkit_comm *c, p2pk_layout *lay);
  /* Its state, on c's GPU (current), after the scratch exists; and back
   * (NULL: none). fini also runs after a failed init. */
  p2pkit_status_t (*init)(struct p2pkit_comm *c);
  void (*fini)(struct p2pkit_comm *c);
  /* One rank's collective, on its stream (NULL: only whole groups). */
  p2pkit_status_t (*launch)(const p2pk_call *call);
  /* Every rank's call of one collective (one process; set[r] rank r's,
   * all checked alike): NULL when the path takes calls one by one. */
  p2pkit_status_t (*launch_group)(p2pk_call *const *set, int n);
  /* One communicator's sends and receives of a group that this path
   * carries, on one stream (NULL: none). */
  p2pkit_status_t (*sendrecv)(struct p2pkit_comm *c, const p2pk_call *ops, int n);
  /* Sends with their receives, both in this process (snd[k] with
   * rcv[k]; NULL: none). */
  p2pkit_status_t (*sendrecv_pairs)(const p2pk_call *const *snd, const p2pk_call *const *rcv,
                                    int n);
  /* After a wait gave up: what the path can say about it (NULL: nothing). */
  void (*on_error)(struct p2pkit_comm *c);
  /* An error the path's engine reports on its own (NCCL's asynchronous
   * error), as a status; NULL or SUCCESS: none. */
  p2pkit_status_t (*async_status)(struct p2pkit_comm *c);
  /* p2pkit_comm_abort: stop whatever the path has in flight without
   * waiting for any peer (NULL: nothing to stop). */
  void (*abort)(struct p2pkit_comm *c);
  /* One process: around a whole group whose calls may go through this
   * path on several ranks (NCCL's group, one thread driving several GPUs). */
  void (*group_open)(void);
  p2pkit_status_t (*group_close)(void);
} p2pk_path;

/* kern_args.c: what the kernel paths (path_p2p.c, path_staged.c) share:
 * each one's state (what it logged once), the launch of one rank's
 * collective through a launcher, a communicator's sends and receives of a
 * group in one kernel. */
typedef struct {
  uint64_t logged; /* (collective, algorithm, protocol) at INFO, a bit each */
  int self_logged; /* a broadcast root's own copy by copy engine */
} p2pk_kernel_state;

typedef cudaError_t (*p2pk_coll_launcher)(const p2pk_ar_args *a, int blocks, int threads,
                                          cudaStream_t stream);
typedef cudaError_t (*p2pk_p2p_launcher)(const p2pk_p2p_args *a, int esize, int blocks,
                                         int threads, cudaStream_t stream);

/* One rank's collective on path `id` through `launch` (its GPU current). */
p2pkit_status_t p2pk_kernel_coll(const p2pk_call *call, int id, p2pk_coll_launcher launch);
/* One communicator's sends and receives of a group in one kernel. */
p2pkit_status_t p2pk_kernel_sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n,
                                     p2pk_p2p_launcher launch);
p2pkit_status_t p2pk_kernel_init(struct p2pkit_comm *c, int id);
void p2pk_kernel_fini(struct p2pkit_comm *c, int id);


/* paths.c: every path, by id. */
extern const p2pk_path *const p2pk_paths[P2PK_PATHS];
/* paths.c: whether path p can carry the call of key k on the communicator
 * of selector s (its kinds, modes, transports, captures; a whole group's
 * only as every rank's call, the rules alone deciding). */
int p2pk_path_can(const p2pk_path *p, const p2pk_sel *s, const p2pk_sel_key *k);
/* The paths, one by one (their modules). */
extern const p2pk_path p2pk_path_local, p2pk_path_p2p, p2pk_path_staged, p2pk_path_ce_events,
    p2pk_path_ce_slots, p2pk_path_ce_direct, p2pk_path_ce_staged, p2pk_path_nccl, p2pk_path_hier;

/* path_nccl.c: whether NCCL (as loaded, on c's GPU) carries `dtype` (with
 * `op` when has_op) for `who`; the types p2pkit's own paths lack need the
 * NCCL path (refused in one line when P2PKIT_NCCL=0). */
p2pkit_status_t p2pk_nccl_type_check(struct p2pkit_comm *c, const char *who,
                                     p2pkit_dtype_t dtype, int has_op, p2pkit_redop_t op);

/* group.c: one collective (plan made here, buffers the caller's) on
 * call->c from inside another call: decided, logged, launched on its
 * stream (set as p2pkit_comm's sub_launch). */
p2pkit_status_t p2pk_sub_launch(p2pk_call *call);

/* group.c: queue a checked call in this thread's group (outside one: a
 * group of its own, launched now). */
p2pkit_status_t p2pk_group_add(const p2pk_call *call);
/* group.c: how many more sends and receives this thread's group holds. */
int p2pk_group_room(void);

/* enqueue.c: the checks every entry point makes first: communicator,
 * type (the types only NCCL has through its check), operation when
 * has_op, count (at most P2PK_MAX_COUNT, and nranks shares of it
 * addressable); *es_p the element size. */
#define P2PK_MAX_COUNT (UINT64_C(1) << 40)
p2pkit_status_t p2pk_check_args(struct p2pkit_comm *c, const char *name, p2pkit_dtype_t dtype,
                                int has_op, p2pkit_redop_t op, size_t count, size_t *es_p);
/* enqueue.c: `p` is memory of c's GPU (`what` names it in the message). */
p2pkit_status_t p2pk_check_buffer(struct p2pkit_comm *c, const void *p, const char *what);
/* enqueue.c: one send (send 1) or receive of `count` elements at `buf`,
 * whose arguments and allocation the caller checked, into the group. */
p2pkit_status_t p2pk_post_checked(int send, void *buf, size_t count, p2pkit_dtype_t dtype,
                                  size_t es, int peer, struct p2pkit_comm *c,
                                  p2pkit_stream_t stream);

/* call.c: make the communicator's GPU current (*prev: the caller's), and
 * back, turning a launch error into a status. */
p2pkit_status_t p2pk_coll_enter(struct p2pkit_comm *c, const char *name, int *prev);
p2pkit_status_t p2pk_coll_leave(struct p2pkit_comm *c, const char *name, int prev, cudaError_t e);
/* A launch error as a status (SUCCESS for cudaSuccess). */
p2pkit_status_t p2pk_cuda_status(const struct p2pkit_comm *c, const char *name, cudaError_t e);
/* The capture status of `stream` (of c's GPU), -1 when it cannot be told;
 * leaves c's GPU current. */
int p2pk_capture_of(const struct p2pkit_comm *c, p2pkit_stream_t stream);
/* The selector's key of a checked call (capture -1 when not asked yet;
 * alone, not in a group, peers as the rules say). */
void p2pk_call_key(const p2pk_call *call, p2pk_sel_key *k);
/* The call's name for messages ("all_reduce", "send", "recv"). */
const char *p2pk_call_name(const p2pk_call *call);

#endif
