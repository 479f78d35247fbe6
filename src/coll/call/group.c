/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups: every call, checked by enqueue.c, waits in this thread's group
 * (p2pkit_group_start / _end; outside one, a group of its own) and is
 * launched at the group's end: the selector picks its path, the path
 * launches it. Collectives go in the callers' order; a large one of a
 * one-process communicator that may take the copy engines with every
 * rank's call (P2PK_FROM_EVENTS) waits until a call that cannot wait comes
 * or the group ends, and then goes with its peers' calls as one
 * (path->launch_group) when all of them are there and agree, else on its
 * own. Sends and receives go after the collectives: pairs of this process
 * first (the copy engines), then one launch per communicator. One process
 * in a group: its kernels are made by a thread per GPU (launch_pool.c). */
#include <cuda_runtime_api.h>
#include <string.h>

#include "coll/paths/path.h"
#include "coll/call/trace.h"
#include "core/check.h"
#include "core/log.h"
#include "nccl/dtype.h"

static _Thread_local int depth;  /* the caller's groups, nested */
static _Thread_local int ncoll, nops;
static _Thread_local p2pk_call colls[P2PK_GROUP_OPS], ops[P2PK_GROUP_OPS];

int p2pk_group_open(void) { return depth > 0; }

/* The capture status of the call's stream into call->capture. */
static p2pkit_status_t ask_capture(p2pk_call *call) {
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  int prev = -1;
  cudaGetDevice(&prev);
  cudaError_t e = cudaSetDevice(call->c->device);
  if (e == cudaSuccess) e = cudaStreamIsCapturing((cudaStream_t)call->stream, &cs);
  if (prev >= 0) cudaSetDevice(prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return p2pk_fail(P2PKIT_ERR_CUDA, "%s: rank %d: asking CUDA whether stream %p of GPU %d "
                     "captures failed: %s", p2pk_call_name(call), call->c->rank,
                     (void *)call->stream, call->c->device, cudaGetErrorString(e));
  }
  call->capture = (int)cs;
  return P2PKIT_SUCCESS;
}

/* The one place a call is decided (the selector's p2pk_decide: its path,
 * algorithm, protocol, grid), into call->d, logged at INFO when `log`.
 * `k`: the call's key as the caller made it (p2pk_call_key, then the
 * group's view: grouped, peers, a set's capture and placement). The
 * capture status is asked of CUDA only when the decision depends on it.
 * *wait (when not NULL): the call waits for its peers' calls (nothing
 * decided). */
static p2pkit_status_t decide_key(p2pk_call *call, p2pk_sel_key *k, int *wait, int log) {
  const struct p2pkit_comm *c = call->c;
  int r;
  while ((r = p2pk_decide(&c->sel, k, &call->d)) == P2PK_DECIDE_ASK) {
    P2PK_CHECK(ask_capture(call));
    k->capture = call->capture != (int)cudaStreamCaptureStatusNone;
  }
  if (wait) *wait = r == P2PK_DECIDE_WAIT;
  if (r == P2PK_DECIDE_WAIT) return P2PKIT_SUCCESS;
  if (r == P2PK_DECIDE_NCCL_APART)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s goes through NCCL, which, with "
                     "one process driving every GPU, needs every rank's call in one group "
                     "(p2pkit_group_start / _end), all eager or all under capture",
                     p2pk_call_name(call), c->rank, p2pkit_dtype_name(call->dtype));
  if (r == P2PK_DECIDE_NCCL_MIXED)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: %s goes through NCCL, and some "
                     "ranks' streams capture while others' do not", p2pk_call_name(call),
                     c->rank, p2pkit_dtype_name(call->dtype));
  if (!p2pk_path_can(p2pk_paths[call->d.path], &c->sel, k))
    return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s: rank %d: the selector's rule %d chose %s, which "
                     "cannot carry this call (the rules and the path disagree)", p2pk_call_name(call),
                     c->rank, call->d.rule + 1, p2pk_path_name(call->d.path));
  if (call->d.flags & P2PK_SEL_NCCL_APART)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d: one process, this call without its peers' in one group: "
              "NCCL needs them together, so the kernels carry it", c->rank);
  if (call->d.flags & P2PK_SEL_AVG_FLAT)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d: avg of %s: through NCCL over every rank (one division)",
              c->rank, p2pkit_dtype_name(call->dtype));
  if (log) p2pk_sel_log(&c->sel, c->rank, k, &call->d);
  return P2PKIT_SUCCESS;
}

/* A call decided on its own: in the caller's group or not (grouped), how
 * it meets its peers' calls (peers, P2PK_PEERS_*). */
static p2pkit_status_t decide(p2pk_call *call, int grouped, int peers, int *wait) {
  p2pk_sel_key k;
  p2pk_call_key(call, &k);
  k.grouped = grouped;
  k.peers = peers;
  return decide_key(call, &k, wait, 1);
}

/* A collective through its path, the communicator's GPU current. */
static p2pkit_status_t launch(const p2pk_call *call) {
  int prev = -1;
  const char *name = p2pk_call_name(call);
  P2PK_CHECK(p2pk_coll_enter(call->c, name, &prev));
  p2pkit_status_t st = p2pk_paths[call->d.path]->launch(call);
  p2pk_coll_leave(call->c, name, prev, cudaSuccess);
  p2pk_trace_launched(call, call->d.path, st);
  return st;
}

static p2pkit_status_t launch_job(const p2pk_job *j) { return launch((const p2pk_call *)j->arg); }

/* A decided collective: a launch thread's job when the selector says so
 * (one process in a group), else now. */
static p2pkit_status_t launch_decided(p2pk_call *call) {
  if (call->d.flags & P2PK_SEL_LAUNCH_THREAD) {
    p2pk_job j = {.c = call->c, .run = launch_job, .arg = call};
    return p2pk_job_defer(&j);
  }
  return launch(call);
}

/* One collective on its own, without its peers' calls. */
static p2pkit_status_t launch_alone(p2pk_call *call) {
  P2PK_CHECK(decide(call, 0, P2PK_PEERS_ALONE, NULL));
  return launch_decided(call);
}

/* Every rank's call of the collective that q[i] is part of: each rank's
 * first call not yet launched (from i on), which must agree with q[i].
 * Returns how many of them capture (asking CUDA), or -1: not every rank's
 * call is there. */
static int gather_set(p2pk_call *const *q, int n, int i, const int *done, p2pk_call **set,
                      int *at, int *in_place) {
  const p2pk_group *g = q[i]->c->group;
  const int nr = q[i]->c->nranks;
  if (!g || g->n != nr) return -1;
  for (int r = 0; r < nr; r++) {
    at[r] = -1;
    for (int j = i; j < n && at[r] < 0; j++)
      if (!done[j] && q[j]->c == g->comms[r]) at[r] = j;
    if (at[r] < 0) return -1;
    set[r] = q[at[r]];
  }
  int cap = 0;
  *in_place = 0;
  for (int r = 0; r < nr; r++) {
    p2pk_call *b = set[r];
    if (b->c->rank != r || b->kind != q[i]->kind || b->root != q[i]->root ||
        b->bytes != q[i]->bytes || b->dtype != q[i]->dtype || b->op != q[i]->op)
      return -1;
    b->capture = p2pk_capture_of(b->c, b->stream);
    cap += b->capture != (int)cudaStreamCaptureStatusNone;
    *in_place |= b->send == b->recv;
  }
  return cap;
}

/* Every rank's call of one collective: together when the selector's path
 * takes whole groups (the copy engines, NCCL), else each on its own; on
 * the kernels when some ranks' streams capture and some do not (each
 * would pick its path by its own). */
static p2pkit_status_t launch_set(p2pk_call *const *set, int nr, int cap, int in_place) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (cap > 0 && cap < nr) {
    for (int r = 0; r < nr && st == P2PKIT_SUCCESS; r++) {
      st = decide(set[r], 0, P2PK_PEERS_MIXED, NULL);
      if (st == P2PKIT_SUCCESS) st = launch(set[r]);
    }
    return st;
  }
  p2pk_sel_key k;
  p2pk_call_key(set[0], &k);
  k.grouped = 1;
  k.capture = cap == nr;
  k.in_place = in_place;
  p2pk_call whole = *set[0]; /* the set's decision, logged by every rank if taken whole */
  P2PK_CHECK(decide_key(&whole, &k, NULL, 0));
  const p2pk_path *p = p2pk_paths[whole.d.path];
  if (!p->launch_group) {
    for (int r = 0; r < nr && st == P2PKIT_SUCCESS; r++) st = launch_alone(set[r]);
    return st;
  }
  for (int r = 0; r < nr; r++) set[r]->d = whole.d;
  for (int r = 0; r < nr; r++) p2pk_sel_log(&set[r]->c->sel, set[r]->c->rank, &k, &whole.d);
  st = p->launch_group(set, nr);
  for (int r = 0; r < nr; r++) p2pk_trace_launched(set[r], whole.d.path, st);
  return st;
}

/* The collectives that waited for their peers' calls, in order (the
 * kernel launches queued before them first). */
static p2pkit_status_t launch_waiting(p2pk_call *const *q, int n) {
  if (!n) return P2PKIT_SUCCESS;
  p2pkit_status_t st = p2pk_jobs_run();
  int done[P2PK_GROUP_OPS] = {0};
  int prev = -1;
  cudaGetDevice(&prev);
  for (int i = 0; i < n && st == P2PKIT_SUCCESS; i++) {
    if (done[i]) continue;
    p2pk_call *set[P2PK_COLL_MAX_RANKS];
    int at[P2PK_COLL_MAX_RANKS], in_place = 0;
    const int cap = gather_set(q, n, i, done, set, at, &in_place);
    if (cap < 0) {
      done[i] = 1;
      st = launch_alone(q[i]);
      continue;
    }
    for (int r = 0; r < q[i]->c->nranks; r++) done[at[r]] = 1;
    st = launch_set(set, q[i]->c->nranks, cap, in_place);
  }
  if (prev >= 0) cudaSetDevice(prev);
  return st;
}

/* The queued collectives, in order: each decided as it comes (in the
 * caller's group, one process: its peers' calls maybe to come, so it may
 * wait for them); the waiting ones launched before the next that does not
 * wait, and at the end. */
static p2pkit_status_t run_colls(int grouped) {
  if (!ncoll) return P2PKIT_SUCCESS;
  p2pk_call *w[P2PK_GROUP_OPS];
  int nw = 0;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < ncoll && st == P2PKIT_SUCCESS; i++) {
    int wait = 0;
    const p2pkit_status_t d =
        decide(&colls[i], grouped, grouped ? P2PK_PEERS_QUEUED : P2PK_PEERS_ALONE, &wait);
    if (d == P2PKIT_SUCCESS && wait) {
      w[nw++] = &colls[i];
      continue;
    }
    st = launch_waiting(w, nw);
    nw = 0;
    if (st == P2PKIT_SUCCESS) st = d;
    if (st == P2PKIT_SUCCESS) st = launch_decided(&colls[i]);
  }
  p2pkit_status_t s = launch_waiting(w, st == P2PKIT_SUCCESS ? nw : 0);
  if (st == P2PKIT_SUCCESS) st = s;
  s = p2pk_jobs_run();
  for (int i = 0; i < ncoll; i++) p2pk_trace_dropped(&colls[i]); /* those an error left */
  ncoll = 0;
  return st != P2PKIT_SUCCESS ? st : s;
}

/* One collective on a communicator from inside another call (the
 * hierarchical path's steps on a host's communicator, through
 * c->sub_launch): its plan, its decision, its path's launch on the
 * caller's stream. No group, no checks beyond the plan's: the caller made
 * the buffers. */
p2pkit_status_t p2pk_sub_launch(p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  const char *name = p2pk_coll_name(call->kind);
  P2PK_CHECK(p2pk_coll_plan_make(call->kind, c->rank, c->nranks, call->root, call->bytes,
                                 call->send, call->recv, &call->plan));
  P2PK_CHECK(decide(call, 0, P2PK_PEERS_RULES, NULL));
  const p2pk_path *p = p2pk_paths[call->d.path];
  if (!p->launch)
    return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s: rank %d: path %s takes no single call", name,
                     c->rank, p2pk_path_name(call->d.path));
  int prev = -1;
  P2PK_CHECK(p2pk_coll_enter(c, name, &prev));
  const p2pkit_status_t st = p->launch(call);
  p2pk_coll_leave(c, name, prev, cudaSuccess);
  return st;
}

/* ------------------------------------------------------------ send/recv -- */

/* The rules for the operations of one communicator in a group: one stream;
 * at most one send and one receive per peer; a send to itself pairs with a
 * receive from itself of the same size (a local copy). */
static p2pkit_status_t check_ops(const struct p2pkit_comm *c, const p2pk_call *const *o, int n) {
  static const char opname[] = "send/recv";
  int seen[2][P2PK_COLL_MAX_RANKS] = {{0}};
  const p2pk_call *self[2] = {NULL, NULL};
  for (int i = 0; i < n; i++) {
    if (o[i]->stream != o[0]->stream)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: the operations of one group on "
                       "one communicator must use one stream", opname, c->rank);
    if (seen[o[i]->is_send][o[i]->root]++)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: rank %d: more than one %s %s rank %d in "
                       "one group (p2pkit allows one each way per peer)", opname, c->rank,
                       o[i]->is_send ? "send" : "receive", o[i]->is_send ? "to" : "from", o[i]->root);
    if (o[i]->root == c->rank) self[o[i]->is_send] = o[i];
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

/* The queued operations of ops[i]'s communicator from i on that `taken`
 * does not mark yet, in queue order; marks them. */
static int take_comm(int i, int *taken, p2pk_call **mine) {
  int n = 0;
  for (int j = i; j < nops; j++)
    if (!taken[j] && ops[j].c == ops[i].c) mine[n++] = &ops[j], taken[j] = 1;
  return n;
}

static p2pkit_status_t check_all(void) {
  int checked[P2PK_GROUP_OPS] = {0};
  p2pk_call *mine[P2PK_GROUP_OPS];
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < nops && st == P2PKIT_SUCCESS; i++)
    if (!checked[i]) {
      const int n = take_comm(i, checked, mine);
      st = check_ops(ops[i].c, (const p2pk_call *const *)mine, n);
    }
  return st;
}

/* Are s (a send) and r its receive, both queued here: the same
 * one-process communicator (its p2pk_group), P2P, the same size, both
 * streams eager (events) or both capturing (straight in), from the size
 * the selector sets? Then *path: the path that moves them, else -1. An
 * error asking CUDA of a stream or deciding the pair's path is the
 * group's, with its message (the pair is not passed over as another). */
static p2pkit_status_t pair_path(p2pk_call *s, p2pk_call *r, int *path) {
  *path = -1;
  if (!s->is_send || r->is_send || s->bytes != r->bytes || s->root == s->c->rank) return P2PKIT_SUCCESS;
  if (!s->c->group || s->c->group != r->c->group || s->c->staged || r->c->staged) return P2PKIT_SUCCESS;
  if (r->c->rank != s->root || r->root != s->c->rank) return P2PKIT_SUCCESS;
  P2PK_CHECK(ask_capture(s));
  P2PK_CHECK(ask_capture(r));
  const int none = (int)cudaStreamCaptureStatusNone, active = (int)cudaStreamCaptureStatusActive;
  if (!(s->capture == none && r->capture == none) && !(s->capture == active && r->capture == active))
    return P2PKIT_SUCCESS;
  p2pk_sel_key k;
  p2pk_call_key(s, &k);
  k.grouped = 1;
  p2pk_call c = *s;
  P2PK_CHECK(decide_key(&c, &k, NULL, 0));
  if (c.d.path != P2PK_PATH_CE_EVENTS && c.d.path != P2PK_PATH_CE_DIRECT) return P2PKIT_SUCCESS;
  p2pk_sel_log(&s->c->sel, s->c->rank, &k, &c.d);
  *path = c.d.path;
  return P2PKIT_SUCCESS;
}

/* Pairs of this process: the copy engine moves the eager ones now (all
 * together, so opposite copies run at once); the captured ones go
 * straight in, each end knowing the other's buffer. */
static p2pkit_status_t pair_ops(int *done) {
  const p2pk_call *snd[P2PK_GROUP_OPS], *rcv[P2PK_GROUP_OPS];
  int np = 0;
  for (int i = 0; i < nops; i++) ops[i].peer_buf = NULL;
  for (int i = 0; i < nops; i++)
    for (int j = 0; j < nops && !done[i] && !ops[i].peer_buf; j++) {
      if (done[j] || ops[j].peer_buf) continue;
      int path = -1;
      P2PK_CHECK(pair_path(&ops[i], &ops[j], &path));
      if (path == P2PK_PATH_CE_EVENTS) {
        done[i] = done[j] = 1;
        snd[np] = &ops[i], rcv[np] = &ops[j], np++;
      } else if (path == P2PK_PATH_CE_DIRECT) {
        ops[i].peer_buf = ops[j].recv, ops[j].peer_buf = (char *)ops[i].send;
      }
    }
  if (!np) return P2PKIT_SUCCESS;
  const p2pkit_status_t st = p2pk_paths[P2PK_PATH_CE_EVENTS]->sendrecv_pairs(snd, rcv, np);
  for (int k = 0; k < np; k++) {
    p2pk_trace_launched(snd[k], P2PK_PATH_CE_EVENTS, st);
    p2pk_trace_launched(rcv[k], P2PK_PATH_CE_EVENTS, st);
  }
  return st;
}

/* One communicator's operations (checked, pairs of this process taken):
 * its own copy, the copy engines' share (through the slots, or straight
 * into the other end's buffer), one kernel for the rest, in that order. */
static p2pkit_status_t launch_comm(struct p2pkit_comm *c, p2pk_call *const *mine, int n) {
  p2pk_call self[2], ce[P2PK_P2P_MAX_OPS], kern[P2PK_P2P_MAX_OPS], nccl[P2PK_P2P_MAX_OPS];
  int ns = 0, nc = 0, nk = 0, nn = 0, ce_path = P2PK_PATH_CE_SLOTS;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int i = 0; i < n && st == P2PKIT_SUCCESS; i++) {
    p2pk_call *o = mine[i];
    if (o->root == c->rank) {
      if (ns < 2) self[ns++] = *o;
      continue;
    }
    if (o->peer_buf) {
      ce_path = P2PK_PATH_CE_DIRECT;
      if (nc < P2PK_P2P_MAX_OPS) ce[nc++] = *o;
      continue;
    }
    st = decide(o, 0, P2PK_PEERS_RULES, NULL);
    if (o->d.path == P2PK_PATH_CE_SLOTS && nc < P2PK_P2P_MAX_OPS) ce[nc++] = *o;
    else if (o->d.path == P2PK_PATH_NCCL && nn < P2PK_P2P_MAX_OPS) nccl[nn++] = *o;
    else if (nk < P2PK_P2P_MAX_OPS) kern[nk++] = *o;
  }
  int prev = -1;
  if (st == P2PKIT_SUCCESS) st = p2pk_coll_enter(c, "send/recv", &prev);
  if (st != P2PKIT_SUCCESS) return st;
  if (ns) st = p2pk_paths[P2PK_PATH_LOCAL]->sendrecv(c, self, ns);
  if (st == P2PKIT_SUCCESS && nc) st = p2pk_paths[ce_path]->sendrecv(c, ce, nc);
  if (st == P2PKIT_SUCCESS && nn) st = p2pk_paths[P2PK_PATH_NCCL]->sendrecv(c, nccl, nn);
  if (st == P2PKIT_SUCCESS && nk) st = p2pk_paths[kern[0].d.path]->sendrecv(c, kern, nk);
  p2pk_coll_leave(c, "send/recv", prev, cudaSuccess);
  for (int i = 0; i < n; i++)
    p2pk_trace_launched(mine[i], mine[i]->root == c->rank ? P2PK_PATH_LOCAL
                                 : mine[i]->peer_buf ? P2PK_PATH_CE_DIRECT : mine[i]->d.path, st);
  return st;
}

static p2pkit_status_t comm_job(const p2pk_job *j) {
  return launch_comm(j->c, (p2pk_call *const *)j->arg, j->kind);
}

/* Everything queued: the pairs of this process first, then one launch
 * per communicator for the rest, in queue order; in the caller's group,
 * one process's from a thread per GPU at once. */
static p2pkit_status_t run_ops(int grouped) {
  if (!nops) return P2PKIT_SUCCESS;
  p2pkit_status_t st = check_all();
  int done[P2PK_GROUP_OPS] = {0};
  if (st == P2PKIT_SUCCESS) st = pair_ops(done);
  p2pk_call *mine[P2PK_GROUP_OPS];
  int used = 0, prev = -1;
  cudaGetDevice(&prev);
  for (int i = 0; i < nops && st == P2PKIT_SUCCESS; i++) {
    if (done[i]) continue;
    p2pk_call **m = mine + used;
    const int n = take_comm(i, done, m);
    used += n;
    struct p2pkit_comm *c = ops[i].c;
    if (grouped && p2pk_jobs_ok(c) &&
        p2pk_capture_of(c, ops[i].stream) == (int)cudaStreamCaptureStatusNone) {
      p2pk_job j = {.c = c, .run = comm_job, .arg = m, .kind = n};
      st = p2pk_job_defer(&j);
    } else {
      st = launch_comm(c, m, n);
    }
  }
  if (prev >= 0) cudaSetDevice(prev);
  p2pkit_status_t s = p2pk_jobs_run();
  for (int i = 0; i < nops; i++) p2pk_trace_dropped(&ops[i]); /* refused, or left by an error */
  nops = 0;
  return st != P2PKIT_SUCCESS ? st : s;
}

/* ---------------------------------------------------------------- groups -- */

p2pkit_status_t p2pkit_group_start(void) {
  depth++;
  return P2PKIT_SUCCESS;
}

/* One process driving several GPUs with NCCL on: the group's NCCL calls
 * of every rank go in one NCCL group (NCCL's rule for one thread driving
 * several GPUs), enqueued at its end, after the group's other calls. */
static int nccl_grouped(int grouped) {
  for (int i = 0; grouped && i < ncoll + nops; i++) {
    const struct p2pkit_comm *c = i < ncoll ? colls[i].c : ops[i - ncoll].c;
    if (!c->multiproc && c->nranks > 1 && c->nccl_mode != P2PK_NCCL_OFF) return 1;
  }
  return 0;
}

/* The collectives, then the sends and receives. */
static p2pkit_status_t run_group(int grouped) {
  const int ng = nccl_grouped(grouped);
  for (int i = 0; ng && i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->group_open) p2pk_paths[i]->group_open();
  p2pkit_status_t st = run_colls(grouped);
  p2pkit_status_t s = run_ops(grouped);
  for (int i = 0; ng && i < P2PK_PATHS; i++)
    if (p2pk_paths[i]->group_close) {
      const p2pkit_status_t e = p2pk_paths[i]->group_close();
      if (s == P2PKIT_SUCCESS) s = e;
    }
  return st != P2PKIT_SUCCESS ? st : s;
}

p2pkit_status_t p2pkit_group_end(void) {
  if (depth <= 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_group_end without p2pkit_group_start");
  if (--depth > 0) return P2PKIT_SUCCESS;
  return run_group(1);
}

int p2pk_group_room(void) { return P2PK_GROUP_OPS - nops; }

p2pkit_status_t p2pk_group_add(const p2pk_call *call) {
  const int op = call->kind == P2PK_SENDRECV;
  if (op && nops == P2PK_GROUP_OPS) {
    for (int i = 0; i < nops; i++) p2pk_trace_dropped(&ops[i]);
    nops = 0;
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%s: more than %d sends and receives in one "
                     "group", p2pk_call_name(call), P2PK_GROUP_OPS);
  }
  /* A full group launches its collectives so far (their order kept). */
  if (!op && ncoll == P2PK_GROUP_OPS) P2PK_CHECK(run_colls(depth > 0));
  p2pk_call *q = op ? &ops[nops++] : &colls[ncoll++];
  *q = *call;
  p2pk_trace_record(q);
  /* Outside a group: a group of its own. */
  return depth > 0 ? P2PKIT_SUCCESS : run_group(0);
}
