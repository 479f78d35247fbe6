/* SPDX-License-Identifier: BSD-3-Clause */
/* Send/recv, out-of-place all-to-all and all-gather with a process per GPU
 * straight into a registered receive buffer (dmbox.h has the host side;
 * recvmap.c the buffers shared on demand). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "coll/paths/ce/cep.h"
#include "core/clock.h"
#include "core/log.h"

/* Send/recv with a process per GPU straight into a registered receive
 * buffer ("straight in"; dmbox.h has the host side). For each call over
 * the copy engines (number q of the pair, both ends counting alike):
 * - the receiver's host describes its buffer (registration and offset;
 *   with P2PKIT_SENDRECV_MAP its allocation; or "no") and never waits for
 *   that;
 * - the sender's host waits for the description up to its patience
 *   (P2PKIT_SENDRECV_DIRECT_WAIT_US) and decides: straight in when the
 *   description names a registration it maps (or an allocation it maps on
 *   demand) and the sizes agree;
 * - the receiver's host waits for the decision up to its patience, then
 *   decides the slots itself: one decision per call, whoever comes first;
 * - straight in: the receiver's stream posts rdy at the sender (its buffer
 *   is free), takes the first chunk's full flag with the header marked
 *   P2PK_CEP_HDR_DIRECT and releases that slot; the sender claims the
 *   first chunk's slot whole, as a push would, takes rdy, copies the whole
 *   message once into the IPC-mapped buffer and sets the flag, marked;
 * - the slots: as ever.
 * Every flag returns to 0, so a CUDA graph replays either way; both ends
 * advance their slot turns by the call's chunks either way.
 *
 * Why: through the slots a call pays ~3.5 us a chunk boundary and the last
 * 96 MiB chunk's copy out (~95 us) after the link goes quiet. Straight in,
 * decided once per call, 1 GiB took 2763 us against 2863 through the
 * slots on 2x H200 (1.08x NCCL registered alike; under a graph 2756).
 * By default registered buffers only: mapping another
 * buffer on the fly leaves a peer mapping memory its owner may free
 * (undefined for CUDA IPC); P2PKIT_SENDRECV_MAP is the opt-in for callers
 * who promise not to (recvmap.c). */

/* How long to wait on the host for peer p this call: the full patience,
 * or none for the next 16 calls after one that waited in vain. */
#define DMB_REST 16

static uint64_t dmb_patience(struct p2pkit_comm *c, uint32_t *rest) {
  if (*rest) {
    (*rest)--;
    return 0;
  }
  return SI(c)->wait_ns;
}

/* A host wait for a peer that began at t0 (0: none) is over. */
static void dmb_waited(struct p2pkit_comm *c, uint64_t t0) {
  if (!t0) return;
  const uint64_t w = p2pk_now_ns() - t0;
  SI(c)->wait_ns_sum += w;
  if (w > SI(c)->wait_max_ns) SI(c)->wait_max_ns = w;
}

static void dmb_missed_note(struct p2pkit_comm *c, uint32_t *rest, int p, uint64_t q, const char *what) {
  if (!SI(c)->wait_ns || *rest) return;
  *rest = DMB_REST;
  if (SI(c)->missed++ < 4)
    P2PK_INFO(P2PK_LOG_COLL, "rank %d (GPU %d): call %llu with rank %d: %s within %llu us; through "
              "the landing slots (the pair's next %d calls wait no more)", c->rank, c->device,
              (unsigned long long)q, p, what, (unsigned long long)(SI(c)->wait_ns / 1000), DMB_REST);
}

/* The receiver, call q from r: describe its buffer (straight in only into
 * a registration, or with P2PKIT_SENDRECV_MAP into any allocation it can
 * share, and only if `may`; "no" otherwise); 1 if it described one. Never
 * waits. */
static int dmb_describe(struct p2pkit_comm *c, int r, const char *buf, size_t bytes, uint64_t q,
                        int may) {
  p2pk_dmb_desc d;
  memset(&d, 0, sizeof d);
  d.bytes = bytes;
  const p2pk_reg *g = SI(c)->on && may ? p2pk_reg_holding(c, buf, bytes) : NULL;
  if (g) d.off = (uint64_t)(buf - g->buf), d.reg = (uint64_t)g->id + 1;
  const int any = g || (SI(c)->on && may && p2pk_map_describe(c, buf, bytes, &d));
  p2pk_dmb_post(p2pk_dmb_at(c->dmb, c->nranks, r, c->rank, q), q, &d);
  return any;
}

/* The receiver, call q from r, after its sends decided: hear the way
 * (waiting for it only when it described a buffer), or choose the slots:
 * 1 straight in, 0 the slots (counted in dmb_rhow when described). */
static int dmb_hear(struct p2pkit_comm *c, int r, uint64_t q, int described) {
  int chose = 0;
  const uint64_t w = described ? dmb_patience(c, &SI(c)->rrest[r]) : 0;
  const uint64_t t0 = w ? p2pk_now_ns() : 0;
  const int how = p2pk_dmb_decision(p2pk_dmb_at(c->dmb, c->nranks, r, c->rank, q), q, w, &chose);
  dmb_waited(c, t0);
  if (w && chose) dmb_missed_note(c, &SI(c)->rrest[r], r, q, "its sender did not decide");
  if (described) SI(c)->rhow[how]++;
  return how;
}

/* The sender, call q to t: where it lands straight in (t's buffer as this
 * process maps it), or NULL: the slots (always unless `may`); counted in
 * dmb_direct / dmb_slots and, for the slots, dmb_why. */
static char *dmb_send(struct p2pkit_comm *c, int t, size_t bytes, uint64_t q, int may) {
  p2pk_dmb_entry *e = p2pk_dmb_at(c->dmb, c->nranks, c->rank, t, q);
  p2pk_dmb_desc d;
  const int ask = SI(c)->on && may;
  const uint64_t w = ask ? dmb_patience(c, &SI(c)->rest[t]) : 0;
  const uint64_t t0 = w ? p2pk_now_ns() : 0;
  const int got = ask ? p2pk_dmb_take(e, q, w, &d) : -1;
  dmb_waited(c, t0);
  if (got == 0) dmb_missed_note(c, &SI(c)->rest[t], t, q, "its receiver's description did not come");
  const p2pk_reg *g = got == 1 && d.reg && d.bytes == bytes ? p2pk_reg_numbered(c, d.reg - 1) : NULL;
  if (g && (!g->peer[t] || d.off > g->bytes || bytes > g->bytes - d.off)) g = NULL;
  /* Not registered but described whole (P2PKIT_SENDRECV_MAP): mapped here. */
  char *dst = g ? g->peer[t] + d.off : got == 1 ? p2pk_map_peer(c, t, &d, bytes) : NULL;
  const int straight = p2pk_dmb_decide(e, q, dst != NULL) && dst;
  /* Why not straight in (P2PK_DMB_WHY_*), counted for the destroy line. */
  const int why = straight ? -1
                  : !ask ? P2PK_DMB_WHY_NOT_ASKED
                  : got == 0 ? P2PK_DMB_WHY_LATE
                  : got < 0 ? P2PK_DMB_WHY_GONE
                  : !d.reg && !d.bufid ? P2PK_DMB_WHY_NOT_REGISTERED
                  : d.bytes != bytes ? P2PK_DMB_WHY_SIZE
                  : !dst ? P2PK_DMB_WHY_NOT_MAPPED
                  : P2PK_DMB_WHY_RECEIVER_CHOSE;
  if (why >= 0) SI(c)->why[why]++;
  if (straight) SI(c)->direct++, SI(c)->mapped += !g;
  else SI(c)->slots++;
  return straight ? dst : NULL;
}

void p2pk_dmb_agree(struct p2pkit_comm *c, const dmb_op *rv, int nr, const dmb_op *sd, int ns,
                      int may, int *rin, char **sdst) {
  uint64_t q[P2PK_P2P_MAX_OPS];
  for (int i = 0; i < nr; i++) rin[i] = 0;
  for (int j = 0; j < ns; j++) sdst[j] = NULL;
  if (!c->dmb) return;
  for (int i = 0; i < nr; i++) {
    q[i] = SI(c)->recvd[rv[i].peer]++;
    rin[i] = dmb_describe(c, rv[i].peer, rv[i].buf, rv[i].bytes, q[i], may);
  }
  for (int j = 0; j < ns; j++) sdst[j] = dmb_send(c, sd[j].peer, sd[j].bytes, SI(c)->sent[sd[j].peer]++, may);
  for (int i = 0; i < nr; i++) rin[i] = dmb_hear(c, rv[i].peer, q[i], rin[i]);
}

/* A send straight in (to t, header hv): on W the first chunk's slot
 * claimed whole, as a push would, and t's rdy taken; the copy on the side
 * stream; on P the first chunk's full flag with the marked header. */
cudaError_t p2pk_cep_push_straight(struct p2pkit_comm *c, int t, const char *src, char *dst,
                                 size_t bytes, uint64_t hv) {
  const int me = c->rank, s = (int)(CEP(c)->sent[t] % c->lay.cep_depth);
  cudaStream_t side = c->ce->side;
  cep_batch_t bw, bp;
  p2pk_cep_batch(&bw, c, c->ce->step[S_WAIT]);
  p2pk_cep_batch(&bp, c, c->ce->step[S_POST]);
  p2pk_cep_claim(&bw, &CTRL(me)->cep_busy[t][s], t);
  p2pk_cep_claim(&bw, &CTRL(me)->cep_rbusy[t][s], t);
  p2pk_cep_take(&bw, &CTRL(me)->cep_rdy[t], NULL, 0, t);
  cudaError_t e = p2pk_cep_flush(&bw);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CR][0], bw.s);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(side, c->ce->step_ev[V_CR][0], 0);
  p2pk_cep_tr_mark(c, side, "push", 0);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, side);
  p2pk_cep_tr_mark(c, side, "pushed", 0);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->step_ev[V_CP][0], side);
  if (e == cudaSuccess) e = cudaStreamWaitEvent(bp.s, c->ce->step_ev[V_CP][0], 0);
  p2pk_cep_add(&bp, P2PK_CEP_POST, &CTRL(t)->cep_full[me][s], 1, &CTRL(t)->cep_hdr[me][s],
      hv ^ P2PK_CEP_HDR_DIRECT, t);
  if (e == cudaSuccess) e = p2pk_cep_flush(&bp);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_SIDE], side);
  if (e == cudaSuccess) e = cudaEventRecord(c->ce->sev[E_POST], bp.s);
  return e;
}

/* A receive straight in (from r, header hv, nch chunks' slot turns), on
 * bs's stream: the first chunk's full flag with the marked header, then
 * its slot released (nothing landed in it). */
cudaError_t p2pk_cep_take_straight(struct p2pkit_comm *c, cep_batch_t *bs, int r, uint64_t hv, size_t nch) {
  const int me = c->rank, s = (int)(CEP(c)->recvd[r] % c->lay.cep_depth);
  p2pk_cep_take(bs, &CTRL(me)->cep_full[r][s], &CTRL(me)->cep_hdr[r][s], hv ^ P2PK_CEP_HDR_DIRECT, r);
  p2pk_cep_release(c, bs, r, s);
  CEP(c)->recvd[r] += nch;
  return p2pk_cep_flush(bs);
}
