/* SPDX-License-Identifier: BSD-3-Clause */
/* dmbox.c without a GPU: the receivers' descriptions for send/recv
 * straight into registered buffers. A posted description comes back whole;
 * one not posted yet is waited for only as long as asked; one overwritten
 * by a call P2PK_DMB_RING later is reported gone, not returned; pairs and
 * calls have entries of their own; each call is decided once, by
 * whichever end comes first, and a sender a ring ahead leaves a decision
 * not yet read alone; and with a receiver thread posting while a sender
 * thread takes, every description taken belongs to the call asked for (the
 * seqlock never hands out a torn or foreign entry). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll/paths/ce/dmbox.h"
#include "test.h"

static p2pk_dmb_desc desc_of(uint64_t q) {
  p2pk_dmb_desc d = {.bytes = q * 3 + 1, .off = q * 5 + 7, .reg = q % 4 + 1};
  /* Every call's allocation fields differ too (P2PKIT_SENDRECV_MAP), the
   * handle's words among them, so a torn read cannot pass. */
  d.bufid = q * 11 + 2;
  d.size = q * 13 + 3;
  for (int i = 0; i < P2PK_DMB_HANDLE_WORDS; i++) d.handle[i] = q * 17 + (uint64_t)i;
  return d;
}

static int desc_is(const p2pk_dmb_desc *d, uint64_t q) {
  p2pk_dmb_desc w = desc_of(q);
  return memcmp(d, &w, sizeof w) == 0; /* uint64_t fields only: no padding */
}

TEST(a_posted_description_comes_back_whole) {
  const int n = 3;
  void *box = calloc(1, p2pk_dmb_bytes(n));
  CHECK(box != NULL);
  CHECK_EQ(p2pk_dmb_bytes(n), (size_t)n * n * P2PK_DMB_RING * sizeof(p2pk_dmb_entry));
  p2pk_dmb_desc d = desc_of(5), got;
  p2pk_dmb_post(p2pk_dmb_at(box, n, 2, 1, 5), 5, &d);
  memset(&got, 0, sizeof got);
  CHECK_EQ(p2pk_dmb_take(p2pk_dmb_at(box, n, 2, 1, 5), 5, 0, &got), 1);
  CHECK(desc_is(&got, 5));
  /* Taking leaves it there: a second look finds the same. */
  CHECK_EQ(p2pk_dmb_take(p2pk_dmb_at(box, n, 2, 1, 5), 5, 0, &got), 1);
  /* Another pair, the other direction and the next call have entries of
   * their own: nothing there yet. */
  CHECK_EQ(p2pk_dmb_take(p2pk_dmb_at(box, n, 1, 2, 5), 5, 0, &got), 0);
  CHECK_EQ(p2pk_dmb_take(p2pk_dmb_at(box, n, 2, 0, 5), 5, 0, &got), 0);
  CHECK_EQ(p2pk_dmb_take(p2pk_dmb_at(box, n, 2, 1, 6), 6, 0, &got), 0);
  CHECK(p2pk_dmb_at(box, n, 2, 1, 6) != p2pk_dmb_at(box, n, 2, 1, 5));
  CHECK(p2pk_dmb_at(box, n, 1, 2, 5) != p2pk_dmb_at(box, n, 2, 1, 5));
  /* The ring wraps: call 5 + RING shares call 5's entry. */
  CHECK(p2pk_dmb_at(box, n, 2, 1, 5 + P2PK_DMB_RING) == p2pk_dmb_at(box, n, 2, 1, 5));
  /* The last entry of the last pair lies inside the rings. */
  CHECK((char *)(p2pk_dmb_at(box, n, n - 1, n - 1, P2PK_DMB_RING - 1) + 1) ==
        (char *)box + p2pk_dmb_bytes(n));
  free(box);
}

TEST(a_missing_description_is_waited_for_only_as_asked) {
  p2pk_dmb_entry e;
  memset(&e, 0, sizeof e);
  p2pk_dmb_desc got;
  CHECK_EQ(p2pk_dmb_take(&e, 0, 0, &got), 0);
  /* Waits ~2 ms, then gives up (no timing asserted, only that it returns). */
  CHECK_EQ(p2pk_dmb_take(&e, 3, 2000000, &got), 0);
  /* An earlier call's description is not this call's. */
  p2pk_dmb_desc d = desc_of(2);
  p2pk_dmb_post(&e, 2, &d);
  CHECK_EQ(p2pk_dmb_take(&e, 2 + P2PK_DMB_RING, 0, &got), 0);
}

TEST(an_overwritten_description_is_gone) {
  p2pk_dmb_entry e;
  memset(&e, 0, sizeof e);
  p2pk_dmb_desc d = desc_of(1), got;
  p2pk_dmb_post(&e, 1, &d);
  d = desc_of(1 + P2PK_DMB_RING);
  p2pk_dmb_post(&e, 1 + P2PK_DMB_RING, &d);
  /* Call 1's sender comes late: the receiver is a ring ahead. No wait. */
  CHECK_EQ(p2pk_dmb_take(&e, 1, 1000000000u, &got), -1);
  CHECK_EQ(p2pk_dmb_take(&e, 1 + P2PK_DMB_RING, 0, &got), 1);
  CHECK(desc_is(&got, 1 + P2PK_DMB_RING));
}

/* Each call is decided once, by whichever end comes first. */
TEST(a_call_is_decided_once_by_whoever_comes_first) {
  p2pk_dmb_entry e;
  memset(&e, 0, sizeof e);
  int chose = -1;
  /* The sender first: straight in; the receiver hears it. */
  CHECK_EQ(p2pk_dmb_decide(&e, 0, 1), 1);
  CHECK_EQ(p2pk_dmb_decision(&e, 0, 0, &chose), 1);
  CHECK_EQ(chose, 0);
  /* The receiver first (it waited ~1 ms, then chose the slots); the
   * sender, described or not, follows. */
  CHECK_EQ(p2pk_dmb_decision(&e, P2PK_DMB_RING, 1000000, &chose), 0);
  CHECK_EQ(chose, 1);
  CHECK_EQ(p2pk_dmb_decide(&e, P2PK_DMB_RING, 1), 0);
  /* A decision beside a description leaves it whole. */
  p2pk_dmb_desc d = desc_of(3), got;
  p2pk_dmb_post(&e, 3, &d);
  CHECK_EQ(p2pk_dmb_decide(&e, 3, 0), 0);
  CHECK_EQ(p2pk_dmb_take(&e, 3, 0, &got), 1);
  CHECK(desc_is(&got, 3));
  CHECK_EQ(p2pk_dmb_decision(&e, 3, 0, &chose), 0);
  CHECK_EQ(chose, 0);
}

/* A sender a ring ahead never overwrites a decision its receiver has not
 * read: it takes the slots without saying so, and the receiver, hearing
 * nothing for that call, chooses the slots too. */
TEST(a_sender_a_ring_ahead_leaves_unread_decisions) {
  p2pk_dmb_entry e;
  memset(&e, 0, sizeof e);
  int chose = -1;
  CHECK_EQ(p2pk_dmb_decide(&e, 1, 1), 1);                  /* call 1, not read yet */
  CHECK_EQ(p2pk_dmb_decide(&e, 1 + P2PK_DMB_RING, 1), 0);  /* left alone: the slots */
  CHECK_EQ(p2pk_dmb_decision(&e, 1, 0, &chose), 1);         /* call 1 still straight in */
  CHECK_EQ(chose, 0);
  CHECK_EQ(p2pk_dmb_decision(&e, 1 + P2PK_DMB_RING, 0, &chose), 0);
  CHECK_EQ(chose, 1);
  /* Read now: the next ring's call is the sender's to decide again. */
  CHECK_EQ(p2pk_dmb_decide(&e, 1 + 2 * P2PK_DMB_RING, 1), 1);
  CHECK_EQ(p2pk_dmb_decision(&e, 1 + 2 * P2PK_DMB_RING, 0, &chose), 1);
}

#define CALLS 20000

typedef struct {
  p2pk_dmb_entry *ring; /* one pair's P2PK_DMB_RING entries */
  _Atomic uint64_t posted;
} pair_t;

static void *receiver(void *arg) {
  pair_t *p = arg;
  unsigned seed = 12345;
  for (uint64_t q = 0; q < CALLS; q++) {
    p2pk_dmb_desc d = desc_of(q);
    atomic_store(&p->posted, q + 1); /* before the post: whoever sees the post sees this */
    p2pk_dmb_post(&p->ring[q % P2PK_DMB_RING], q, &d);
    /* Now and then fall behind or run ahead of the sender. */
    if (rand_r(&seed) % 64 == 0) {
      struct timespec ts = {0, (long)(rand_r(&seed) % 50) * 1000};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

TEST(a_sender_racing_its_receiver_takes_only_its_own_calls) {
  p2pk_dmb_entry ring[P2PK_DMB_RING];
  memset(ring, 0, sizeof ring);
  pair_t p = {.ring = ring};
  atomic_init(&p.posted, 0);
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, receiver, &p), 0);
  int hits = 0, gone = 0, late = 0, wrong = 0;
  for (uint64_t q = 0; q < CALLS; q++) {
    p2pk_dmb_desc got;
    memset(&got, 0, sizeof got);
    /* 100 ms: the receiver (never blocked) posts every call well within it. */
    int r = p2pk_dmb_take(&ring[q % P2PK_DMB_RING], q, 100000000u, &got);
    if (r == 1) {
      hits++;
      if (!desc_is(&got, q)) wrong++;
    } else if (r == -1) {
      gone++;
      /* Gone only when the receiver really posted call q + RING or later. */
      if (atomic_load(&p.posted) < q + P2PK_DMB_RING + 1) wrong++;
    } else {
      late++;
    }
  }
  pthread_join(th, NULL);
  CHECK_EQ(wrong, 0);
  CHECK_EQ(late, 0);
  CHECK_EQ(hits + gone, CALLS);
  CHECK(hits > 0);
}

T_MAIN(T_CASE(a_posted_description_comes_back_whole),
       T_CASE(a_missing_description_is_waited_for_only_as_asked),
       T_CASE(an_overwritten_description_is_gone), T_CASE(a_call_is_decided_once_by_whoever_comes_first),
       T_CASE(a_sender_a_ring_ahead_leaves_unread_decisions),
       T_CASE(a_sender_racing_its_receiver_takes_only_its_own_calls))
