/* SPDX-License-Identifier: BSD-3-Clause */
/* Send/recv with a process per GPU straight into the receiver's buffer:
 * where each receive lands, told by the receiver's host to the sender's
 * through host shared memory (cep_straight.c says how a call uses it).
 *
 * One ring of P2PK_DMB_RING entries per ordered pair (sender, receiver).
 * The receiver's call number q (its receives from that sender over the
 * copy engines so far, the sender's sends to it counted alike) picks entry
 * q % P2PK_DMB_RING. The receiver writes it and never waits: a seqlock
 * (seq 0 while it writes, q + 1 once done) lets it overwrite an entry the
 * sender has not read. The sender waits at most `wait_ns` for the entry of
 * its call q; one that is missing, overwritten by a later call or says
 * "no" (reg 0) sends the call through the landing slots, which is always
 * correct. Which way a call goes is decided once, by a compare-and-swap in
 * the entry, by whichever end gets there first: the sender, from the
 * description (or its absence), or the receiver, choosing the slots once
 * it waited as long as it would. Both ends then queue the steps of that
 * way alone, eagerly or under capture (the first chunk's header, marked
 * when straight in, lets the receiver's GPU check it). A sender never
 * overwrites a decision its receiver has not read yet (it takes the slots
 * without saying so, and the receiver, hearing nothing, chooses the slots
 * too). */
#ifndef P2PK_DMBOX_H
#define P2PK_DMBOX_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define P2PK_DMB_RING 8

/* Why a send went through the slots: not asked (in place, or the setting
 * off), the description late or already overwritten, the receive not in a
 * registration, the sizes differ, the registration not mapped here, the
 * receiver chose the slots first. */
enum {
  P2PK_DMB_WHY_NOT_ASKED,
  P2PK_DMB_WHY_LATE,
  P2PK_DMB_WHY_GONE,
  P2PK_DMB_WHY_NOT_REGISTERED,
  P2PK_DMB_WHY_SIZE,
  P2PK_DMB_WHY_NOT_MAPPED,
  P2PK_DMB_WHY_RECEIVER_CHOSE,
  P2PK_DMB_WHY_COUNT
};

/* What a receive is: its bytes, and where they go: registration `reg` - 1
 * (p2pk_reg.id) at offset `off`; reg 0: not straight in (the slots),
 * unless `bufid` is not 0: then the receive lies at `off` in an allocation
 * that is not registered but shared on demand (P2PKIT_SENDRECV_MAP,
 * recvmap.c): the allocation's process-wide id in the receiver, its size
 * and its CUDA IPC handle (cudaIpcMemHandle_t's 64 bytes). */
#define P2PK_DMB_HANDLE_WORDS 8
typedef struct {
  uint64_t bytes, off, reg;
  uint64_t bufid, size;
  uint64_t handle[P2PK_DMB_HANDLE_WORDS];
} p2pk_dmb_desc;

typedef struct {
  _Atomic uint64_t seq; /* 0: being written, else the call number + 1 of what is here */
  _Atomic uint64_t bytes, off, reg, bufid, size;
  _Atomic uint64_t handle[P2PK_DMB_HANDLE_WORDS];
  _Atomic uint64_t decided; /* (call number + 1) << 1 | straight in; set once per call */
  _Atomic uint64_t heard;   /* the receiver: call number + 1 of the last decision it read */
} p2pk_dmb_entry;

/* Bytes of the rings of n ranks. */
size_t p2pk_dmb_bytes(int n);
/* The entry of the pair src -> dst for call q, in the rings at `base`. */
p2pk_dmb_entry *p2pk_dmb_at(void *base, int n, int src, int dst, uint64_t q);
/* The receiver: describe its call q (never waits). */
void p2pk_dmb_post(p2pk_dmb_entry *e, uint64_t q, const p2pk_dmb_desc *d);
/* The sender: call q's description, waiting at most wait_ns for it.
 * 1: *out holds it; 0: it did not come in time; -1: a later call took the
 * entry (q's is gone: no wait). */
int p2pk_dmb_take(p2pk_dmb_entry *e, uint64_t q, uint64_t wait_ns, p2pk_dmb_desc *out);
/* The sender: decide call q (straight: 1 straight in, 0 the slots) unless
 * the receiver already did. Returns the way in force: 1 straight in, 0 the
 * slots (also when the receiver has not read the entry's last decision:
 * then nothing is written). */
int p2pk_dmb_decide(p2pk_dmb_entry *e, uint64_t q, int straight);
/* The receiver: the way of call q, waiting at most wait_ns for the
 * sender's decision and then deciding the slots itself (*chose 1); 1
 * straight in, 0 the slots. Marks the decision read. */
int p2pk_dmb_decision(p2pk_dmb_entry *e, uint64_t q, uint64_t wait_ns, int *chose);

#endif
