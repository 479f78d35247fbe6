/* SPDX-License-Identifier: BSD-3-Clause */
/* The copy layer, internal side: settings, the path policy (a pure function
 * of the pair, the settings and the size, so recorded machines test it on the
 * CPU), process-wide peer-access bookkeeping, SM-kernel configurations, and
 * the per-pair staging state. */
#ifndef P2PK_XFER_H
#define P2PK_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "p2pkit.h"

/* --- SM copy kernel configuration ---------------------------------------- */

typedef enum {
  P2PK_SMK_STRIDE = 0, /* grid-stride loop over tiles of threads*unroll vectors */
  P2PK_SMK_CHUNK = 1,  /* each block copies one contiguous chunk */
  P2PK_SMK_TMA = 2,    /* bulk copies (cp.async.bulk) through shared memory */
  P2PK_SMK_COUNT
} p2pk_smk_kind;

typedef enum {
  P2PK_HINT_PLAIN = 0, /* ld.global / st.global */
  P2PK_HINT_CS = 1,    /* ld.global.cs / st.global.cs (streaming, evict first) */
  P2PK_HINT_NC = 2,    /* ld.global.nc (read-only path) / st.global.cs */
  P2PK_HINT_COUNT
} p2pk_hint;

typedef struct {
  int kind;          /* p2pk_smk_kind */
  int hint;          /* p2pk_hint (stride and chunk kernels) */
  int blocks_per_sm; /* grid = blocks_per_sm x SM count, capped by the work */
  int threads;       /* per block (stride, chunk); the TMA kernel uses one warp */
  int unroll;        /* 16-byte vectors in flight per thread: 1, 2, 4 or 8 */
  int tile_kib;      /* TMA: bytes per bulk copy, in KiB */
  int stages;        /* TMA: shared-memory stages per block */
} p2pk_sm_config;

#define P2PK_SM_MAX_UNROLL 8
#define P2PK_SM_MAX_STAGES 8
#define P2PK_SM_MAX_SMEM_KIB 200 /* tile_kib * stages per block */
/* Bodies under this many bytes use the chunk kernel even when kind is TMA. */
#define P2PK_SM_TMA_MIN_BYTES (256u << 10)

void p2pk_sm_config_default(p2pk_sm_config *c);
/* "kind=tma,bps=1,tile=16K,stages=4" or "kind=chunk,hint=cs,bps=2,threads=512,
 * unroll=4"; keys not given keep the default; "" is the default. 0 ok, -1 with
 * the reason in `err`. */
int p2pk_sm_config_parse(const char *text, p2pk_sm_config *c, char *err, size_t errlen);
/* The same, for the settings registry's check of P2PKIT_SM_COPY_CONFIG. */
int p2pk_sm_config_check(const char *text, char *why, size_t len);
/* The canonical text of a configuration (parses back to the same values). */
void p2pk_sm_config_format(const p2pk_sm_config *c, char *out, size_t len);
const char *p2pk_smk_kind_name(int kind);
const char *p2pk_hint_name(int hint);

/* --- settings and path policy --------------------------------------------- */

/* NCCL_P2P_LEVEL's scale: the farthest path class P2P may use. */
typedef enum {
  P2PK_PL_LOC = 0, /* never */
  P2PK_PL_NVL = 1,
  P2PK_PL_PIX = 2,
  P2PK_PL_PXB = 3,
  P2PK_PL_PHB = 4, /* NCCL's PHB also covers nvidia-smi's NODE */
  P2PK_PL_SYS = 5,
  P2PK_PL_ANY = 6  /* not set: whatever the driver allows */
} p2pk_p2p_level;

typedef struct {
  int p2p_disable;       /* P2PKIT_P2P_DISABLE=1 */
  int p2p_level;         /* p2pk_p2p_level */
  size_t sm_copy_max;    /* P2PKIT_SM_COPY_MAX; 0: auto */
  size_t stage_chunk;    /* P2PKIT_STAGE_CHUNK */
  int stage_depth;       /* P2PKIT_STAGE_DEPTH */
  p2pk_sm_config sm;     /* P2PKIT_SM_COPY_CONFIG */
} p2pk_xfer_settings;

#define P2PK_STAGE_MAX_DEPTH 16
#define P2PK_STAGE_MIN_CHUNK (4u << 10)
#define P2PK_STAGE_MAX_CHUNK (1u << 30)
/* Copies up to this size use the SM push kernel when P2PKIT_SM_COPY_MAX is 0. */
#define P2PK_SM_COPY_AUTO (64u << 10)

/* Read the P2PKIT_* settings above. A malformed value is an error naming the
 * setting and the value (P2PKIT_ERR_INVALID_ARGUMENT). */
p2pkit_status_t p2pk_xfer_settings_read(p2pk_xfer_settings *s);
/* "NVL", "pix", ... (case-insensitive; "" is P2PK_PL_ANY); -1 when unknown. */
int p2pk_p2p_level_parse(const char *text);
/* P2PKIT_P2P_LEVEL parsed into *level (P2PK_PL_*); a value that does not
 * parse is an error naming it. Copies and communicators both read it here. */
p2pkit_status_t p2pk_p2p_level_read(int *level);
const char *p2pk_p2p_level_name(int level);
/* Where a pair sits on that scale (NVLink: NVL; NODE: PHB; unknown: SYS). */
int p2pk_pair_level(const p2pkit_pair_t *pair);
/* Does P2PKIT_P2P_LEVEL `level` (P2PK_PL_*) allow the pair's path? 1 yes; 0
 * no, with the reason in `why`. Copies (p2pk_p2p_allowed) and communicators
 * decide it here. */
int p2pk_level_allows(const p2pkit_pair_t *pair, int level, char *why, size_t len);
/* May P2P be used for this pair? 1 yes; 0 no, with the reason in `why`. */
int p2pk_p2p_allowed(const p2pkit_pair_t *pair, const p2pk_xfer_settings *s, char *why,
                     size_t len);
/* Copies up to this size go through the SM push kernel under AUTO. */
size_t p2pk_sm_copy_threshold(const p2pk_xfer_settings *s);
/* The path AUTO takes for `bytes` over this pair, and the description the
 * log prints ("P2P/NVLink/CE", "STAGED/host (P2P disabled by ...)"). */
p2pkit_path_t p2pk_path_choose(const p2pkit_pair_t *pair, const p2pk_xfer_settings *s,
                               size_t bytes, char *desc, size_t len);
/* Description of an explicit path; `reason` (may be NULL) goes in parentheses. */
void p2pk_path_describe(const p2pkit_pair_t *pair, p2pkit_path_t path, const char *reason,
                        char *out, size_t len);
/* 1 when the path reads or writes the peer's memory directly. */
int p2pk_path_is_p2p(p2pkit_path_t path);

/* --- peer access (process-wide, reference counted) ------------------------ */

/* Make `accessor` able to map `peer`'s memory. The first caller enables it
 * (cudaDeviceEnablePeerAccess); "already enabled" by someone else is success,
 * and such a pair is never disabled by p2pkit. Thread-safe. Errors name the
 * pair and the driver's reason. */
p2pkit_status_t p2pk_peer_acquire(int accessor, int peer);
/* Drop one reference; the last one disables what p2pkit enabled. */
void p2pk_peer_release(int accessor, int peer);
/* Benchmarks: turn peer access off (1 = it was on) and back on. */
p2pkit_status_t p2pk_peer_suspend(int accessor, int peer, int *was_on_p);
p2pkit_status_t p2pk_peer_resume(int accessor, int peer);

/* --- copies ---------------------------------------------------------------- */

/* Per-call overrides (benchmarks and sweeps); zero / NULL fields keep the
 * context's settings. */
typedef struct {
  const p2pk_sm_config *sm;
  size_t stage_chunk;
  int stage_depth;
  int stage_ramp; /* 1 on (the default), -1 off */
} p2pk_copy_opts;

p2pkit_status_t p2pk_copy_ex(p2pkit_ctx_t ctx, void *dst, int dst_dev, const void *src,
                             int src_dev, size_t bytes, p2pkit_stream_t stream,
                             p2pkit_path_t path, const p2pk_copy_opts *opts);
/* The settings the context read at creation, and its topology. */
const p2pk_xfer_settings *p2pk_ctx_settings(p2pkit_ctx_t ctx);
p2pkit_topo_t p2pk_ctx_topo(p2pkit_ctx_t ctx);
/* Enable peer access for a copy src -> dst over `path` (both directions for
 * the copy engine, src->dst for push, dst->src for pull); held until the
 * context is destroyed. */
p2pkit_status_t p2pk_ctx_peer(p2pkit_ctx_t ctx, int src_dev, int dst_dev, p2pkit_path_t path);

#endif
