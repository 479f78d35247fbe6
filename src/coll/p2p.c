/* Point to point: p2pkit_send / p2pkit_recv, and the groups that let a rank
 * send and receive at once. Operations wait in a per-thread queue until the
 * outermost p2pkit_group_end (or launch at once outside a group); each
 * communicator then gets one kernel running all its operations side by side
 * (p2p_kernel in kern_sendrecv.cu over P2P, staged_p2p_kernel in
 * kern_staged.cu through host memory), so a rank that sends to and receives
 * from the same peer never waits on itself. Grid and chunk of an operation
 * depend only on its size, so the two ends agree without talking. */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/log.h"
#include "core/param.h"

#define P2PK_P2P_QUEUE 64

typedef struct {
  struct p2pkit_comm *c;
  int send, peer;
  char *buf;
  size_t bytes, esize;
  p2pkit_stream_t stream;
  char *peer_buf; /* the other end's buffer when direct_match paired them (flush) */
} p2p_pending;

static _Thread_local int group_depth;
static _Thread_local int queued;
static _Thread_local p2p_pending queue[P2PK_P2P_QUEUE];

/* Staged (no P2P): an operation's grid, threads and chunk (what launch_comm
 * reads) from its size alone (and P2PKIT_COLL_BLOCKS / P2PKIT_COLL_CHUNK,
 * which peers must share), so both ends agree: 64 KiB or more per block, at
 * most half the pair's mailboxes' worth of blocks (each cycles through two),
 * pieces no larger than a send/recv mailbox. */
static void staged_grid(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *ch) {
  memset(ch, 0, sizeof *ch);
  size_t g = c->force.blocks > 0 ? (size_t)c->force.blocks : (bytes + (64u << 10) - 1) / (64u << 10);
  if (g > P2PK_STAGE_P2P_BOXES / 2) g = P2PK_STAGE_P2P_BOXES / 2;
  if (g < 1) g = 1;
  size_t k = c->force.chunk > 0 ? c->force.chunk : (bytes + g - 1) / g;
  k = (k + 15) & ~(size_t)15;
  if (k > c->lay.stage_p2p_box) k = c->lay.stage_p2p_box;
  ch->blocks = (int)g;
  ch->threads = 512;
  ch->chunk = (uint32_t)k;
}

static const char opname[] = "send/recv";

/* The rules for the operations of one communicator in a group: one stream;
 * at most one send and one receive per peer; a send to itself pairs with a
 * receive from itself of the same size (a local copy). */
static p2pkit_status_t check_ops(const struct p2pkit_comm *c, const p2p_pending *ops, int nops) {
  int seen[2][P2PK_COLL_MAX_RANKS] = {{0}};
  const p2p_pending *self[2] = {NULL, NULL};
  for (int i = 0; i < nops; i++) {
    const p2p_pending *o = &ops[i];
    if (o->stream != ops[0].stream)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the operations of one group on "
                       "one communicator must use one stream", opname, c->rank);
    if (seen[o->send][o->peer]++)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: more than one %s %s rank %d in "
                       "one group (p2pkit allows one each way per peer)", opname, c->rank,
                       o->send ? "send" : "receive", o->send ? "to" : "from", o->peer);
    if (o->peer == c->rank) self[o->send] = o;
  }
  if ((self[0] != NULL) != (self[1] != NULL))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: a %s itself without the matching "
                     "%s in the same group", opname, c->rank, self[1] ? "send to" : "receive from",
                     self[1] ? "receive" : "send");
  if (self[0] && self[0]->bytes != self[1]->bytes)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: sends %zu bytes to itself but "
                     "receives %zu", opname, c->rank, self[1]->bytes, self[0]->bytes);
  return P2PKIT_SUCCESS;
}

/* One kernel for the operations of one communicator (checked by check_ops);
 * over P2P, with a process per GPU those of P2PKIT_SENDRECV_CE_MIN bytes or
 * more (by default 256 MiB) go over the copy engines through the landing
 * slots instead (ce_p2p_mp.c, whose handshakes a graph can replay), with one
 * process under capture the pairs flush() matched, straight into the
 * receive buffer. */
static int capturing(const struct p2pkit_comm *c, p2pkit_stream_t stream);

int p2pk_p2p_slots(const struct p2pkit_comm *c, size_t bytes, int capture) {
  /* Process per GPU: through the landing slots from cep_p2p_min. One
   * process: only the pairs flush() matched under capture (peer_buf), both
   * ends alike; the rest take the kernel (eager pairs took the copy engine
   * in flush() already), so one end never waits on a path the other did
   * not take. Under capture only where p2pk_ce_waits_ok allows it. */
  size_t cep_min = c->staged || !c->multiproc ? 0 : c->cep_p2p_min;
  if (cep_min && !c->cep_cap_ok && capture) cep_min = 0;
  return cep_min && bytes >= cep_min;
}

void p2pk_p2p_op_choice(const struct p2pkit_comm *c, size_t bytes, p2pk_algo_choice *ch) {
  /* A send's blocks wait for the peer's receive blocks: every block of both
   * kernels must be resident at once. With at most 2 (n - 1) operations of
   * `cap` blocks the grid never exceeds one block per multiprocessor. The cap
   * depends only on the communicator, so both ends of a pair agree. */
  const int nops_max = 2 * (c->nranks - 1 > 0 ? c->nranks - 1 : 1);
  int cap = c->geom.sm_count / nops_max;
  /* The communicator's grid cap (p2pkit_comm_set_max_blocks) shared out
   * alike, at least a block per operation. */
  const int mb = p2pk_comm_grid_cap(c);
  if (mb > 0 && mb / nops_max < cap) cap = mb / nops_max;
  if (cap < 1) cap = 1;
  if (c->staged) {
    staged_grid(c, bytes, ch);
  } else if (bytes <= P2PK_P2P_LL_MAX) {
    /* LL (p2p_ll in kern_sendrecv.cu): one trip over the link, a block
     * per P2PK_P2P_LL_PER_BLOCK region (one line per thread; with fewer
     * blocks, under the cap below, a block takes several regions). */
    memset(ch, 0, sizeof *ch);
    ch->blocks = (int)((bytes + P2PK_P2P_LL_PER_BLOCK - 1) / P2PK_P2P_LL_PER_BLOCK);
    ch->threads = 512;
  } else {
    p2pk_algo_force f = c->force;
    f.algo = P2PK_ALGO_ONESHOT;
    f.proto = P2PK_PROTO_SIMPLE;
    p2pk_algo_choose(&c->table, &f, &c->geom, bytes, ch);
  }
  if (ch->blocks > cap) ch->blocks = cap; /* the chunk still fits a mailbox */
}

static p2pkit_status_t launch_comm(struct p2pkit_comm *c, const p2p_pending *ops, int nops) {
  p2pk_cep_xfer xf[P2PK_P2P_MAX_OPS];
  int nxf = 0;
  int prev = -1;
  P2PK_CHECK(p2pk_coll_enter(c, opname, &prev));
  /* Asked once (it leaves c's GPU current, as the enter above did). */
  const int cap_now = c->staged || !c->multiproc || !c->cep_p2p_min || c->cep_cap_ok
                          ? 0 : capturing(c, ops[0].stream);
  p2pk_p2p_args pa;
  memset(&pa, 0, sizeof pa);
  pa.a = c->tmpl;
  const p2p_pending *self[2] = {NULL, NULL};
  size_t esize = 8;
  int blocks = 0, threads = 64;
  for (int i = 0; i < nops; i++) {
    const p2p_pending *o = &ops[i];
    if (o->peer == c->rank) {
      self[o->send] = o;
      continue;
    }
    if ((p2pk_p2p_slots(c, o->bytes, cap_now) || o->peer_buf) && nxf < P2PK_P2P_MAX_OPS) {
      xf[nxf++] = (p2pk_cep_xfer){o->send, o->peer, o->buf, o->bytes, o->peer_buf};
      continue;
    }
    p2pk_algo_choice ch;
    p2pk_p2p_op_choice(c, o->bytes, &ch);
    p2pk_p2p_op *po = &pa.op[pa.nops++];
    po->buf = o->buf;
    po->bytes = o->bytes;
    po->peer = o->peer;
    po->send = o->send;
    po->base = blocks;
    po->blocks = ch.blocks;
    po->chunk = ch.chunk;
    blocks += ch.blocks;
    if (ch.threads > threads) threads = ch.threads;
    if (o->esize < esize) esize = o->esize;
    /* Same-size elements on both ends: the element loop width only needs to
     * divide every operation's alignment. */
    while (esize > 1 && (((uintptr_t)o->buf | o->bytes) & (esize - 1))) esize /= 2;
  }
  cudaError_t e = cudaSuccess;
  cudaStream_t st = (cudaStream_t)ops[0].stream;
  if (self[0] && self[0]->buf != self[1]->buf)
    e = cudaMemcpyAsync(self[0]->buf, self[1]->buf, self[0]->bytes, cudaMemcpyDeviceToDevice, st);
  if (e == cudaSuccess && nxf) e = p2pk_cep_p2p(c, xf, nxf, st);
  if (e == cudaSuccess && pa.nops) {
    P2PK_TRACE(P2PK_LOG_COLL, "rank %d send/recv: %d operations, grid %d x %d, element %zu B",
               c->rank, pa.nops, blocks, threads, esize);
    e = c->staged ? p2pk_launch_p2p_staged(&pa, (int)esize, blocks, threads, st)
                  : p2pk_launch_p2p(&pa, (int)esize, blocks, threads, st);
  }
  return p2pk_coll_leave(c, opname, prev, e);
}

/* The capture status of `stream` (of c's GPU), -1 when it cannot be told.
 * Leaves c's GPU current. */
static int capture_of(const struct p2pkit_comm *c, p2pkit_stream_t stream) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaSetDevice(c->device) != cudaSuccess ||
      cudaStreamIsCapturing((cudaStream_t)stream, &cs) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return (int)cs;
}

/* Is `stream` (of c's GPU) being captured into a graph? 1 also when that
 * cannot be told: the copy-engine paths (events between two captures would
 * join them) are then not taken; the kernel is always right. Leaves c's GPU
 * current. */
static int capturing(const struct p2pkit_comm *c, p2pkit_stream_t stream) {
  return capture_of(c, stream) != (int)cudaStreamCaptureStatusNone;
}

/* Are s (a send) and r its receive, both queued by this process: the same
 * one-process communicator (its p2pk_group), P2P, the same size of at least
 * min bytes? Then st[] gets both streams' capture status (capture_of; the
 * current GPU is kept). */
static int pair_of(const p2p_pending *s, const p2p_pending *r, size_t min, int st[2]) {
  if (!min || !s->send || r->send || s->bytes < min || s->bytes != r->bytes) return 0;
  if (!s->c->group || s->c->group != r->c->group || s->c->staged || r->c->staged) return 0;
  if (r->c->rank != s->peer || r->peer != s->c->rank || s->peer == s->c->rank) return 0;
  int prev = -1;
  cudaGetDevice(&prev);
  st[0] = capture_of(s->c, s->stream);
  st[1] = capture_of(r->c, r->stream);
  if (prev >= 0) cudaSetDevice(prev);
  return 1;
}

/* Can the copy engine move a send into its receive eagerly (pair_of from
 * P2PKIT_SENDRECV_CE_MIN, neither stream capturing: events between two
 * captures would join them)? */
size_t p2pk_p2p_pair_min(const struct p2pkit_comm *c, int capture) {
  return capture ? (c->staged ? 0 : c->cep_direct_p2p_min) : c->sendrecv_ce_min;
}

static int ce_match(const p2p_pending *s, const p2p_pending *r) {
  int st[2];
  return pair_of(s, r, p2pk_p2p_pair_min(s->c, 0), st) && st[0] == (int)cudaStreamCaptureStatusNone &&
         st[1] == (int)cudaStreamCaptureStatusNone;
}

/* Under capture, can the copy engine push a send straight into its receive
 * buffer (ce_p2p_mp.c; pair_of from cep_direct_p2p_min, both streams
 * capturing)? Both ends decide alike: a pair found here, or neither (the
 * kernel). */
static int direct_match(const p2p_pending *s, const p2p_pending *r) {
  int st[2];
  return pair_of(s, r, p2pk_p2p_pair_min(s->c, 1), st) &&
         st[0] == (int)cudaStreamCaptureStatusActive && st[1] == (int)cudaStreamCaptureStatusActive;
}

/* The copy engine moves each matched send into its receive. Three passes:
 * every receiver's stream first records where it stands before the group
 * (`ready`); then each copy waits for its receiver's `ready` and records
 * `done`; then each receiver's stream waits for its `done`. Recording every
 * `ready` before any copy is queued keeps the copies of a pair of ranks that
 * send to each other concurrent (a later `ready` would sit behind the first
 * copy). Every wait reaches back only to work queued before the group, so no
 * cycle can form with the kernels of the group's other operations. */
static p2pkit_status_t ce_copies(const p2p_pending *const *snd, const p2p_pending *const *rcv,
                                 int np) {
  cudaEvent_t ready[P2PK_P2P_QUEUE] = {0}, done[P2PK_P2P_QUEUE] = {0};
  int prev = -1, bad = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSuccess;
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    e = cudaSetDevice(rcv[k]->c->device);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ready[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ready[k], (cudaStream_t)rcv[k]->stream);
    if (e != cudaSuccess) bad = k;
  }
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    const p2p_pending *s = snd[k], *r = rcv[k];
    e = cudaSetDevice(s->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)s->stream, ready[k], 0);
    if (e == cudaSuccess)
      e = cudaMemcpyPeerAsync(r->buf, r->c->device, s->buf, s->c->device, s->bytes,
                              (cudaStream_t)s->stream);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&done[k], cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(done[k], (cudaStream_t)s->stream);
    if (e != cudaSuccess) bad = k;
  }
  for (int k = 0; k < np && e == cudaSuccess; k++) {
    e = cudaSetDevice(rcv[k]->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)rcv[k]->stream, done[k], 0);
    if (e != cudaSuccess) bad = k;
  }
  /* Destroying a recorded event is fine: it is released once it completes. */
  for (int k = 0; k < np; k++) {
    if (ready[k]) cudaEventDestroy(ready[k]);
    if (done[k]) cudaEventDestroy(done[k]);
  }
  if (prev >= 0) cudaSetDevice(prev);
  if (e != cudaSuccess)
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d -> rank %d: copy engine: %s", opname,
                     snd[bad]->c->rank, rcv[bad]->c->rank, cudaGetErrorString(e));
  for (int k = 0; k < np; k++) {
    struct p2pkit_comm *cs = snd[k]->c, *cr = rcv[k]->c;
    if (cs->logged & P2PK_LOGGED_CE) continue;
    cs->logged |= P2PK_LOGGED_CE;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d) -> rank %d (GPU %d): send/recv of %zu B and more "
              "uses the copy engine (both ranks in this process)", cs->rank, cs->device, cr->rank,
              cr->device, cs->sendrecv_ce_min);
  }
  return P2PKIT_SUCCESS;
}

/* The queued operations of queue[i]'s communicator from i on that `taken`
 * does not mark yet, in queue order; marks them. */
static int take_comm(int i, int *taken, p2p_pending *ops) {
  int n = 0;
  for (int j = i; j < queued; j++)
    if (!taken[j] && queue[j].c == queue[i].c) ops[n++] = queue[j], taken[j] = 1;
  return n;
}

/* May c's launch on `stream` be a job for the launch threads
 * (p2pk_jobs_ok, and `stream` not capturing)? Keeps the current GPU. */
static int job_ok(const struct p2pkit_comm *c, p2pkit_stream_t stream) {
  if (!p2pk_jobs_ok(c)) return 0;
  int prev = -1;
  cudaGetDevice(&prev);
  const int cs = capture_of(c, stream);
  if (prev >= 0) cudaSetDevice(prev);
  return cs == (int)cudaStreamCaptureStatusNone;
}

/* A communicator's sends and receives made by a launch thread (launch_pool.c). */
static p2pkit_status_t p2p_job(const p2pk_job *j) {
  return launch_comm(j->c, (const p2p_pending *)j->ops, j->nops);
}

/* Launch everything queued: copy-engine pairs first (one process), then one
 * kernel per communicator for the rest, in queue order; at a group's end
 * (`grouped`) one process's kernels from a thread per GPU at once. */
static p2pkit_status_t flush(int grouped) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  int done[P2PK_P2P_QUEUE] = {0}, checked[P2PK_P2P_QUEUE] = {0};
  p2p_pending ops[P2PK_P2P_QUEUE];
  /* Every communicator's operations must be valid before any is moved. */
  for (int i = 0; i < queued && st == P2PKIT_SUCCESS; i++)
    if (!checked[i]) {
      int n = take_comm(i, checked, ops);
      st = check_ops(queue[i].c, ops, n);
    }
  if (st != P2PKIT_SUCCESS) {
    queued = 0;
    return st;
  }
  const p2p_pending *snd[P2PK_P2P_QUEUE], *rcv[P2PK_P2P_QUEUE];
  int np = 0;
  for (int i = 0; i < queued; i++)
    for (int j = 0; j < queued && !done[i]; j++)
      if (!done[j] && ce_match(&queue[i], &queue[j])) {
        done[i] = done[j] = 1;
        snd[np] = &queue[i], rcv[np] = &queue[j], np++;
      }
  if (np) st = ce_copies(snd, rcv, np);
  /* Under capture, the pairs of this process whose both ends are here:
   * the copy engine straight into the receive buffer (launch_comm). */
  for (int i = 0; i < queued; i++) queue[i].peer_buf = NULL;
  for (int i = 0; i < queued; i++)
    for (int j = 0; j < queued && !done[i] && !queue[i].peer_buf; j++)
      if (!done[j] && !queue[j].peer_buf && direct_match(&queue[i], &queue[j]))
        queue[i].peer_buf = queue[j].buf, queue[j].peer_buf = queue[i].buf;
  /* Each communicator's operations in their own part of ops[], kept until
   * the jobs ran. */
  int used = 0;
  for (int i = 0; i < queued; i++) {
    if (done[i]) continue;
    p2p_pending *mine = ops + used;
    int n = take_comm(i, done, mine);
    used += n;
    p2pkit_status_t s = P2PKIT_SUCCESS;
    if (grouped && job_ok(queue[i].c, queue[i].stream)) {
      p2pk_job j = {.c = queue[i].c, .run = p2p_job, .ops = mine, .nops = n};
      s = p2pk_job_defer(&j);
    } else {
      s = launch_comm(queue[i].c, mine, n);
    }
    if (st == P2PKIT_SUCCESS) st = s;
  }
  p2pkit_status_t s = p2pk_jobs_run();
  if (st == P2PKIT_SUCCESS) st = s;
  queued = 0;
  return st;
}

/* ---- collectives over the copy engines (one process) ----------------------
 * Inside a group, a large collective of a one-process communicator (a
 * broadcast from P2PKIT_BCAST_CE_MIN; over P2P an all-reduce, reduce-scatter
 * or all-gather from its P2PKIT_CE_*_MIN; without P2P an all-reduce from
 * P2PKIT_STAGED_CE_MIN) waits here until the group ends, or until a call
 * that cannot wait comes (it must not overtake them). When every rank's call
 * of the same collective is queued, the copy engines run it: the broadcast
 * below, the others in ce_p2p.c and ce_staged.c, ordered by events. Anything
 * else (a rank missing, a different collective or arguments, a stream being
 * captured) launches the kernel instead, in queue order, so every rank of a
 * collective takes the same path. One queue for every kind keeps the
 * callers' order. The broadcast: the receivers record `ready` where their
 * streams stand, the root's side stream waits for them and for the root's
 * `start`, cudaMemcpyPeerAsync writes every receiver's output while the
 * root's own copy runs on its stream, and everyone waits for `done`. */

static _Thread_local int ncq, cq_flushing;
static _Thread_local int g_kernel_only; /* ce_flush: this launch takes the kernel */

int p2pk_group_kernel_only(void) { return g_kernel_only; }
static _Thread_local p2pk_ce_pending cq[P2PK_P2P_QUEUE];

int p2pk_group_waits(const struct p2pkit_comm *c, int kind, size_t bytes) {
  const size_t min = c->ce_min[kind]; /* p2pk_ce_min, fixed at init: no lookup per call */
  return min && bytes >= min && c->group;
}

int p2pk_group_defer(struct p2pkit_comm *c, int kind, const void *sendbuf, void *recvbuf,
                     size_t count, p2pkit_dtype_t dtype, p2pkit_redop_t op, int root, size_t bytes,
                     p2pkit_stream_t stream) {
  if (group_depth <= 0 || kind < 0 || kind >= P2PK_COLL_KINDS || p2pk_jobs_running()) return 0;
  if (!p2pk_group_waits(c, kind, bytes) || cq_flushing || ncq == P2PK_P2P_QUEUE) return 0;
  cq[ncq++] = (p2pk_ce_pending){.kind = kind, .c = c, .send = sendbuf, .recv = recvbuf,
                                 .count = count, .bytes = bytes, .dtype = dtype, .op = op,
                                 .root = root, .stream = stream};
  return 1;
}

/* set[r]: rank r's call of one broadcast (all checked alike). */
static p2pkit_status_t bcast_ce(p2pk_ce_pending *const *set, int n) {
  const p2pk_ce_pending *R = set[set[0]->root];
  struct p2pkit_comm *rc = R->c;
  cudaError_t e = cudaSuccess;
  int bad = R->c->rank;
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == R->root) continue;
    struct p2pkit_comm *c = set[r]->c;
    e = cudaSetDevice(c->device);
    if (e == cudaSuccess) e = p2pk_lazy_event(&c->ce_ev[0]);
    if (e == cudaSuccess) e = cudaEventRecord(c->ce_ev[0], (cudaStream_t)set[r]->stream);
    if (e != cudaSuccess) bad = r;
  }
  if (e == cudaSuccess) e = cudaSetDevice(rc->device);
  if (e == cudaSuccess) e = p2pk_lazy_stream(&rc->ce_side);
  if (e == cudaSuccess) e = p2pk_lazy_event(&rc->ce_ev[1]);
  if (e == cudaSuccess) e = p2pk_lazy_event(&rc->ce_ev[2]);
  if (e == cudaSuccess) e = cudaEventRecord(rc->ce_ev[1], (cudaStream_t)R->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(rc->ce_side, rc->ce_ev[1], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (r != R->root) e = cudaStreamWaitEvent(rc->ce_side, set[r]->c->ce_ev[0], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++)
    if (r != R->root)
      e = cudaMemcpyPeerAsync(set[r]->recv, set[r]->c->device, R->send, rc->device, R->bytes,
                              rc->ce_side);
  if (e == cudaSuccess) e = cudaEventRecord(rc->ce_ev[2], rc->ce_side);
  if (e == cudaSuccess && R->send != R->recv)
    e = cudaMemcpyAsync(R->recv, R->send, R->bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)R->stream);
  if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)R->stream, rc->ce_ev[2], 0);
  for (int r = 0; r < n && e == cudaSuccess; r++) {
    if (r == R->root) continue;
    e = cudaSetDevice(set[r]->c->device);
    if (e == cudaSuccess) e = cudaStreamWaitEvent((cudaStream_t)set[r]->stream, rc->ce_ev[2], 0);
    if (e != cudaSuccess) bad = r;
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "broadcast: rank %d (root %d): copy engine: %s", bad,
                     R->root, cudaGetErrorString(e));
  }
  if (!rc->bcast_ce_logged) {
    rc->bcast_ce_logged = 1;
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): broadcast of %zu B as root uses the copy engine "
              "(every rank in this process, in one group; P2PKIT_BCAST_CE_MIN=%zu)", rc->rank,
              rc->device, R->bytes, p2pk_param_size("P2PKIT_BCAST_CE_MIN"));
  }
  return P2PKIT_SUCCESS;
}

/* Every rank's call of `a` is queued and being captured: do the copy
 * engines push straight into the peers' outputs (p2pk_cep_direct)? An
 * all-reduce, broadcast, all-gather or all-to-all from its threshold
 * under capture (cep_min). */
static int direct_ok(const p2pk_ce_pending *a) {
  const struct p2pkit_comm *c = a->c;
  if (c->staged || !c->lay.cep_slot) return 0;
  if (a->kind != P2PK_COLL_ALL_REDUCE && a->kind != P2PK_COLL_BROADCAST &&
      a->kind != P2PK_COLL_ALL_TO_ALL && a->kind != P2PK_COLL_ALL_GATHER)
    return 0;
  return c->cep_min[a->kind] && a->bytes >= c->cep_min[a->kind];
}

int p2pk_group_route(const p2pk_ce_pending *a, int whole, int cap, int nr, int in_place) {
  /* All-to-all by the copy engines swaps blocks between buffers: in
   * place (on any rank) every rank takes the kernel. */
  const int kernel_all =
      whole && ((cap > 0 && cap < nr) || (a->kind == P2PK_COLL_ALL_TO_ALL && in_place));
  if (whole && !cap && !kernel_all) return P2PK_GROUP_EVENTS;
  if (whole && cap == nr && !kernel_all && direct_ok(a)) return P2PK_GROUP_DIRECT;
  return kernel_all ? P2PK_GROUP_KERNELS : P2PK_GROUP_EACH;
}

/* Launch every queued call in queue order: by the copy engines where all
 * ranks' calls of it are here and agree (events eagerly; under capture
 * straight into the peers' outputs for all-reduce and broadcast), else by
 * p2pk_coll_launch (under capture the landing slots or the kernel). */
static p2pkit_status_t ce_flush(void) {
  if (!ncq) return P2PKIT_SUCCESS;
  int n = ncq;
  p2pk_ce_pending q[P2PK_P2P_QUEUE];
  memcpy(q, cq, (size_t)n * sizeof q[0]);
  ncq = 0;
  cq_flushing = 1;
  int done[P2PK_P2P_QUEUE] = {0};
  int prev = -1;
  cudaGetDevice(&prev);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < n && st == P2PKIT_SUCCESS; i++) {
    if (done[i]) continue;
    const p2pk_group *g = q[i].c->group;
    int nr = q[i].c->nranks, whole = g->n == nr;
    p2pk_ce_pending *set[P2PK_COLL_MAX_RANKS] = {0};
    int at[P2PK_COLL_MAX_RANKS];
    /* Each rank's first call not yet launched is its part of this one. */
    for (int r = 0; r < nr && whole; r++) {
      at[r] = -1;
      for (int j = i; j < n && at[r] < 0; j++)
        if (!done[j] && q[j].c == g->comms[r]) at[r] = j;
      if (at[r] < 0) whole = 0;
      else set[r] = &q[at[r]];
    }
    int cap = 0, in_place = 0;
    for (int r = 0; r < nr && whole; r++) {
      const p2pk_ce_pending *b = set[r];
      if (b->c->rank != r || b->kind != q[i].kind || b->root != q[i].root ||
          b->bytes != q[i].bytes || b->dtype != q[i].dtype || b->op != q[i].op)
        whole = 0;
      else
        cap += capturing(b->c, b->stream), in_place |= b->send == b->recv;
    }
    const int route = p2pk_group_route(&q[i], whole, cap, nr, in_place);
    if (route == P2PK_GROUP_EVENTS) {
      st = q[i].kind == P2PK_COLL_BROADCAST ? bcast_ce(set, nr) : p2pk_ce_collective(set, nr, q[i].kind);
      for (int r = 0; r < nr; r++) done[at[r]] = 1;
      continue;
    }
    if (route == P2PK_GROUP_DIRECT) {
      st = p2pk_cep_direct(set, nr, q[i].kind);
      for (int r = 0; r < nr; r++) done[at[r]] = 1;
      continue;
    }
    if (route == P2PK_GROUP_KERNELS) {
      /* Some ranks' streams capture, some not (each would pick its path by
       * its own), or an all-to-all in place: all of them take the kernel. */
      for (int r = 0; r < nr && st == P2PKIT_SUCCESS; r++) {
        done[at[r]] = 1;
        g_kernel_only = 1;
        st = p2pk_coll_launch(set[r]->c, set[r]->kind, set[r]->send, set[r]->recv, set[r]->count,
                              set[r]->dtype, set[r]->op, set[r]->root, set[r]->stream);
        g_kernel_only = 0;
      }
      continue;
    }
    done[i] = 1;
    st = p2pk_coll_launch(q[i].c, q[i].kind, q[i].send, q[i].recv, q[i].count, q[i].dtype,
                          q[i].op, q[i].root, q[i].stream);
  }
  cq_flushing = 0;
  if (prev >= 0) cudaSetDevice(prev);
  return st;
}

/* Launch what the copy-engine queue holds, after the kernel launches
 * queued before it (launch_pool.c). */
p2pkit_status_t p2pk_group_collective(void) {
  if (!ncq || cq_flushing || p2pk_jobs_running()) return P2PKIT_SUCCESS;
  p2pkit_status_t st = p2pk_jobs_run();
  p2pkit_status_t s2 = ce_flush();
  return st != P2PKIT_SUCCESS ? st : s2;
}

int p2pk_group_job_ok(const struct p2pkit_comm *c, p2pkit_stream_t stream) {
  return group_depth > 0 && !cq_flushing && !g_kernel_only && job_ok(c, stream);
}

int p2pk_group_open(void) { return group_depth > 0; }

p2pkit_status_t p2pkit_group_start(void) {
  group_depth++;
  return P2PKIT_SUCCESS;
}

/* Collectives launch at once (their launches never block on peers), except
 * those that may use the copy engines; queued collectives, then queued
 * sends and receives, launch here. */
p2pkit_status_t p2pkit_group_end(void) {
  if (group_depth <= 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_group_end without p2pkit_group_start");
  if (--group_depth > 0) return P2PKIT_SUCCESS;
  /* The collectives' kernels (launch threads), those queued for the copy
   * engines, then sends and receives. */
  p2pkit_status_t st = p2pk_jobs_run();
  p2pkit_status_t s1 = p2pk_group_collective();
  p2pkit_status_t s2 = flush(1);
  if (st == P2PKIT_SUCCESS) st = s1;
  return st != P2PKIT_SUCCESS ? st : s2;
}

static p2pkit_status_t post(int send, void *buf, size_t count, p2pkit_dtype_t dtype, int peer,
                            struct p2pkit_comm *c, p2pkit_stream_t stream) {
  const char *name = send ? "send" : "recv";
  size_t es = 0;
  P2PK_CHECK(p2pk_coll_check_args(c, name, dtype, 0, P2PKIT_SUM, count, &es));
  if (peer < 0 || peer >= c->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: peer %d is not a rank of %d", name,
                     c->rank, peer, c->nranks);
  if (count == 0) return P2PKIT_SUCCESS;
  if (!buf) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer is NULL", name, c->rank);
  P2PK_CHECK(p2pk_comm_async_status(c));
  if ((uintptr_t)buf % es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: buffer %p is not aligned to its "
                     "%zu-byte %s elements", name, c->rank, buf, es, p2pkit_dtype_name(dtype));
  int unused = 0;
  P2PK_CHECK(p2pk_coll_check_ptr(c, buf, send ? "sendbuf" : "recvbuf", &unused));
  if (queued == P2PK_P2P_QUEUE) {
    queued = 0;
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: more than %d sends and receives in one "
                     "group", name, P2PK_P2P_QUEUE);
  }
  p2p_pending *o = &queue[queued++];
  o->c = c;
  o->send = send;
  o->peer = peer;
  o->buf = buf;
  o->bytes = count * es;
  o->esize = es;
  o->stream = stream;
  return group_depth > 0 ? P2PKIT_SUCCESS : flush(0);
}

p2pkit_status_t p2pkit_send(const void *sendbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(1, (void *)(uintptr_t)sendbuf, count, dtype, peer, comm, stream);
}

p2pkit_status_t p2pkit_recv(void *recvbuf, size_t count, p2pkit_dtype_t dtype, int peer,
                            p2pkit_comm_t comm, p2pkit_stream_t stream) {
  return post(0, recvbuf, count, dtype, peer, comm, stream);
}
