/* SPDX-License-Identifier: BSD-3-Clause */
/* Each rank's device scratch and host staging part: where every area sits
 * (coll_dev.h's p2pk_layout), from the rank count, the buffer size and the
 * transport. Plain C: the CPU tests cover it. */
#include <string.h>

#include "coll/coll.h"
#include "core/check.h"
#include "core/param.h"

static uint64_t round4k(uint64_t v) { return (v + 4095) & ~(uint64_t)4095; }

void p2pk_layout_add_ce(p2pk_layout *lay, int depth, size_t slot) {
  if (!slot || depth <= 0) return;
  lay->stage_ce_off = lay->stage_stride;
  lay->stage_ce_slot = slot;
  lay->stage_stride += (uint64_t)depth * slot;
}

void p2pk_layout_add_cep(p2pk_layout *lay, int n, int depth, size_t slot) {
  if (!slot || depth <= 0 || n < 2) return;
  lay->cep_off = round4k(lay->total);
  lay->cep_slot = slot;
  lay->cep_depth = (uint64_t)depth;
  lay->total = lay->cep_off + (uint64_t)(n - 1) * (uint64_t)depth * slot;
}

int p2pk_mailboxes_for(int sm_count) {
  /* The setting lies in 16..P2PK_COLL_MAILBOXES (the registry refuses
   * anything else); its automatic value, 4 per SM, is kept within them. */
  const int64_t v = p2pk_param_int("P2PKIT_COLL_MAILBOXES");
  if (v > 0) return (int)v;
  const int64_t a = 4LL * (sm_count > 0 ? sm_count : 1);
  return (int)(a < 16 ? 16 : a > P2PK_COLL_MAILBOXES ? P2PK_COLL_MAILBOXES : a);
}

/* Staged: a rank's part of the host region is P2PKIT_BUFFER_SIZE: the
 * header, send/recv mailboxes for every receiver (128 KiB pieces, the size
 * the knob runs found best at mid sizes, within an eighth of the buffer),
 * and the collectives' outbox in what is left. */
static p2pkit_status_t staged_layout(int n, size_t buffer, p2pk_layout *lay) {
  uint64_t head = round4k(sizeof(p2pk_stage_ctrl));
  uint64_t pbox = buffer / 8 / ((uint64_t)n * P2PK_STAGE_P2P_BOXES);
  if (pbox > (128u << 10)) pbox = 128u << 10;
  pbox &= ~(uint64_t)4095;
  if (pbox < 4096) pbox = 4096;
  uint64_t p2p = (uint64_t)n * P2PK_STAGE_P2P_BOXES * pbox;
  uint64_t box = buffer > head + p2p ? ((buffer - head - p2p) / P2PK_STAGE_MAILBOXES) & ~(uint64_t)4095 : 0;
  if (box < 4096)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_BUFFER_SIZE=%zu is too small for the "
                     "staged transport with %d ranks (at least %llu bytes)", buffer, n,
                     (unsigned long long)(head + p2p + 4096ULL * P2PK_STAGE_MAILBOXES));
  lay->stage_data_off = head;
  lay->stage_mailbox = box;
  lay->stage_p2p_off = head + box * P2PK_STAGE_MAILBOXES;
  lay->stage_p2p_box = pbox;
  lay->stage_stride = lay->stage_p2p_off + p2p;
  return P2PKIT_SUCCESS;
}

/* LL128 (mid sizes): a whole message per (slot, peer), on top of the
 * buffer so the mailboxes keep their size. P2PKIT_LL128_MAX is the largest
 * message in bytes summed over peers (default 32 MiB, what the 2-GPU
 * table uses: ~68 MiB of scratch whatever the rank count); 0 turns LL128
 * off. */
static void ll128_layout(uint64_t peers, p2pk_layout *lay) {
  const uint64_t l128 = p2pk_param_size("P2PKIT_LL128_MAX"); /* at most 1 GiB (registry) */
  uint64_t per = (l128 + peers - 1) / peers;
  uint64_t lines = (per + P2PK_LL128_DATA - 1) / P2PK_LL128_DATA;
  if (lines) {
    lay->ll128_off = round4k(lay->total);
    lay->ll128_bytes = round4k(lines * P2PK_LL128_LINE);
    lay->total = lay->ll128_off + 2 * peers * lay->ll128_bytes;
  }
}

/* Over P2P, from `off` on: the LL areas, the mailboxes, LL128's area. */
static p2pkit_status_t p2p_layout(int n, size_t buffer, int want_boxes, uint64_t off,
                                  p2pk_layout *lay, size_t *ll_cap_p) {
  uint64_t peers = (uint64_t)n - 1;
  /* LL: a quarter of the buffer at most (16 = 2 slots x 2 bytes per byte x 4). */
  uint64_t ll_cap = (buffer / (16 * peers)) & ~(uint64_t)4095;
  if (ll_cap > (1u << 20)) ll_cap = 1u << 20;
  if (ll_cap < (16u << 10)) ll_cap = 16u << 10;
  lay->ll_off = off;
  lay->ll_bytes = 2 * ll_cap;
  off += 2 * peers * lay->ll_bytes;
  lay->p2p_ll_off = off;
  off += peers * 2 * 2 * (uint64_t)P2PK_P2P_LL_MAX;
  /* Fewer, larger mailboxes when many peers share the buffer (a block needs
   * P2PK_COLL_SLOTS of them, so this also bounds the grid). */
  uint64_t nboxes = want_boxes >= 16 && want_boxes <= P2PK_COLL_MAILBOXES ? (uint64_t)want_boxes
                                                                         : P2PK_COLL_MAILBOXES;
  uint64_t boxes = 0, box = 0;
  for (;;) {
    boxes = (uint64_t)P2PK_COLL_SETS * peers * nboxes;
    box = buffer > off ? ((buffer - off) / boxes) & ~(uint64_t)4095 : 0;
    if (box >= (16u << 10) || nboxes <= 16) break;
    nboxes /= 2;
  }
  if (box < 4096)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_BUFFER_SIZE=%zu is too small for %d "
                     "ranks (at least %llu bytes)", buffer, n,
                     (unsigned long long)(off + boxes * 4096));
  lay->data_off = off;
  lay->mailbox = box;
  lay->nboxes = nboxes;
  lay->total = off + boxes * box;
  ll128_layout(peers, lay);
  *ll_cap_p = ll_cap;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_layout_compute(int n, size_t buffer, int staged, int want_boxes,
                                    p2pk_layout *lay, size_t *ll_cap_p) {
  memset(lay, 0, sizeof *lay);
  *ll_cap_p = 0;
  /* P2PKIT_BUFFER_SIZE=0 (the default): 128 MiB of device scratch over P2P
   * per peer, at most 512 MiB, so 4 mailboxes per multiprocessor (two
   * blocks per SM, select.c's wide grid) keep ~120 KiB each on 2 to 4 GPUs
   * (the mailboxes are split among the peers); 64 MiB of host memory per
   * rank staged. On 4x H200 128 MiB left 40 KiB mailboxes, and 384 MiB took
   * a two-shot all-reduce of 1 GiB in 4901 us against 5823
   * (docs/decisions/scratch-per-peer.md). More than 4 GPUs: the 512 MiB
   * cap, not measured. */
  if (buffer == 0) {
    const size_t peers = n > 1 ? (size_t)n - 1 : 1;
    buffer = staged ? (size_t)64 << 20 : ((size_t)128 << 20) * (peers < 4 ? peers : 4);
  }
  if (n < 1 || n > P2PK_COLL_MAX_RANKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "%d ranks; p2pkit handles 1..%d", n,
                     P2PK_COLL_MAX_RANKS);
  uint64_t off = round4k(sizeof(p2pk_dev_ctrl));
  uint64_t counters = (uint64_t)P2PK_COLL_SETS * n * P2PK_COLL_MAILBOXES * sizeof(uint64_t);
  lay->ready_off = off, off += counters;
  lay->freed_off = off, off += counters;
  lay->sent_off = off, off += counters;
  lay->recvd_off = off, off += counters;
  lay->agtok_off = off, off += (uint64_t)n * P2PK_COLL_MAILBOXES * sizeof(uint64_t);
  off = round4k(off);
  if (staged || n == 1) {
    lay->total = off;
    return staged ? staged_layout(n, buffer, lay) : P2PKIT_SUCCESS;
  }
  return p2p_layout(n, buffer, want_boxes, off, lay, ll_cap_p);
}
