/* SPDX-License-Identifier: BSD-3-Clause */
/* SM copy kernel configurations: "kind=chunk,hint=cs,bps=2,threads=512,unroll=4"
 * or "kind=tma,bps=1,tile=16K,stages=4". One text form for the setting
 * (P2PKIT_SM_COPY_CONFIG), the bench flag (--sm-config) and the sweep report. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "xfer/xfer.h"

static const char *const kind_names[P2PK_SMK_COUNT] = {"stride", "chunk", "tma"};
static const char *const hint_names[P2PK_HINT_COUNT] = {"plain", "cs", "nc"};

const char *p2pk_smk_kind_name(int kind) {
  return kind >= 0 && kind < P2PK_SMK_COUNT ? kind_names[kind] : "?";
}

const char *p2pk_hint_name(int hint) {
  return hint >= 0 && hint < P2PK_HINT_COUNT ? hint_names[hint] : "?";
}

void p2pk_sm_config_default(p2pk_sm_config *c) {
  /* Contiguous chunk per block, 8 streaming 16-byte loads in flight per
   * thread, 1024 threads per SM. The TMA kind (bulk copies through shared
   * memory, tile/stages below) is measured by `p2pkit bench --sm-sweep`;
   * make it the default here once the device run shows it faster. */
  c->kind = P2PK_SMK_CHUNK;
  c->hint = P2PK_HINT_CS;
  c->blocks_per_sm = 2;
  c->threads = 512;
  c->unroll = 8;
  c->tile_kib = 16;
  c->stages = 4;
}

static int name_index(const char *const *names, int n, const char *v, size_t len) {
  for (int i = 0; i < n; i++)
    if (strlen(names[i]) == len && strncasecmp(names[i], v, len) == 0) return i;
  return -1;
}

static int parse_num(const char *v, size_t len, long *out) {
  char buf[32];
  if (len == 0 || len >= sizeof buf) return -1;
  memcpy(buf, v, len);
  buf[len] = '\0';
  char *end = NULL;
  errno = 0;
  long x = strtol(buf, &end, 10);
  if (end == buf || errno) return -1;
  if (*end == 'k' || *end == 'K') end++; /* tile=16K */
  if (*end) return -1;
  *out = x;
  return 0;
}

static int check(const p2pk_sm_config *c, char *err, size_t errlen) {
  if (c->blocks_per_sm < 1 || c->blocks_per_sm > 32) {
    snprintf(err, errlen, "bps=%d: blocks per SM must be 1 to 32", c->blocks_per_sm);
    return -1;
  }
  if (c->threads < 32 || c->threads > 1024 || c->threads % 32) {
    snprintf(err, errlen, "threads=%d: must be a multiple of 32 from 32 to 1024", c->threads);
    return -1;
  }
  if (c->unroll != 1 && c->unroll != 2 && c->unroll != 4 && c->unroll != 8) {
    snprintf(err, errlen, "unroll=%d: must be 1, 2, 4 or 8", c->unroll);
    return -1;
  }
  if (c->tile_kib < 1 || c->tile_kib > 64) {
    snprintf(err, errlen, "tile=%dK: must be 1K to 64K", c->tile_kib);
    return -1;
  }
  if (c->stages < 1 || c->stages > P2PK_SM_MAX_STAGES) {
    snprintf(err, errlen, "stages=%d: must be 1 to %d", c->stages, P2PK_SM_MAX_STAGES);
    return -1;
  }
  if (c->tile_kib * c->stages > P2PK_SM_MAX_SMEM_KIB) {
    snprintf(err, errlen, "tile x stages = %d KiB of shared memory per block; at most %d",
             c->tile_kib * c->stages, P2PK_SM_MAX_SMEM_KIB);
    return -1;
  }
  return 0;
}

int p2pk_sm_config_check(const char *text, char *why, size_t len) {
  p2pk_sm_config c;
  return p2pk_sm_config_parse(text, &c, why, len);
}

int p2pk_sm_config_parse(const char *text, p2pk_sm_config *out, char *err, size_t errlen) {
  p2pk_sm_config c;
  p2pk_sm_config_default(&c);
  const char *p = text ? text : "";
  while (*p) {
    size_t n = strcspn(p, ",");
    const char *eq = memchr(p, '=', n);
    if (!eq) {
      snprintf(err, errlen, "'%.*s' is not key=value", (int)n, p);
      return -1;
    }
    size_t klen = (size_t)(eq - p), vlen = n - klen - 1;
    const char *v = eq + 1;
    long x = 0;
    int bad = 0;
    if (klen == 4 && strncasecmp(p, "kind", 4) == 0) {
      c.kind = name_index(kind_names, P2PK_SMK_COUNT, v, vlen);
      if (c.kind < 0) {
        snprintf(err, errlen, "kind '%.*s' is not stride, chunk or tma", (int)vlen, v);
        return -1;
      }
    } else if (klen == 4 && strncasecmp(p, "hint", 4) == 0) {
      c.hint = name_index(hint_names, P2PK_HINT_COUNT, v, vlen);
      if (c.hint < 0) {
        snprintf(err, errlen, "hint '%.*s' is not plain, cs or nc", (int)vlen, v);
        return -1;
      }
    } else if (klen == 3 && strncasecmp(p, "bps", 3) == 0) {
      bad = parse_num(v, vlen, &x);
      c.blocks_per_sm = (int)x;
    } else if (klen == 7 && strncasecmp(p, "threads", 7) == 0) {
      bad = parse_num(v, vlen, &x);
      c.threads = (int)x;
    } else if (klen == 6 && strncasecmp(p, "unroll", 6) == 0) {
      bad = parse_num(v, vlen, &x);
      c.unroll = (int)x;
    } else if (klen == 4 && strncasecmp(p, "tile", 4) == 0) {
      bad = parse_num(v, vlen, &x);
      c.tile_kib = (int)x;
    } else if (klen == 6 && strncasecmp(p, "stages", 6) == 0) {
      bad = parse_num(v, vlen, &x);
      c.stages = (int)x;
    } else {
      snprintf(err, errlen, "unknown key '%.*s' (expected kind, hint, bps, threads, unroll, tile, "
               "stages)", (int)klen, p);
      return -1;
    }
    if (bad || x < 0 || x > 1 << 20) {
      snprintf(err, errlen, "'%.*s' is not a number", (int)n, p);
      return -1;
    }
    p += n;
    if (*p == ',') p++;
  }
  if (check(&c, err, errlen) != 0) return -1;
  *out = c;
  return 0;
}

void p2pk_sm_config_format(const p2pk_sm_config *c, char *out, size_t len) {
  snprintf(out, len, "kind=%s,hint=%s,bps=%d,threads=%d,unroll=%d,tile=%dK,stages=%d",
           p2pk_smk_kind_name(c->kind), p2pk_hint_name(c->hint), c->blocks_per_sm, c->threads,
           c->unroll, c->tile_kib, c->stages);
}
