/* The receivers' descriptions for send/recv straight into their buffers
 * (dmbox.h). Every field is an atomic, so a sender reading an entry the
 * receiver is rewriting is no data race: it sees seq change and retries. */
#include "coll/dmbox.h"

#include <time.h>

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
  atomic_store_explicit(&e->seq, q + 1, memory_order_release);
}

void p2pk_dmb_decide(p2pk_dmb_entry *e, uint64_t q, int straight) {
  atomic_store_explicit(&e->decided, ((q + 1) << 1) | (straight ? 1u : 0u), memory_order_release);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
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
      uint64_t t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 >= wait_ns) return 0;
    }
    if (!wait_ns) return 0;
    DMB_PAUSE();
  }
}

int p2pk_dmb_decision(p2pk_dmb_entry *e, uint64_t q, uint64_t wait_ns) {
  const uint64_t want = q + 1;
  uint64_t t0 = 0;
  for (unsigned spins = 0;; spins++) {
    const uint64_t d = atomic_load_explicit(&e->decided, memory_order_acquire);
    if (d >> 1 == want) return (int)(d & 1);
    if (d >> 1 > want) return -1;
    if (!wait_ns) return -1;
    if ((spins & 63) == 0) {
      uint64_t t = now_ns();
      if (!t0) t0 = t;
      else if (t - t0 >= wait_ns) return -1;
    }
    DMB_PAUSE();
  }
}
