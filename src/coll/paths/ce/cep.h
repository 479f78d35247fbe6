/* SPDX-License-Identifier: BSD-3-Clause */
/* The landing slots' engine (cep_core.c, cep_ops.c, cep_straight.c,
 * recvmap.c), which two paths run on: ce-slots (path_ce_slots.c) and
 * ce-direct (path_ce_direct.c). Its state lives in the copy engines' room
 * state (c->ce->slots), opened by either path's init and closed by either's
 * fini; a path starts a call with p2pk_cep_begin and runs the engine's
 * collectives (p2pk_cep_allreduce, _rooted, _a2a, _p2p). */
#ifndef P2PK_CEP_H
#define P2PK_CEP_H

#include "coll/paths/ce/ce_common.h"
#include "coll/paths/ce/dmbox.h"

#define P2PK_CEP_TRACE_MAX 96 /* timing events of one traced call (P2PKIT_CEP_TRACE) */

/* Send/recv straight into registered receive buffers with a process per
 * GPU (cep_straight.c, dmbox.h): whether it is on (and for buffers shared
 * on demand, recvmap.c), how long a host waits for its peer, per peer the
 * calls so far both ways and how many calls still wait not at all after
 * one that waited in vain, and what happened (the tests read it). */
typedef struct {
  int on, map;
  uint64_t wait_ns;
  uint64_t sent[P2PK_COLL_MAX_RANKS], recvd[P2PK_COLL_MAX_RANKS];
  uint32_t rest[P2PK_COLL_MAX_RANKS], rrest[P2PK_COLL_MAX_RANKS];
  uint64_t missed;                   /* host waits in vain so far (the first few logged) */
  uint64_t wait_max_ns, wait_ns_sum; /* host waits for peers: the longest, all */
  uint64_t direct, slots;            /* sends that went straight in / through the slots */
  uint64_t rhow[2];                  /* receives into a registered buffer: [0] the slots, [1] straight in */
  uint64_t why[P2PK_DMB_WHY_COUNT];  /* sends through the slots, by why (P2PK_DMB_WHY_*) */
  struct p2pk_map *map_state;        /* recvmap.c's, made on first use */
  uint64_t mapped;                   /* sends straight into a buffer mapped on demand */
} p2pk_straight;

/* The engine's state (c->ce->slots). */
typedef struct p2pk_cep {
  /* Chunks pushed to each peer and received from it so far (the peer
   * counts the same; they pick the slots, turn by turn across calls). */
  uint64_t sent[P2PK_COLL_MAX_RANKS], recvd[P2PK_COLL_MAX_RANKS];
  int cap; /* the call being enqueued is under graph capture (p2pk_cep_begin) */
  /* Claims of the second slot halves since the other claim stream last
   * started at a call's START: whole pushes on W, all-reduce results on W2
   * (p2pk_cep_start says why). */
  int w_rbusy, w2_rbusy;
  unsigned logged;
  /* P2PKIT_CEP_TRACE (process per GPU, fixed at init): timing events of
   * the last call and what each marks; its timeline is logged at the next
   * call or at destroy. */
  int trace, tr_on, tr_n;
  uint64_t tr_calls;
  char tr_name[16];
  cudaEvent_t tr_ev[P2PK_CEP_TRACE_MAX];
  char tr_what[P2PK_CEP_TRACE_MAX][12];
  p2pk_straight st;
} p2pk_cep;
#define CEP(c) ((c)->ce->slots)
#define SI(c) (&CEP(c)->st)

/* Send/recv straight in, for the tests: the slots path's record (NULL
 * when the communicator has none). */
p2pk_straight *p2pk_cep_straight(struct p2pkit_comm *c);

/* c->ce->sev[]: the call's start; the side, gather and RECV streams done;
 * the posts after the side and gather copies done. */
enum { E_START = P2PK_CE_EV_START, E_SIDE = 1, E_GATHER = 2, E_RECV = 3, E_POST = 4, E_POST2 = 5 };

/* c->ce->step[]: posts after the side stream's copies, posts after the
 * gather stream's, waits for free slots before each, and the all-reduce's
 * copies of results out of the slots (RECV). c->ce->step_ev[]: side
 * copies done, side slots free, gather copies done, gather slots free, the
 * owner's reduce done. */
enum { S_POST = 0, S_POST2 = 1, S_WAIT = 2, S_WAIT2 = 3, S_RECV = 4 };

enum { V_CP = 0, V_CR = 1, V_GCP = 2, V_GCR = 3, V_RED = 4 };

_Static_assert(S_RECV + 1 == P2PK_CEP_STREAMS && V_RED + 1 == P2PK_CEP_EVKINDS,
               "the slots' streams and event kinds fill c->ce->step and c->ce->step_ev");

#define CTRL(p) ((p2pk_dev_ctrl *)c->peer[p])

/* What a call is, for the receivers to compare with their own (kind
 * P2PK_SENDRECV for send/recv, the sender as root). */
static inline uint64_t cep_header(int kind, size_t count, int dtype, int op, int root) {
  return 0xce9000000000000ULL ^ ((uint64_t)count << 16) ^ ((uint64_t)kind << 12) ^
         ((uint64_t)dtype << 8) ^ ((uint64_t)op << 4) ^ (uint64_t)root;
}

/* The steps for one stream's next one-thread launch. A list that fills up
 * is launched and started again, so any number of steps keeps its order. */
typedef struct {
  p2pk_cep_steps st;
  struct p2pkit_comm *c;
  cudaStream_t s;
  cudaError_t e;
  int added;  /* steps added since the caller last asked (p2pk_cep_taken()) */
  int memops; /* posts alone may be memory operations (p2pk_cep_run) */
} cep_batch_t;

/* One push: chunk k (K elements of es bytes) of `len` elements at src to
 * rank `peer`'s landing slots. */
typedef struct {
  int peer;
  const char *src;
  size_t len;
} cep_push;

/* One call's agreement on its straight-in transfers, in the order that
 * never waits on itself: every receive describes its buffer first (never
 * waiting for that), then every send decides (waiting for its receiver's
 * description), then every receive hears its way (waiting for its
 * sender's decision). rv[i] / sd[j]: the call's receives and sends with a
 * peer over the copy engines (buf, bytes); `may` 0: none straight in
 * (each is still numbered, both ends counting alike). rin[i]: receive i
 * straight in; sdst[j]: where send j lands straight in, or NULL. Without
 * the rings (c->dmb NULL) nothing is numbered and all go through the
 * slots. */
typedef struct {
  int peer;
  const char *buf;
  size_t bytes;
} dmb_op;

static inline size_t cep_nchunks(size_t len, size_t K) { return (len + K - 1) / K; }

/* One send or receive over the copy engines (p2pk_cep_p2p). */
typedef struct {
  int send, peer;
  char *buf;
  size_t bytes;
  /* One process under capture with both ends in one group: the other
   * end's buffer (a send pushes straight into it; a receive's is only
   * tested for NULL), else NULL (the landing slots). */
  char *peer_buf;
} p2pk_cep_xfer;

/* cep_core.c (each explained there): the slots' depth and size, where a
 * slot is, the step lists of a stream, a traced call's marks, the flags'
 * claims and takes, a call's chunks and header, the pushes, the start
 * and end of a call, the local copies out, the release of a slot. */
int p2pk_cep_depth(void);
size_t p2pk_cep_slot_bytes(int n, int depth, int any);
char *p2pk_cep_land(const struct p2pkit_comm *c, int src, int dst, int s);
void p2pk_cep_batch(cep_batch_t *b, struct p2pkit_comm *c, cudaStream_t s);
cudaError_t p2pk_cep_flush(cep_batch_t *b);
void p2pk_cep_add(cep_batch_t *b, int kind, uint64_t *ctr, uint64_t v, uint64_t *hdr, uint64_t hv, int peer);
int p2pk_cep_taken(cep_batch_t *b);
void p2pk_cep_tr_mark(struct p2pkit_comm *c, cudaStream_t s, const char *what, long k);
void p2pk_cep_trace_flush(struct p2pkit_comm *c);
void p2pk_cep_log_flags(struct p2pkit_comm *c);
void p2pk_cep_tr_begin(struct p2pkit_comm *c, cudaStream_t stream, const char *name);
void p2pk_cep_tr_end(struct p2pkit_comm *c, cudaStream_t stream);
void p2pk_cep_claim(cep_batch_t *b, uint64_t *flag, int peer);
void p2pk_cep_take(cep_batch_t *b, uint64_t *flag, uint64_t *hdr, uint64_t hv, int peer);
size_t p2pk_cep_chunk_elems(const struct p2pkit_comm *c, size_t bytes, size_t es, size_t cap);
cudaError_t p2pk_cep_pushes(struct p2pkit_comm *c, const cep_push *p, int np, size_t K, size_t es,
    uint64_t hv, int whole, int memops);
cudaError_t p2pk_cep_direct_pushes(struct p2pkit_comm *c, const cep_push *p, char *const *dst, int np);
cudaError_t p2pk_cep_start(struct p2pkit_comm *c, cudaStream_t stream, int side, int whole,
    int gather);
cudaError_t p2pk_cep_join_side(struct p2pkit_comm *c, cudaStream_t stream, int memops);
void p2pk_cep_log_once(struct p2pkit_comm *c, int kind, const char *name, size_t bytes, size_t cb,
    int direct);
cudaError_t p2pk_cep_copy_capped(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
    char *out, size_t lb, int cap, cudaStream_t stream);
cudaError_t p2pk_cep_copy_out(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const char *src,
    char *out, size_t lb, cudaStream_t stream);
cudaError_t p2pk_cep_own_copy(const struct p2pkit_comm *c, p2pkit_dtype_t dtype, const void *send,
    void *recv, size_t bytes, cudaStream_t stream);
void p2pk_cep_release(struct p2pkit_comm *c, cep_batch_t *b, int r, int s);
cudaError_t p2pk_cep_note_capture(struct p2pkit_comm *c, cudaStream_t stream);
/* cep_straight.c: straight in, agreed per call; a send and a receive
 * straight in. */
void p2pk_dmb_agree(struct p2pkit_comm *c, const dmb_op *rv, int nr, const dmb_op *sd, int ns,
    int may, int *rin, char **sdst);
cudaError_t p2pk_cep_push_straight(struct p2pkit_comm *c, int t, const char *src, char *dst,
    size_t bytes, uint64_t hv);
cudaError_t p2pk_cep_take_straight(struct p2pkit_comm *c, cep_batch_t *bs, int r, uint64_t hv, size_t nch);
/* cep_core.c: the engine's state opened (the settings read once, the step
 * lists' streams and events made when the slots exist: no call under
 * capture creates them; again: nothing) and closed (what straight in did
 * logged, a traced call's timeline, the peers' allocations mapped on
 * demand); a call begun: under capture or not, its grid cap. */
p2pkit_status_t p2pk_cep_open(struct p2pkit_comm *c);
void p2pk_cep_close(struct p2pkit_comm *c);
void p2pk_cep_begin(struct p2pkit_comm *c, int capture, int grid_cap);
/* cep_ops.c, the engine's collectives: the all-reduce (pout: every rank's
 * output, one process under capture: results straight in), reduce-scatter,
 * reduce and broadcast (rooted), all-to-all and all-gather (a2a), a
 * communicator's sends and receives (p2p, and as the paths' sendrecv). */
cudaError_t p2pk_cep_allreduce(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
    p2pkit_dtype_t dtype, p2pkit_redop_t op, cudaStream_t stream,
    char *const *pout);
cudaError_t p2pk_cep_rooted(struct p2pkit_comm *c, int kind, const void *send, void *recv,
                            size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root,
                            cudaStream_t stream);
cudaError_t p2pk_cep_a2a(struct p2pkit_comm *c, const void *send, void *recv, size_t count,
                         p2pkit_dtype_t dtype, cudaStream_t stream, int gather);
cudaError_t p2pk_cep_p2p(struct p2pkit_comm *c, const p2pk_cep_xfer *ops, int nops,
                         cudaStream_t stream);
p2pkit_status_t p2pk_cep_sendrecv(struct p2pkit_comm *c, const p2pk_call *ops, int n);
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

#endif
