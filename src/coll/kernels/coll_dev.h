/* SPDX-License-Identifier: BSD-3-Clause */
/* What host C code and the CUDA kernels of src/coll share: the algorithm
 * codes, the layout of each rank's scratch (device) and of the host staging
 * region, the kernel argument block and the launchers. Plain C, valid C++. */
#ifndef P2PK_COLL_DEV_H
#define P2PK_COLL_DEV_H

#include <cuda_runtime_api.h>
#include <stdint.h>

/* Helpers both the kernels and the host (CPU tests) run. */
#if defined(__CUDACC__)
#define P2PK_HD static __host__ __device__ __forceinline__
#else
#define P2PK_HD static inline
#endif

#define P2PK_COLL_MAX_RANKS 16
#define P2PK_COLL_MAX_BLOCKS 1024 /* grid limit of every all-reduce kernel */
#define P2PK_COLL_MAILBOXES 512   /* P2P mailboxes per (set, peer) */
#define P2PK_STAGE_MAILBOXES 128  /* staged mailboxes per rank outbox */
#define P2PK_STAGE_P2P_BOXES 16   /* staged send/recv mailboxes per (sender, receiver) */
#define P2PK_SCE_DEPTH_MAX 8      /* copy-engine staged all-reduce: chunks in flight per peer, at most */
/* Send/recv over P2P up to P2PK_P2P_LL_MAX bytes: LL in regions of
 * P2PK_P2P_LL_PER_BLOCK bytes, each with its own lines and counts. 128 KiB
 * (2x H200, process per GPU: with LL to 32 KiB, 64 and
 * 128 KiB took the mailbox path at 9.0-9.3 us against NCCL's 8.3). */
#define P2PK_P2P_LL_BLOCKS 32
#define P2PK_P2P_LL_PER_BLOCK (4u << 10)
#define P2PK_P2P_LL_MAX (P2PK_P2P_LL_BLOCKS * P2PK_P2P_LL_PER_BLOCK)
#define P2PK_COLL_SLOTS 2         /* mailboxes each block cycles through */
#define P2PK_COLL_SETS 2          /* set 0: one-shot and reduce-scatter, set 1: all-gather */

#ifdef __cplusplus
#define P2PK_ALIGN16 alignas(16)
#else
#define P2PK_ALIGN16 _Alignas(16)
#endif

/* Which collective a kernel runs (part of the per-call header). */
enum {
  P2PK_COLL_ALL_REDUCE = 0,
  P2PK_COLL_BROADCAST = 1,
  P2PK_COLL_REDUCE = 2,
  P2PK_COLL_ALL_GATHER = 3,
  P2PK_COLL_REDUCE_SCATTER = 4,
  P2PK_COLL_ALL_TO_ALL = 5,
  P2PK_COLL_KINDS
};

enum { P2PK_ALGO_ONESHOT = 0, P2PK_ALGO_TWOSHOT = 1, P2PK_ALGO_STAGED = 2, P2PK_ALGO_COUNT };
enum { P2PK_PROTO_LL = 0, P2PK_PROTO_SIMPLE = 1, P2PK_PROTO_LL128 = 2, P2PK_PROTO_COUNT };
/* LL128: 128-byte lines of 120 payload bytes and an 8-byte flag, each line
 * written by 8 lanes of one warp in one store instruction (kern_ll128.cu). */
#define P2PK_LL128_LINE 128
#define P2PK_LL128_DATA 120
/* Codes a kernel leaves in the host-mapped error words. */
enum {
  P2PK_DERR_NONE = 0,
  P2PK_DERR_TIMEOUT = 1,  /* a peer did not answer within the timeout */
  P2PK_DERR_MISMATCH = 2, /* a peer called with another count, type, op or algorithm */
  P2PK_DERR_ABORTED = 3   /* a peer gave up and told us */
};

/* Head of each rank's device scratch. Peers write hdr and abort. */
typedef struct {
  uint32_t seq[P2PK_COLL_MAX_BLOCKS];    /* calls so far, one copy per block index */
  int32_t abort;                         /* 0, or 1 + the rank that gave up */
  int32_t err_code, err_peer, err_pad;
  uint64_t wprog[P2PK_COLL_MAX_BLOCKS];  /* staged: (seq << 32) | chunks pushed */
  P2PK_ALIGN16 uint32_t hdr[2][P2PK_COLL_MAX_RANKS][4]; /* LL lines {w0, seq, w1, seq}: [slot][src] */
  /* LL send/recv, per peer and region: uses sent to it and received from it
   * (local), and how many of mine it has taken (written by the peer). */
  uint64_t p2p_llsent[P2PK_COLL_MAX_RANKS][P2PK_P2P_LL_BLOCKS];
  uint64_t p2p_llrecvd[P2PK_COLL_MAX_RANKS][P2PK_P2P_LL_BLOCKS];
  uint64_t p2p_llack[P2PK_COLL_MAX_RANKS][P2PK_P2P_LL_BLOCKS];
  /* Copy engines over P2P through the landing slots (path_ce_slots.c: a
   * process per GPU, or one process under capture). A pair's chunk
   * sits in dst's landing slot [src][s] (s turning across calls), each half
   * of a slot guarded by two flags that one side sets and the
   * other clears, so a call leaves them as it found them (all 0) and a CUDA
   * graph can replay it: busy[dst][s] (at src: 1 while the first half is
   * claimed, set by src before its copy, cleared by dst once it consumed
   * the chunk) and full[src][s] (at dst: 1 once the copy landed, hdr beside
   * it: what the call is; set by src, cleared by dst). The all-reduce also
   * sends its owner's results through the second half: rbusy[dst][s] (at
   * src) and done[src][s] (at dst) the same way. A push that fills a whole
   * slot claims both halves. */
  uint64_t cep_full[P2PK_COLL_MAX_RANKS][P2PK_SCE_DEPTH_MAX];
  uint64_t cep_hdr[P2PK_COLL_MAX_RANKS][P2PK_SCE_DEPTH_MAX];
  uint64_t cep_busy[P2PK_COLL_MAX_RANKS][P2PK_SCE_DEPTH_MAX];
  uint64_t cep_done[P2PK_COLL_MAX_RANKS][P2PK_SCE_DEPTH_MAX];
  uint64_t cep_rbusy[P2PK_COLL_MAX_RANKS][P2PK_SCE_DEPTH_MAX];
  /* One process under capture, pushes straight into a peer's output
   * (path_ce_direct.c): rdy[dst] (at src: 1 once dst's stream reached
   * the call, so its output is free; set by dst, cleared by src before its
   * first push) and fin[src] (at dst: 1 once src's last push landed; set by
   * src, cleared by dst at the call's end). */
  uint64_t cep_rdy[P2PK_COLL_MAX_RANKS];
  uint64_t cep_fin[P2PK_COLL_MAX_RANKS];
} p2pk_dev_ctrl;

/* Head of each rank's part of the host staging region. */
typedef struct {
  P2PK_ALIGN16 uint32_t hdr[2][4]; /* this rank's LL header line per slot */
  int32_t abort;       /* 0, or 1 + the rank that gave up */
  int32_t pad[7];
  uint64_t ready[P2PK_STAGE_MAILBOXES];                       /* written by the owner */
  uint64_t freed[P2PK_STAGE_MAILBOXES][P2PK_COLL_MAX_RANKS];  /* [m][reader] */
  /* Send/recv: this rank's mailboxes for each receiver [dst][m]; ready
   * written by this rank, freed by the receiver. */
  uint64_t p2p_ready[P2PK_COLL_MAX_RANKS][P2PK_STAGE_P2P_BOXES];
  uint64_t p2p_freed[P2PK_COLL_MAX_RANKS][P2PK_STAGE_P2P_BOXES];
  /* Copy-engine staged all-reduce, process per GPU (path_ce_staged.c): chunk q
   * sits in this rank's slot q % depth; full[s] = q + 1 once this
   * rank copied it there, read[s][t] = q + 1 once rank t copied it out;
   * hdr[s]: what the call is (count, type, op), which readers compare. */
  uint64_t ce_full[P2PK_SCE_DEPTH_MAX];
  uint64_t ce_hdr[P2PK_SCE_DEPTH_MAX];
  uint64_t ce_read[P2PK_SCE_DEPTH_MAX][P2PK_COLL_MAX_RANKS];
} p2pk_stage_ctrl;

/* Byte offsets inside a rank's scratch (the same on every rank). Counters are
 * uint64 arrays [set][rank][mailbox]; data and LL areas are indexed by the
 * peer slot (src - dst - 1 + n) % n, so no space goes to a rank itself. */
typedef struct {
  uint64_t ready_off;   /* written by the source: uses of mailbox m filled */
  uint64_t freed_off;   /* written by the consumer of my pushes: uses drained */
  uint64_t sent_off;    /* local: uses of the peer's mailbox m I filled */
  uint64_t recvd_off;   /* local: uses of my mailbox m I drained */
  uint64_t agtok_off;   /* two-shot: [src][mailbox] where src wants its all-gather share */
  uint64_t ll_off;      /* [2 slots][n-1 peer slots] x ll_bytes */
  uint64_t ll_bytes;    /* LL lines per (slot, peer): 2 bytes per payload byte */
  uint64_t p2p_ll_off;  /* LL send/recv: [n-1 peer slots][2 slots] x 2 * P2PK_P2P_LL_MAX */
  uint64_t ll128_off;   /* [2 slots][n-1 peer slots] x ll128_bytes (0 bytes: no LL128) */
  uint64_t ll128_bytes; /* LL128 lines per (slot, peer): 128 bytes per 120 payload bytes */
  uint64_t data_off;    /* [2 sets][n-1 peer slots][nboxes] x mailbox */
  uint64_t mailbox;     /* bytes per P2P mailbox (multiple of 4096) */
  uint64_t nboxes;      /* P2P mailboxes per (set, peer): P2PK_COLL_MAILBOXES or fewer */
  uint64_t total;       /* bytes of scratch per rank */
  /* staged: host region of n parts of stage_stride bytes */
  uint64_t stage_stride;
  uint64_t stage_data_off; /* inside a part: [P2PK_STAGE_MAILBOXES] x stage_mailbox */
  uint64_t stage_mailbox;
  uint64_t stage_p2p_off;  /* inside a part: send/recv [n receivers][P2PK_STAGE_P2P_BOXES] x stage_p2p_box */
  uint64_t stage_p2p_box;
  uint64_t stage_ce_off;   /* inside a part: [depth] x stage_ce_slot (process per GPU) */
  uint64_t stage_ce_slot;  /* 0: no copy-engine slots */
  /* Copy engines over P2P (path_ce_slots.c): landing slots [n-1 peer
   * slots][cep_depth] x cep_slot at cep_off of the scratch (0: none). */
  uint64_t cep_off, cep_slot, cep_depth;
} p2pk_layout;

typedef struct {
  const void *in;
  void *out;
  uint64_t count;       /* elements */
  int32_t dtype, op, algo, proto;
  int32_t rank, nranks;
  int32_t slots;        /* mailboxes per block (P2PK_COLL_SLOTS) */
  uint32_t chunk;       /* bytes per mailbox use, a multiple of 16 */
  uint64_t timeout_ns;
  uint32_t hdr0, hdr1;  /* what this call is: peers must send the same */
  p2pk_layout lay;
  char *local;                      /* my scratch (device) */
  char *peer[P2PK_COLL_MAX_RANKS];  /* every rank's scratch as this GPU sees it */
  char *stage;                      /* staged: host region as this GPU sees it */
  int32_t *host_err;                /* host-mapped: [0] code, [1] peer */
  /* Two-shot all-gather straight into peers' outputs, skipping their mailbox
   * copy. direct 1: tokens are output addresses (one process, peer access on);
   * 2: tokens name a registration, and peer_out[p] is where peer p's output is
   * if its token equals out_token; 0: never. */
  int32_t direct;
  uint64_t out_token;
  char *peer_out[P2PK_COLL_MAX_RANKS];
  /* What moves where (all-reduce: every peer both ways, reduce, no strides).
   * Rank p's share of the input is in + p * in_stride; what comes from rank
   * p goes to out + p * out_stride (copy) or is reduced with this rank's
   * share into out (reduce). See plan.h. */
  uint32_t send_mask, recv_mask; /* peers this rank pushes to / receives from */
  uint64_t in_stride, out_stride;
  int32_t reduce;      /* 1: reduce what arrives with in + rank * in_stride */
  int32_t self_copy;   /* 1: out + rank * out_stride = in + rank * in_stride */
  int32_t pdl;         /* launch with programmatic dependent launch (P2PKIT_PDL) */
  int32_t ll128_x2;    /* LL128: two passes a warp iteration (ll128x2_kernel; p2pk_algo_choose) */
  /* Two-shot (twoshot_kernel): the second phase's peers, where a shard's
   * owner sends its result / receives the other owners' (send_mask and
   * recv_mask are the first phase's), and the root + 1 of the rooted form
   * (broadcast, reduce: p2pk_ts_shard), 0 for all-reduce's. */
  uint32_t send2_mask, recv2_mask;
  int32_t ts_root1, pad2;
} p2pk_ar_args;

/* Two-shot shards. All-reduce cuts each step of a call in n shards and rank
 * k owns shard k: it reduces everyone's shard k and sends the result to
 * every peer. The rooted form (broadcast and reduce on more than 2 ranks,
 * plan.h's p2pk_coll_plan_twoshot) cuts it in n - 1 shards owned by the
 * ranks other than the root, root + 1 + q owning shard q: a broadcast's root
 * scatters them and each owner forwards its shard to the other owners; a
 * reduce's owners reduce theirs and send it to the root. Either way the
 * root's links carry the message once, not once per peer. */
P2PK_HD int p2pk_ts_nshards(int n, int root) { return root >= 0 ? n - 1 : n; }
/* The shard rank r owns, or -1 (the root of the rooted form). */
P2PK_HD int p2pk_ts_shard(int n, int root, int r) {
  return root < 0 ? r : r == root ? -1 : (r - root - 1 + n) % n;
}
/* Bytes per shard of a step of L bytes (the last ones may be shorter or
 * empty): a multiple of 16, so every shard starts 16-byte aligned. */
P2PK_HD uint64_t p2pk_ts_shard_bytes(uint64_t L, int nsh) {
  return ((L + (uint64_t)nsh - 1) / (uint64_t)nsh + 15) & ~(uint64_t)15;
}

/* Send/recv: one kernel runs every point-to-point operation of a group on one
 * communicator, each on its own range of blocks. Grid and chunk of an
 * operation depend only on its size, so both ends agree without a header. */
#define P2PK_P2P_MAX_OPS (2 * (P2PK_COLL_MAX_RANKS - 1))
typedef struct {
  char *buf;           /* send: source; recv: destination */
  uint64_t bytes;
  int32_t peer, send;  /* send 1: push to peer; 0: receive from peer */
  int32_t base, blocks; /* blocks [base, base + blocks) of the grid */
  uint32_t chunk, pad;
} p2pk_p2p_op;

typedef struct {
  p2pk_ar_args a;      /* the communicator's template (in/out unused) */
  int32_t nops, pad;
  p2pk_p2p_op op[P2PK_P2P_MAX_OPS];
} p2pk_p2p_args;

#define P2PK_READY_DIRECT (1ULL << 63) /* all-gather share already in the output */

/* The staged transport's chunk stream (kern_staged.cu has the picture).
 * A call's stream is `segs` segments of one share each (B = count x element
 * bytes), cut in chunks; every chunk passes through one outbox mailbox of
 * every rank. Shared by the kernel and the CPU tests that run the stream on
 * host memory. */
enum { P2PK_STAGE_SHARED = 0, P2PK_STAGE_PER_DEST = 1, P2PK_STAGE_PAIR = 2 };
/* shared: one segment, every reader takes the writer's whole share
 * (all-reduce, broadcast, reduce, all-gather); per-dest: segment s carries
 * every rank's block s, reduced by rank s (reduce-scatter); pair: segment t
 * is round t of a round robin in which ranks swap blocks two by two, rank q
 * sending its block for its partner p and taking p's block for q into its
 * block p (all-to-all). Sending and receiving one block in one segment is
 * what lets all-to-all run in place: a rank's reader overwrites block p's
 * chunk only after its own writer has copied that chunk out (the kernel's
 * in-place wait), and no later segment reads it. A schedule where q sends
 * to q + t + 1 and takes from q - t - 1 overwrites blocks still to be sent
 * on more than 2 ranks. */
P2PK_HD int p2pk_stage_mode(uint64_t in_stride, int reduce) {
  return !in_stride ? P2PK_STAGE_SHARED : reduce ? P2PK_STAGE_PER_DEST : P2PK_STAGE_PAIR;
}
/* Rounds of the pairing: the circle method on n ranks (n even: n - 1 rounds,
 * everyone busy) or on n + 1 with a rank that is not there (n odd: n rounds,
 * one rank idle in each). */
P2PK_HD int p2pk_stage_rounds(int n) { return n % 2 ? n : n - 1; }
/* Rank q's partner in round t, or -1: idle this round. */
P2PK_HD int p2pk_stage_partner(int n, int q, int t) {
  const int m = n % 2 ? n + 1 : n; /* rank m - 1 sits in the middle of the circle */
  int p;
  if (q == m - 1) p = t;
  else if (q == t) p = m - 1;
  else p = ((2 * t - q) % (m - 1) + (m - 1)) % (m - 1);
  return p < n ? p : -1;
}
P2PK_HD int p2pk_stage_segs(int mode, int n) {
  return mode == P2PK_STAGE_PER_DEST ? n : mode == P2PK_STAGE_PAIR ? p2pk_stage_rounds(n) : 1;
}
/* The block of rank me's input that its writer puts in segment t (its offset
 * is block x in_stride), or -1: the mailbox use is counted, nothing copied. */
P2PK_HD int p2pk_stage_send_block(int mode, int n, int me, uint32_t send_mask, int t) {
  if (mode == P2PK_STAGE_SHARED) return send_mask ? 0 : -1;
  int blk = mode == P2PK_STAGE_PER_DEST ? t : p2pk_stage_partner(n, me, t);
  return blk >= 0 && blk != me && ((send_mask >> blk) & 1u) ? blk : -1;
}
/* The peers whose segment-t data rank me's reader uses. */
P2PK_HD uint32_t p2pk_stage_recv_from(int mode, int n, int me, uint32_t recv_mask, int t) {
  if (mode == P2PK_STAGE_PER_DEST) return t == me ? recv_mask : 0;
  if (mode == P2PK_STAGE_PAIR) {
    const int p = p2pk_stage_partner(n, me, t);
    return p >= 0 && p != me ? recv_mask & (1u << p) : 0;
  }
  return recv_mask;
}

#ifdef __cplusplus
extern "C" {
#endif
/* A local reduce (the copy-engine staged all-reduce's last step): out =
 * reduce over src[0..n) in rank order, src[me] being this rank's own input;
 * bytes a multiple of the element size. */
typedef struct {
  const char *src[P2PK_COLL_MAX_RANKS];
  char *out;
  uint64_t bytes;
  int32_t n, me, op;
  int32_t pair; /* a capped grid: both sources' loads together (reduce_chunk's PAIR) */
} p2pk_lr_args;
cudaError_t p2pk_launch_local_reduce(int dtype, const p2pk_lr_args *a, int blocks, cudaStream_t stream);
/* One launch on `stream` of every collective but send/recv over P2P, by
 * a->proto and a->algo (p2pk_launch_allreduce_p2p, below): LL (kern_ll.cu), LL128
 * (kern_ll128.cu), chunked one-shot (kern_oneshot.cu), two-shot
 * (kern_twoshot.cu); `threads` without LL's and LL128's header warp. */
cudaError_t p2pk_launch_ll(const p2pk_ar_args *a, int blocks, int threads, cudaStream_t stream);
cudaError_t p2pk_launch_ll128(const p2pk_ar_args *a, int blocks, int threads, cudaStream_t stream);
cudaError_t p2pk_launch_oneshot(const p2pk_ar_args *a, int blocks, int threads, cudaStream_t stream);
cudaError_t p2pk_launch_twoshot(const p2pk_ar_args *a, int blocks, int threads, cudaStream_t stream);
/* Blocks of ll128_kernel (threads + the header warp) one multiprocessor
 * holds at once, the least over data types but uint8; 0 if CUDA cannot say. */
int p2pk_ll128_per_sm(int threads);
/* Every collective but send/recv through host memory (kern_staged.cu,
 * grid = 2 * blocks). */
cudaError_t p2pk_launch_allreduce_staged(const p2pk_ar_args *a, int blocks, int threads,
                                         cudaStream_t stream);
/* The process-per-GPU copy-engine paths (path_ce_slots.c over P2P,
 * path_ce_staged.c through host memory): one thread on a stream does the steps
 * in order. A wait step waits until *ctr >= v (with
 * the collective kernels' timeout and abort rules; `peer` is who should
 * write it) and, when hdr is set, fails with a mismatch unless *hdr == hv;
 * a post step writes *hdr = hv (when hdr is set), then *ctr = v (release,
 * system scope). After a wait gives up the rest is skipped. */
enum {
  P2PK_CEP_WAIT = 1,
  P2PK_CEP_POST = 2,
  P2PK_CEP_WAIT_EQ = 3, /* until *ctr == v */
  P2PK_CEP_SET = 4      /* *ctr = v, a plain store: this rank's own flag, ordered by a later post */
};
/* Or'ed into a send/recv call's header when it came straight into the
 * receiver's buffer (cep_straight.c: the first chunk's flag carries it). */
#define P2PK_CEP_HDR_DIRECT (1ULL << 63)
#define P2PK_CEP_STEPS 32
typedef struct {
  uint64_t *ctr, *hdr;
  uint64_t v, hv;
  int32_t kind, peer;
} p2pk_cep_step;
typedef struct {
  int32_t n, pad;
  p2pk_cep_step s[P2PK_CEP_STEPS];
} p2pk_cep_steps;
cudaError_t p2pk_launch_cep_sync(const p2pk_ar_args *a, const p2pk_cep_steps *st, cudaStream_t stream);
/* Send/recv over P2P (kern_sendrecv.cu); `esize` picks the element width
 * of the copy loops (1, 2, 4 or 8: the smallest of the group's types). */
cudaError_t p2pk_launch_p2p(const p2pk_p2p_args *a, int esize, int blocks, int threads,
                            cudaStream_t stream);
/* Send/recv through host memory (kern_staged.cu): each operation's blocks
 * move its chunks through the sender's mailboxes for that receiver. */
cudaError_t p2pk_launch_p2p_staged(const p2pk_p2p_args *a, int esize, int blocks, int threads,
                                   cudaStream_t stream);
/* Load every kernel instance on the current device, so none loads lazily
 * inside a caller's CUDA graph capture: all over P2P (each kernel file's own,
 * p2pk_preload_allreduce_p2p below), all through host memory. */
cudaError_t p2pk_preload_ll(void);
cudaError_t p2pk_preload_ll128(void);
cudaError_t p2pk_preload_oneshot(void);
cudaError_t p2pk_preload_twoshot(void);
cudaError_t p2pk_preload_sendrecv(void);
cudaError_t p2pk_preload_reduce(void);
/* P2PKIT_KTRACE builds: the LL kernel's phase timestamps (globaltimer, ns) of
 * the current device's last two calls, [call parity][entry, dependency
 * resolved, prologue done, lines pushed, header seen, first peer line seen,
 * end (block 0, thread 0), then over the whole grid the last push, the last
 * peer line seen, the last block's end]; -1 in other builds. */
int p2pk_ktrace_read(unsigned long long out[2][10]);
cudaError_t p2pk_preload_allreduce_staged(void);

/* The dispatch over P2P by protocol and algorithm, and the preload of
 * every kernel instance over P2P. */
static inline cudaError_t p2pk_launch_allreduce_p2p(const p2pk_ar_args *a, int blocks, int threads,
                                                    cudaStream_t stream) {
  if (a->proto == P2PK_PROTO_LL) return p2pk_launch_ll(a, blocks, threads, stream);
  if (a->proto == P2PK_PROTO_LL128) return p2pk_launch_ll128(a, blocks, threads, stream);
  if (a->algo == P2PK_ALGO_TWOSHOT) return p2pk_launch_twoshot(a, blocks, threads, stream);
  return p2pk_launch_oneshot(a, blocks, threads, stream);
}

static inline cudaError_t p2pk_preload_allreduce_p2p(void) {
  cudaError_t e = p2pk_preload_sendrecv();
  if (e == cudaSuccess) e = p2pk_preload_ll();
  if (e == cudaSuccess) e = p2pk_preload_ll128();
  if (e == cudaSuccess) e = p2pk_preload_reduce();
  if (e == cudaSuccess) e = p2pk_preload_oneshot();
  if (e == cudaSuccess) e = p2pk_preload_twoshot();
  return e;
}
#ifdef __cplusplus
}
#endif

#endif
