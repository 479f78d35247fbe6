/* SPDX-License-Identifier: BSD-3-Clause */
/* The receivers' descriptions for send/recv straight into their buffers
 * (dmbox.h). Every field is an atomic, so a sender reading an entry the
 * receiver is rewriting is no data race: it sees seq change and retries. */
#include "coll/paths/ce/dmbox.h"

#include "core/clock.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define DMB_PAUSE() _mm_pause()
#else
#define DMB_PAUSE() ((void)0)
#endif

size_t p2pk_dmb_bytes(int n) {
  return n > 0 ? (size_t)n * (size_t)n * P2PK_DMB_RING * sizeof(p2pk_dmb_entry) : 0;
}

p2pk_dmb_entry *p2pk_dmb_at(void *base, int n, int src, int dst, uint64_t q) {
  return (p2pk_dmb_entry *)base + ((size_t)src * (size_t)n + (size_t)dst) * P2PK_DMB_RING +
         (size_t)(q % P2PK_DMB_RING);
}

void p2pk_dmb_post(p2pk_dmb_entry *e, uint64_t q, const p2pk_dmb_desc *d) {
  atomic_store_explicit(&e->seq, 0, memory_order_relaxed);
  atomic_thread_fence(memory_order_release); /* seq 0 is seen before any new field */
  atomic_store_explicit(&e->bytes, d->bytes, memory_order_relaxed);
  atomic_store_explicit(&e->off, d->off, memory_order_relaxed);
  atomic_store_explicit(&e->reg, d->reg, memory_order_relaxed);
  atomic_store_explicit(&e->bufid, d->bufid, memory_order_relaxed);
  atomic_store_explicit(&e->size, d->size, memory_order_relaxed);
  for (int i = 0; i < P2PK_DMB_HANDLE_WORDS; i++)
    atomic_store_explicit(&e->handle[i], d->handle[i], memory_order_relaxed);
  atomic_store_explicit(&e->seq, q + 1, memory_order_release);
}

int p2pk_dmb_take(p2pk_dmb_entry *e, uint64_t q, uint64_t wait_ns, p2pk_dmb_desc *out) {
  const uint64_t want = q + 1;
  uint64_t t0 = 0;
  for (unsigned spins = 0;; spins++) {
    uint64_t s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
    if (s1 == want) {
      p2pk_dmb_desc d;
      d.bytes = atomic_load_explicit(&e->bytes, memory_order_relaxed);
      d.off = atomic_load_explicit(&e->off, memory_order_relaxed);
      d.reg = atomic_load_explicit(&e->reg, memory_order_relaxed);
      d.bufid = atomic_load_explicit(&e->bufid, memory_order_relaxed);
      d.size = atomic_load_explicit(&e->size, memory_order_relaxed);
      for (int i = 0; i < P2PK_DMB_HANDLE_WORDS; i++)
        d.handle[i] = atomic_load_explicit(&e->handle[i], memory_order_relaxed);
      atomic_thread_fence(memory_order_acquire);
      if (atomic_load_explicit(&e->seq, memory_order_relaxed) == want) {
        *out = d;
        return 1;
      }
      continue; /* rewritten while read: look again */
    }
    if (s1 > want) return -1;
    /* Not there yet (or being written): wait, looking at the clock now and then. */
    if ((spins & 63) == 0) {
      uint64_t t = p2pk_now_ns();
      if (!t0) t0 = t;
      else if (t - t0 >= wait_ns) return 0;
    }
    if (!wait_ns) return 0;
    DMB_PAUSE();
  }
}

/* Set call q's decision to `to` unless one is there: the way in force. */
static int decide_once(p2pk_dmb_entry *e, uint64_t q, uint64_t to) {
  uint64_t d = atomic_load_explicit(&e->decided, memory_order_acquire);
  for (;;) {
    if (d >> 1 == q + 1) return (int)(d & 1);
    if (atomic_compare_exchange_weak_explicit(&e->decided, &d, to, memory_order_acq_rel,
                                              memory_order_acquire))
      return (int)(to & 1);
  }
}

int p2pk_dmb_decide(p2pk_dmb_entry *e, uint64_t q, int straight) {
  const uint64_t d = atomic_load_explicit(&e->decided, memory_order_acquire);
  if (d >> 1 == q + 1) return (int)(d & 1); /* the receiver chose already */
  if (d >> 1 > q + 1) return 0;
  /* The receiver has not read the decision of this entry's last call (it
   * is a ring behind): leave it; the receiver will choose the slots. */
  if (q + 1 > P2PK_DMB_RING && atomic_load_explicit(&e->heard, memory_order_acquire) < q + 1 - P2PK_DMB_RING)
    return 0;
  return decide_once(e, q, ((q + 1) << 1) | (straight ? 1u : 0u));
}

int p2pk_dmb_decision(p2pk_dmb_entry *e, uint64_t q, uint64_t wait_ns, int *chose) {
  const uint64_t want = q + 1;
  uint64_t t0 = 0;
  int how = -1;
  *chose = 0;
  for (unsigned spins = 0; how < 0; spins++) {
    const uint64_t d = atomic_load_explicit(&e->decided, memory_order_acquire);
    if (d >> 1 == want) {
      how = (int)(d & 1);
      break;
    }
    if (d >> 1 > want) { /* cannot happen (the sender waits for `heard`): the slots */
      how = 0;
      break;
    }
    if ((spins & 63) == 0) {
      uint64_t t = p2pk_now_ns();
      if (!t0) t0 = t;
      if (!wait_ns || t - t0 >= wait_ns) {
        how = decide_once(e, q, want << 1);
        *chose = how == 0;
      }
    }
    if (how < 0) DMB_PAUSE();
  }
  atomic_store_explicit(&e->heard, want, memory_order_release);
  return how;
}
