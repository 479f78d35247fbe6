/* SPDX-License-Identifier: BSD-3-Clause */
/* Collective plans (src/coll/kernels/plan.c): masks, strides and in-place forms of
 * every collective, checked by running the plan on host memory for every
 * rank count, rank and root and comparing with NCCL's semantics; overlap
 * rules; bus-bandwidth factors against the perf table; header words. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll/kernels/coll_dev.h"
#include "coll/kernels/plan.h"
#include "perf/perf.h"
#include "test.h"

#define MAXN 5
#define BLK 7 /* elements per rank's share: odd */

/* What a kernel does with the plan, on int32 sums: pushes, then per rank
 * either the rank-order reduction or the copies. */
static void run_plan(int kind, int n, int root, int32_t in[MAXN][MAXN * BLK],
                     int32_t out[MAXN][MAXN * BLK]) {
  p2pk_coll_plan pl[MAXN];
  for (int r = 0; r < n; r++)
    CHECK_OK(p2pk_coll_plan_make(kind, r, n, root, BLK * 4, in[r], out[r], &pl[r]));
  for (int r = 0; r < n; r++) {
    CHECK((pl[r].send_mask >> r & 1) == 0 && (pl[r].recv_mask >> r & 1) == 0);
    for (int p = 0; p < n; p++) /* every push has a receiver and the other way round */
      if (p != r) CHECK_EQ(pl[r].send_mask >> p & 1, pl[p].recv_mask >> r & 1);
  }
  for (int q = 0; q < n; q++) {
    const p2pk_coll_plan *P = &pl[q];
    if (n == 1) { /* the host copies; no kernel */
      if (P->in_bytes && P->out_bytes) memcpy(out[q], in[q], BLK * 4);
      continue;
    }
    if (P->reduce) {
      if (!P->recv_mask) continue;
      for (int i = 0; i < BLK; i++) {
        int32_t acc = 0;
        for (int r = 0; r < n; r++) acc += in[r][q * (P->in_stride / 4) + i];
        out[q][i] = acc;
      }
      continue;
    }
    for (int r = 0; r < n; r++) {
      int from_peer = r != q && (P->recv_mask >> r & 1);
      int mine = r == q && P->self_copy;
      if (!from_peer && !mine) continue;
      /* What r pushed for q (its share for q), or q's own share. */
      const int32_t *src = in[r] + q * (pl[r].in_stride / 4);
      memcpy(out[q] + r * (P->out_stride / 4), src, BLK * 4);
    }
  }
}

/* What NCCL leaves in element i of rank q's output (-1: not written). */
static int32_t expected(int kind, int n, int root, int q, int i, int32_t in[MAXN][MAXN * BLK]) {
  int32_t want = -1, sum = 0;
  int blk = i / BLK, e = i % BLK;
  switch (kind) {
    case P2PK_COLL_ALL_REDUCE:
      if (i < BLK) for (int r = 0; r < n; r++) sum += in[r][i], want = sum;
      break;
    case P2PK_COLL_BROADCAST:
      if (i < BLK) want = in[root][i];
      break;
    case P2PK_COLL_REDUCE:
      if (i < BLK && q == root) for (int r = 0; r < n; r++) sum += in[r][i], want = sum;
      break;
    case P2PK_COLL_ALL_GATHER: want = in[blk][e]; break;
    case P2PK_COLL_REDUCE_SCATTER:
      if (i < BLK) for (int r = 0; r < n; r++) sum += in[r][q * BLK + i], want = sum;
      break;
    case P2PK_COLL_ALL_TO_ALL: want = in[blk][q * BLK + e]; break;
  }
  return want;
}

TEST(plans_match_nccl_semantics) {
  int32_t in[MAXN][MAXN * BLK], out[MAXN][MAXN * BLK];
  for (int n = 1; n <= MAXN; n++)
    for (int kind = 0; kind < P2PK_COLL_KINDS; kind++)
      for (int root = 0; root < (p2pk_coll_has_root(kind) ? n : 1); root++) {
        for (int r = 0; r < n; r++)
          for (int i = 0; i < MAXN * BLK; i++) in[r][i] = 1000 * r + i + 1, out[r][i] = -1;
        run_plan(kind, n, root, in, out);
        for (int q = 0; q < n; q++)
          for (int i = 0; i < n * BLK; i++) {
            int32_t want = expected(kind, n, root, q, i, in);
            if (out[q][i] != want) {
              T_FAIL("%s n %d root %d: rank %d element %d is %d, expected %d",
                     p2pk_coll_name(kind), n, root, q, i, out[q][i], want);
              return;
            }
          }
      }
}

/* The staged transport's chunk stream (coll_dev.h's p2pk_stage_* helpers, as
 * kern_staged.cu runs them) on host memory: for each chunk every writer
 * fills its outbox (poison where it sends nothing), then every reader
 * reduces or copies, and its own writer of that chunk is done first (the
 * kernel's in-place wait). Chunks in increasing and in decreasing order: a
 * reader that overwrites what a writer of another chunk still has to read
 * (in place) gives a wrong result in one of the two. Returns 0 on a
 * mismatch. */
static int run_staged(int kind, int n, int root, uint64_t K, int inplace, int backwards,
                      int32_t in0[MAXN][MAXN * BLK], int quiet) {
  enum { B = BLK * 4 };
  static char mem[MAXN][3 * MAXN * B];
  char *in[MAXN], *out[MAXN], outbox[MAXN][64];
  p2pk_coll_plan pl[MAXN];
  for (int r = 0; r < n; r++) {
    memset(mem[r], 0xff, sizeof mem[r]); /* -1 in every int32 */
    char *a = mem[r], *b = mem[r] + MAXN * B;
    in[r] = a, out[r] = b;
    if (inplace) switch (kind) {
        case P2PK_COLL_ALL_REDUCE:
        case P2PK_COLL_ALL_TO_ALL: out[r] = a; break;
        case P2PK_COLL_BROADCAST:
        case P2PK_COLL_REDUCE: if (r == root) out[r] = a; break;
        case P2PK_COLL_ALL_GATHER: out[r] = a, in[r] = a + r * B; break;
        case P2PK_COLL_REDUCE_SCATTER: out[r] = a + r * B; break;
      }
    CHECK_OK(p2pk_coll_plan_make(kind, r, n, root, B, in[r], out[r], &pl[r]));
    memcpy(in[r], in0[r], pl[r].in_bytes);
  }
  const int mode = p2pk_stage_mode(pl[0].in_stride, pl[0].reduce);
  for (int r = 1; r < n; r++) CHECK_EQ(p2pk_stage_mode(pl[r].in_stride, pl[r].reduce), mode);
  const uint64_t cps = (B + K - 1) / K, chunks = cps * (uint64_t)p2pk_stage_segs(mode, n);
  for (uint64_t k = 0; k < chunks; k++) {
    const uint64_t ci = backwards ? chunks - 1 - k : k;
    const int t = (int)(ci / cps);
    const uint64_t x = (ci % cps) * K, len = K < B - x ? K : B - x;
    for (int q = 0; q < n; q++) {
      int blk = p2pk_stage_send_block(mode, n, q, pl[q].send_mask, t);
      if (blk >= 0) memcpy(outbox[q], in[q] + blk * pl[q].in_stride + x, len);
      else memset(outbox[q], 0x5a, len);
    }
    for (int q = 0; q < n; q++) {
      const p2pk_coll_plan *P = &pl[q];
      uint32_t from = p2pk_stage_recv_from(mode, n, q, P->recv_mask, t);
      if (P->reduce && from) {
        for (uint64_t o = 0; o < len; o += 4) {
          int32_t acc = 0, v;
          for (int r = 0; r < n; r++) {
            memcpy(&v, r == q ? in[q] + t * P->in_stride + x + o : outbox[r] + o, 4);
            acc += v;
          }
          memcpy(out[q] + x + o, &acc, 4);
        }
      } else if (!P->reduce) {
        for (int r = 0; r < n; r++)
          if (from >> r & 1) memcpy(out[q] + r * P->out_stride + x, outbox[r], len);
      }
      if (P->self_copy && t == 0)
        memmove(out[q] + q * P->out_stride + x, in[q] + q * P->in_stride + x, len);
    }
  }
  for (int q = 0; q < n; q++)
    for (int i = 0; i < (int)(pl[q].out_bytes / 4); i++) {
      int32_t got, want = expected(kind, n, root, q, i, in0);
      memcpy(&got, out[q] + 4 * i, 4);
      if (got != want) {
        if (quiet) return 0;
        T_FAIL("staged %s n %d root %d chunk %llu %s%s: rank %d element %d is %d, expected %d",
               p2pk_coll_name(kind), n, root, (unsigned long long)K, inplace ? "in place" : "",
               backwards ? " backwards" : "", q, i, got, want);
        return 0;
      }
    }
  return 1;
}

TEST(staged_stream_matches_nccl_semantics) {
  int32_t in0[MAXN][MAXN * BLK];
  for (int r = 0; r < MAXN; r++)
    for (int i = 0; i < MAXN * BLK; i++) in0[r][i] = 1000 * r + i + 1;
  static const uint64_t chunks[] = {4, 8, 12, 28, 64};
  for (int n = 2; n <= MAXN; n++)
    for (int kind = 0; kind < P2PK_COLL_KINDS; kind++)
      for (int root = 0; root < (p2pk_coll_has_root(kind) ? n : 1); root++)
        for (int ip = 0; ip < 2; ip++)
          for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++)
            for (int back = 0; back < 2; back++)
              if (!run_staged(kind, n, root, chunks[c], ip, back, in0, 0)) return;
}

/* All-to-all's round robin: every ordered pair meets exactly once, partners
 * are mutual, and the rounds are n - 1 (n even) or n (n odd, one rank idle
 * a round), up to the most ranks a communicator takes. */
TEST(staged_round_robin_pairs_every_rank_once) {
  for (int n = 2; n <= P2PK_COLL_MAX_RANKS; n++) {
    const int R = p2pk_stage_rounds(n);
    CHECK_EQ(R, n % 2 ? n : n - 1);
    CHECK_EQ(p2pk_stage_segs(P2PK_STAGE_PAIR, n), R);
    int met[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS];
    memset(met, 0, sizeof met);
    for (int t = 0; t < R; t++) {
      int idle = 0;
      for (int q = 0; q < n; q++) {
        const int p = p2pk_stage_partner(n, q, t);
        if (p < 0) {
          idle++;
          continue;
        }
        CHECK(p != q && p < n);
        CHECK_EQ(p2pk_stage_partner(n, p, t), q);
        met[q][p]++;
      }
      CHECK_EQ(idle, n % 2);
    }
    for (int q = 0; q < n; q++)
      for (int p = 0; p < n; p++)
        if (met[q][p] != (p != q)) T_FAIL("n %d: rank %d met rank %d %d times", n, q, p, met[q][p]);
  }
}

/* Two-shot (twoshot_kernel) on host memory: all-reduce's form and the
 * rooted form of broadcast and reduce (p2pk_coll_plan_twoshot, coll_dev.h's
 * p2pk_ts_* helpers). Per step: every rank pushes the shards its first-phase
 * mask names to their owners' set-0 mailboxes; each owner reduces (or, for
 * a broadcast, takes the root's) and sends the result to its second-phase
 * peers' set-1 mailboxes (into its own output too, but for a reduce); then
 * every rank copies what its second-phase peers sent into its output. A
 * mailbox read before it was filled, or filled twice, fails; so does a
 * shard longer than a mailbox (K). Returns 0 on a mismatch. */
#define TS_ELEMS 37 /* int32 elements a rank: 148 bytes, not a multiple of 16 */
static int run_twoshot(int kind, int n, int root, uint64_t K) {
  enum { B = TS_ELEMS * 4 };
  static int32_t in[P2PK_COLL_MAX_RANKS][TS_ELEMS], out[P2PK_COLL_MAX_RANKS][TS_ELEMS];
  static char box0[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS][64];
  static char box1[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS][64];
  int full0[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS], full1[P2PK_COLL_MAX_RANKS][P2PK_COLL_MAX_RANKS];
  p2pk_coll_plan pl[P2PK_COLL_MAX_RANKS];
  CHECK(K <= sizeof box0[0][0]);
  for (int r = 0; r < n; r++) {
    for (int i = 0; i < TS_ELEMS; i++) in[r][i] = 100000 * r + 7 * i + 1, out[r][i] = -1;
    CHECK_OK(p2pk_coll_plan_make(kind, r, n, root, B, in[r], out[r], &pl[r]));
    p2pk_coll_plan_twoshot(kind, r, n, root, &pl[r]);
  }
  for (int r = 0; r < n; r++)
    for (int p = 0; p < n; p++) {
      if (p == r) {
        CHECK(!(pl[r].send_mask >> r & 1) && !(pl[r].send2_mask >> r & 1));
        continue;
      }
      CHECK_EQ(pl[r].send_mask >> p & 1, pl[p].recv_mask >> r & 1);
      CHECK_EQ(pl[r].send2_mask >> p & 1, pl[p].recv2_mask >> r & 1);
    }
  const int R = kind == P2PK_COLL_ALL_REDUCE ? -1 : root;
  const int nsh = p2pk_ts_nshards(n, R);
  char *ib[P2PK_COLL_MAX_RANKS], *ob[P2PK_COLL_MAX_RANKS];
  for (int r = 0; r < n; r++) ib[r] = (char *)in[r], ob[r] = (char *)out[r];
  for (uint64_t off = 0; off < B; off += K * (uint64_t)nsh) {
    const uint64_t L = B - off < K * nsh ? B - off : K * nsh, s = p2pk_ts_shard_bytes(L, nsh);
    CHECK(s <= K && s % 16 == 0);
#define TS_LEN(q) ((uint64_t)(q) * s >= L ? 0 : L - (uint64_t)(q) * s < s ? L - (uint64_t)(q) * s : s)
    memset(full0, 0, sizeof full0);
    memset(full1, 0, sizeof full1);
    for (int q = 0; q < n; q++)
      for (int p = 0; p < n; p++)
        if (pl[q].send_mask >> p & 1) {
          const int sh = p2pk_ts_shard(n, R, p);
          CHECK(sh >= 0 && sh < nsh);
          memset(box0[p][q], 0x5a, sizeof box0[p][q]);
          memcpy(box0[p][q], ib[q] + off + sh * s, TS_LEN(sh));
          full0[p][q]++;
        }
    for (int q = 0; q < n; q++) {
      const int sh = p2pk_ts_shard(n, R, q);
      if (sh < 0) { /* the root: only its own copy, out of place */
        CHECK(R == q);
        if (pl[q].self_copy) memcpy(ob[q] + off, ib[q] + off, L);
        continue;
      }
      int32_t res[16];
      const uint64_t len = TS_LEN(sh);
      for (uint64_t e = 0; e < len / 4; e++) {
        if (pl[q].reduce) {
          int32_t acc = 0;
          for (int r = 0; r < n; r++) {
            int32_t v;
            if (r == q) memcpy(&v, ib[q] + off + sh * s + e * 4, 4);
            else if (full0[q][r] == 1 && (pl[q].recv_mask >> r & 1)) memcpy(&v, box0[q][r] + e * 4, 4);
            else {
              T_FAIL("two-shot %s n %d root %d: rank %d reduces rank %d's shard it never got",
                     p2pk_coll_name(kind), n, root, q, r);
              return 0;
            }
            acc += v;
          }
          res[e] = acc;
        } else {
          CHECK_EQ(pl[q].recv_mask, 1u << root);
          CHECK_EQ(full0[q][root], 1);
          memcpy(&res[e], box0[q][root] + e * 4, 4);
        }
      }
      if (kind != P2PK_COLL_REDUCE) memcpy(ob[q] + off + sh * s, res, len);
      for (int p = 0; p < n; p++)
        if (pl[q].send2_mask >> p & 1) {
          memset(box1[p][q], 0x5a, sizeof box1[p][q]);
          memcpy(box1[p][q], res, len);
          full1[p][q]++;
        }
    }
    for (int q = 0; q < n; q++)
      for (int p = 0; p < n; p++)
        if (pl[q].recv2_mask >> p & 1) {
          const int sh = p2pk_ts_shard(n, R, p);
          CHECK_EQ(full1[q][p], 1);
          memcpy(ob[q] + off + sh * s, box1[q][p], TS_LEN(sh));
        }
#undef TS_LEN
  }
  for (int q = 0; q < n; q++)
    for (int i = 0; i < TS_ELEMS; i++) {
      int32_t want = -1, sum = 0;
      for (int r = 0; r < n; r++) sum += in[r][i];
      if (kind == P2PK_COLL_ALL_REDUCE || (kind == P2PK_COLL_REDUCE && q == root)) want = sum;
      if (kind == P2PK_COLL_BROADCAST) want = in[root][i];
      if (out[q][i] != want) {
        T_FAIL("two-shot %s n %d root %d K %llu: rank %d element %d is %d, expected %d",
               p2pk_coll_name(kind), n, root, (unsigned long long)K, q, i, out[q][i], want);
        return 0;
      }
    }
  return 1;
}

/* The rooted form's shards: n - 1 of them, owned by every rank but the root,
 * each exactly once; all-reduce's n, rank k owning shard k. The root sends
 * (broadcast) or receives (reduce) n - 1 shards, the message once. */
TEST(twoshot_matches_nccl_semantics) {
  static const uint64_t K[] = {16, 32, 48, 64};
  static const int kinds[] = {P2PK_COLL_ALL_REDUCE, P2PK_COLL_BROADCAST, P2PK_COLL_REDUCE};
  for (int n = 2; n <= P2PK_COLL_MAX_RANKS; n++) {
    for (int root = 0; root < n; root++) {
      int owned[P2PK_COLL_MAX_RANKS] = {0};
      CHECK_EQ(p2pk_ts_nshards(n, root), n - 1);
      for (int r = 0; r < n; r++) {
        const int sh = p2pk_ts_shard(n, root, r);
        CHECK(r == root ? sh == -1 : sh >= 0 && sh < n - 1);
        if (sh >= 0) owned[sh]++;
      }
      for (int q = 0; q < n - 1; q++) CHECK_EQ(owned[q], 1);
      p2pk_coll_plan pl;
      for (int kind = P2PK_COLL_BROADCAST; kind <= P2PK_COLL_REDUCE; kind++) {
        CHECK_OK(p2pk_coll_plan_make(kind, root, n, root, 64, (void *)16, (void *)4096, &pl));
        p2pk_coll_plan_twoshot(kind, root, n, root, &pl);
        const uint32_t others = (uint32_t)(((uint64_t)1 << n) - 1) & ~(1u << root);
        CHECK_EQ(kind == P2PK_COLL_BROADCAST ? pl.send_mask : pl.recv2_mask, others);
        CHECK_EQ(kind == P2PK_COLL_BROADCAST ? pl.recv_mask | pl.send2_mask | pl.recv2_mask
                                             : pl.recv_mask | pl.send2_mask, 0u);
      }
    }
    for (int r = 0; r < n; r++) CHECK_EQ(p2pk_ts_shard(n, -1, r), r);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
      for (int root = 0; root < (kinds[k] == P2PK_COLL_ALL_REDUCE ? 1 : n); root++)
        for (size_t c = 0; c < sizeof K / sizeof K[0]; c++)
          if (!run_twoshot(kinds[k], n, root, K[c])) return;
  }
  /* Shard bytes: 16-aligned, covering the step, none past it. */
  for (uint64_t L = 1; L < 600; L += 7)
    for (int nsh = 1; nsh <= 15; nsh++) {
      const uint64_t s = p2pk_ts_shard_bytes(L, nsh);
      CHECK(s % 16 == 0 && s * (uint64_t)nsh >= L && s < L / nsh + 16 + 1);
    }
}

TEST(in_place_forms_and_overlaps) {
  static char buf[1 << 12];
  char *b = buf + 64;
  const uint64_t B = 40;
  p2pk_coll_plan pl;
  for (int r = 0; r < 3; r++) {
    CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_ALL_GATHER, r, 3, 0, B, b + r * B, b, &pl));
    CHECK(pl.in_place && !pl.self_copy);
    CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_REDUCE_SCATTER, r, 3, 0, B, b, b + r * B, &pl));
    CHECK(pl.in_place && pl.reduce);
    CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_ALL_TO_ALL, r, 3, 0, B, b, b, &pl));
    CHECK(pl.in_place && !pl.self_copy);
    CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_ALL_REDUCE, r, 3, 0, B, b, b, &pl));
    CHECK(pl.in_place);
  }
  /* Overlap other than the in-place form. */
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_ALL_GATHER, 1, 3, 0, B, b + 8, b, &pl),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "all_gather: rank 1: sendbuf and recvbuf overlap") != NULL);
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_REDUCE_SCATTER, 0, 2, 0, B, b, b + 4, &pl),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_ALL_REDUCE, 0, 2, 0, B, b, b + 8, &pl),
           P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_BROADCAST, 0, 2, 0, B, b, b + 8, &pl),
           P2PKIT_ERR_INVALID_ARGUMENT);
  /* Buffers a rank does not use may be anything. */
  CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_BROADCAST, 1, 2, 0, B, b, b + 8, &pl));
  CHECK(pl.in_bytes == 0 && pl.recv_mask == 1 && pl.send_mask == 0);
  CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_REDUCE, 1, 2, 0, B, b, b + 8, &pl));
  CHECK(pl.out_bytes == 0 && pl.send_mask == 1 && pl.recv_mask == 0);
  /* Disjoint is fine, adjacent too. */
  CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_ALL_TO_ALL, 0, 2, 0, B, b, b + 2 * B, &pl));
  CHECK(!pl.in_place && pl.self_copy);
  /* Roots and ranks. */
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_BROADCAST, 0, 2, 2, B, b, b, &pl), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK(strstr(p2pkit_last_error(), "root 2 is not a rank of 2") != NULL);
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_REDUCE, 0, 2, -1, B, b, b, &pl), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_OK(p2pk_coll_plan_make(P2PK_COLL_ALL_GATHER, 0, 2, 7, B, b, b + 2 * B, &pl)); /* no root: ignored */
  CHECK_EQ(p2pk_coll_plan_make(P2PK_COLL_KINDS, 0, 2, 0, B, b, b, &pl), P2PKIT_ERR_INTERNAL);
}

TEST(busbw_factors_match_perf) {
  static const struct {
    const char *perf;
    int kind;
  } map[] = {{"all_reduce", P2PK_COLL_ALL_REDUCE},   {"broadcast", P2PK_COLL_BROADCAST},
             {"reduce", P2PK_COLL_REDUCE},           {"all_gather", P2PK_COLL_ALL_GATHER},
             {"reduce_scatter", P2PK_COLL_REDUCE_SCATTER}, {"alltoall", P2PK_COLL_ALL_TO_ALL}};
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    for (int n = 1; n <= 16; n++)
      CHECK_NEAR(p2pk_perf_coll(map[i].perf)->factor(n), p2pk_coll_busbw_factor(map[i].kind, n), 1e-12);
  /* The definitions on 2 GPUs. */
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_ALL_GATHER, 2), 0.5, 0);
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_REDUCE_SCATTER, 2), 0.5, 0);
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_ALL_TO_ALL, 2), 0.5, 0);
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_BROADCAST, 2), 1, 0);
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_REDUCE, 2), 1, 0);
  CHECK_NEAR(p2pk_perf_coll("sendrecv")->factor(2), 1, 0);
  CHECK_NEAR(p2pk_coll_busbw_factor(P2PK_COLL_ALL_REDUCE, 2), 1, 0);
  /* busbw = algbw * factor: 1 GB in 1 ms all-gather on 2 GPUs is 500 GB/s. */
  CHECK_NEAR(p2pk_perf_busbw(p2pk_perf_coll("all_gather"), 1000000000, 1000, 2), 500, 1e-9);
}

TEST(header_words) {
  uint32_t a0, a1, b0, b1;
  /* All-reduce's words are what they were before the other collectives. */
  p2pk_coll_header(P2PK_COLL_ALL_REDUCE, 1000, P2PKIT_FLOAT32, P2PKIT_SUM, 0, 0, 1, 132, &a0, &a1);
  CHECK_EQ(a0, 1000u);
  CHECK_EQ(a1, (132u << 14) | (1u << 11));
  for (int k = 0; k < P2PK_COLL_KINDS; k++)
    for (int j = k + 1; j < P2PK_COLL_KINDS; j++) {
      p2pk_coll_header(k, 77, 1, 0, 0, 0, 0, 4, &a0, &a1);
      p2pk_coll_header(j, 77, 1, 0, 0, 0, 0, 4, &b0, &b1);
      CHECK(a0 != b0 || a1 != b1);
    }
  for (int root = 1; root < 16; root++) {
    p2pk_coll_header(P2PK_COLL_BROADCAST, 77, 1, 0, 0, 0, 0, 4, &a0, &a1);
    p2pk_coll_header(P2PK_COLL_BROADCAST, 77, 1, 0, root, 0, 0, 4, &b0, &b1);
    CHECK(a0 != b0 || a1 != b1);
  }
  /* Every protocol differs from every other (LL128 sets a bit of word 0). */
  for (int p = 0; p < P2PK_PROTO_COUNT; p++)
    for (int q = p + 1; q < P2PK_PROTO_COUNT; q++) {
      p2pk_coll_header(P2PK_COLL_ALL_REDUCE, 77, 1, 0, 0, 0, p, 4, &a0, &a1);
      p2pk_coll_header(P2PK_COLL_ALL_REDUCE, 77, 1, 0, 0, 0, q, 4, &b0, &b1);
      CHECK(a0 != b0 || a1 != b1);
    }
  CHECK_STR(p2pk_coll_name(P2PK_COLL_REDUCE_SCATTER), "reduce_scatter");
  CHECK_STR(p2pk_coll_name(-1), "?");
  CHECK(p2pk_coll_has_op(P2PK_COLL_REDUCE) && !p2pk_coll_has_op(P2PK_COLL_ALL_GATHER));
  CHECK(p2pk_coll_has_root(P2PK_COLL_BROADCAST) && !p2pk_coll_has_root(P2PK_COLL_ALL_TO_ALL));
}

T_MAIN(T_CASE(plans_match_nccl_semantics), T_CASE(staged_stream_matches_nccl_semantics),
       T_CASE(staged_round_robin_pairs_every_rank_once), T_CASE(twoshot_matches_nccl_semantics),
       T_CASE(in_place_forms_and_overlaps),
       T_CASE(busbw_factors_match_perf), T_CASE(header_words))
