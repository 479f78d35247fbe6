/* SPDX-License-Identifier: BSD-3-Clause */
/* Copy engines over P2P through landing slots, with one process per GPU:
 * all-reduce, reduce-scatter, reduce, broadcast, all-gather and all-to-all
 * from their P2PKIT_*_CE_MIN, and send/recv from P2PKIT_SENDRECV_CE_MIN
 * (with a process per GPU, a setting not given takes its own default:
 * select.c's thresholds). One process under graph
 * capture runs the same code with plain device pointers to the peers'
 * scratch (its events between per-GPU captures could not be replayed), and
 * when every rank's call is in one group, pushes all-reduce results,
 * broadcasts, all-to-all blocks and sends straight into the receivers'
 * buffers ("direct", path_ce_direct.c). With a process per GPU a receive
 * into a registered buffer may take its send straight in too ("straight
 * in", cep_straight.c), eagerly and under capture.
 *
 * Why: with a process per GPU the kernels move every byte with SM stores,
 * which top out at ~364 GB/s each way on the 2x H200; the copy engines
 * reach ~390 (cudaMemcpyPeerAsync 392-395 GB/s one way, 775 both;
 * docs/decisions/sm-copy-plateau.md). One process drives them through
 * CUDA events (path_ce_events.c); here a
 * peer's buffers are not mapped (only its scratch is, through CUDA IPC), so
 * every chunk lands in a slot of the receiver's scratch, and the ranks tell
 * each other about chunks through counters beside it, waited for by
 * one-thread kernels on the streams (p2pk_launch_cep_sync, with the
 * collective kernels' timeout and abort rules: a peer that dies makes the
 * others fail, not hang) and written by stream memory operations where a
 * post stands alone (p2pk_cep_run, ce_common.c: no multiprocessor needed, so a
 * collective kernel that fills the GPU cannot starve them).
 *
 * Landing slots: rank t's scratch holds, for each peer r, `depth` slots of
 * lay.cep_slot bytes (P2PKIT_CE_DEPTH, default 2 here; P2PKIT_CE_CHUNK, at most
 * and by default what keeps all of them within 192 MiB: 96 MiB on 2 GPUs).
 * Chunk k of a call on the pair r -> t uses slot (q + k) % depth, q the
 * pair's chunks so far (sent at r, recvd at t: both ends count
 * alike, eagerly and when capturing, so a replay repeats its slots); a
 * call's first chunk then lands beside the last call's last one instead
 * of waiting for it (restarting at slot 0 every call took a 16 MiB
 * broadcast from 48.7 to 75.7 us on 2x H200). Each half of a
 * slot has two flags (p2pk_dev_ctrl, coll_dev.h): busy[t][s] at r (the
 * sender claims the half: waits until it is 0, sets it to 1) and full[r][s]
 * at t (the sender sets it once its copy landed, with the call's header
 * beside it; the receiver waits for 1 and clears it, and clears the
 * sender's busy once it consumed the half); the second half has rbusy and
 * done the same way. A push that fills a whole slot claims both halves.
 * Every flag returns to 0, so a call leaves the flags as it found them and
 * a CUDA graph can replay it (counters of chunks numbered across calls
 * would be baked into the launches). Waits read this rank's own scratch; posts that
 * set a flag write a peer's, those that clear their own write this rank's.
 *
 * Reduce-scatter, rank t owning share t, per chunk k of a share (s its
 * slot):
 *   rank r, side stream:   claim busy[t][s], rbusy[t][s] (a whole slot);
 *                          in_r[share t, k] -> land_t[r][s]; set
 *                          full[r][s] at t                     (every t != r)
 *   rank t, its stream:    take full[r][s] (every r, checking the header);
 *                          out_t[k] = in_0 op in_1 ... in rank order (its
 *                          own input, the peers' from land_t); clear
 *                          busy[t][s], rbusy[t][s] at every r
 * Reduce is the same with the root owning the whole message; broadcast the
 * root pushing the message to every peer, which copies each chunk out of its
 * slot (a kernel) into its output; send/recv the sender pushing, the
 * receiver copying out, as the broadcast. All-reduce: rank t owns shard t
 * (p2pk_ce_shard), the peers' contributions to it land in the first half of
 * its slots and it reduces them as above (clearing busy only); then its
 * gather stream claims rbusy, pushes each reduced chunk into the second
 * half of every peer's slot for t and sets done; each peer takes done,
 * copies the result out into its output (a kernel) and clears rbusy.
 * Every rank reduces every element in rank order from the same bytes: the
 * same bits on every rank. Only pushes cross the link: pulling the results
 * back out of the owner's slots (this file's first version) ran at 317-352
 * GB/s busbw on 512 MiB - 1 GiB against 366 at 256 MiB (2x H200).
 *
 * The copy streams (side, gather) hold only copies and event waits; the
 * one-thread kernels that claim slots run ahead on their own streams and
 * end in events the copies wait for, and the posts run on others after
 * events the copies record (a kernel between two copies on one stream left
 * the copy engine idle ~14 us a chunk on 2x H200). On a rank's own stream a post
 * and the next chunk's waits go in one launch (cep_batch_t: launched when full,
 * so any number of steps keeps its order). START (the caller's stream at
 * the call) comes before the copy streams start (under capture before
 * every stream of the call); the caller's stream ends after SIDE (the
 * pushes read its input), and for the all-reduce after GATHER (its result
 * pushes read its output) and RECV (its copies-out write it). Under
 * capture the posts are kernels (memory operations captured in a graph
 * ran far slower: p2pk_cep_batch() says by how much) and
 * every stream of the call joins the caller's before it ends. */
#include <cuda_runtime_api.h>

#include "coll/paths/ce/cep.h"
#include "core/check.h"

/* One rank's collective, its GPU current. */
static p2pkit_status_t launch(const p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  const int kind = call->kind, root = call->root;
  const void *send = call->send;
  void *recv = call->recv;
  const size_t count = call->count;
  const p2pkit_dtype_t dtype = call->dtype;
  const p2pkit_redop_t op = call->op;
  cudaStream_t stream = (cudaStream_t)call->stream;
  p2pk_cep_begin(c, call->capture, call->grid_cap);
  cudaError_t e = call->capture < 0 ? p2pk_cep_note_capture(c, stream) : cudaSuccess;
  if (e != cudaSuccess) return p2pk_cuda_status(c, p2pk_call_name(call), e);
  p2pk_cep_tr_begin(c, stream, p2pk_coll_name(kind));
  e = kind == P2PK_COLL_ALL_REDUCE ? p2pk_cep_allreduce(c, send, recv, count, dtype, op, stream, NULL)
      : kind == P2PK_COLL_ALL_TO_ALL || kind == P2PK_COLL_ALL_GATHER
          ? p2pk_cep_a2a(c, send, recv, count, dtype, stream, kind == P2PK_COLL_ALL_GATHER)
          : p2pk_cep_rooted(c, kind, send, recv, count, dtype, op, root, stream);
  p2pk_cep_tr_end(c, stream);
  return p2pk_cuda_status(c, p2pk_call_name(call), e);
}

/* Over P2P the scratch ends with landing slots when any of their
 * thresholds is on (every rank the same settings). */
static void scratch(const struct p2pkit_comm *c, p2pk_layout *lay) {
  const int cep = p2pk_sel_wants_slots(&c->sel);
  const int depth = cep ? p2pk_cep_depth() : 0;
  p2pk_layout_add_cep(lay, c->nranks, depth, p2pk_cep_slot_bytes(c->nranks, depth, cep));
}

static p2pkit_status_t init(struct p2pkit_comm *c) { return p2pk_cep_open(c); }
static void fini(struct p2pkit_comm *c) { p2pk_cep_close(c); }

const p2pk_path p2pk_path_ce_slots = {
    .id = P2PK_PATH_CE_SLOTS,
    .kinds = (1u << P2PK_KINDS) - 1,
    .modes = P2PK_MODE_ONE | P2PK_MODE_PER_GPU,
    .transports = P2PK_XPORT_P2P,
    .captures = P2PK_CAPTURE_EAGER | P2PK_CAPTURE_GRAPH,
    .scratch = scratch,
    .init = init,
    .fini = fini,
    .launch = launch,
    .sendrecv = p2pk_cep_sendrecv,
    .on_error = p2pk_cep_log_flags,
};
