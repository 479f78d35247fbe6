/* SPDX-License-Identifier: BSD-3-Clause */
/* Which path a copy takes: a pure function of the pair (from the topology),
 * the settings and the size. Nothing here touches CUDA. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/check.h"
#include "core/param.h"
#include "xfer/xfer.h"

static const char *const level_names[] = {"LOC", "NVL", "PIX", "PXB", "PHB", "SYS", ""};

int p2pk_p2p_level_parse(const char *text) {
  if (!text || !text[0]) return P2PK_PL_ANY;
  for (int i = P2PK_PL_LOC; i < P2PK_PL_ANY; i++)
    if (strcasecmp(text, level_names[i]) == 0) return i;
  return -1;
}

const char *p2pk_p2p_level_name(int level) {
  if (level < P2PK_PL_LOC || level > P2PK_PL_ANY) return "?";
  return level == P2PK_PL_ANY ? "any" : level_names[level];
}

p2pkit_status_t p2pk_p2p_level_read(int *level) {
  const char *lv = p2pk_param_str("P2PKIT_P2P_LEVEL");
  *level = p2pk_p2p_level_parse(lv);
  if (*level < 0) {
    *level = P2PK_PL_ANY;
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "P2PKIT_P2P_LEVEL='%s' is not one of LOC, NVL, PIX, PXB, PHB, SYS", lv);
  }
  return P2PKIT_SUCCESS;
}

int p2pk_pair_level(const p2pkit_pair_t *pair) {
  switch (pair->link) {
    case P2PKIT_LINK_SELF: return P2PK_PL_LOC;
    case P2PKIT_LINK_NVLINK: return P2PK_PL_NVL;
    case P2PKIT_LINK_PIX: return P2PK_PL_PIX;
    case P2PKIT_LINK_PXB: return P2PK_PL_PXB;
    case P2PKIT_LINK_PHB:
    case P2PKIT_LINK_NODE: return P2PK_PL_PHB;
    default: return P2PK_PL_SYS; /* SYS, or unknown: assume the farthest */
  }
}

p2pkit_status_t p2pk_xfer_settings_read(p2pk_xfer_settings *s) {
  /* The registry checks every value (ranges, words, the SM kernel's
   * grammar) for every reader; what follows cannot fail after it. */
  P2PK_CHECK(p2pk_param_check());
  p2pk_xfer_settings r;
  memset(&r, 0, sizeof r);
  r.p2p_disable = (int)p2pk_param_int("P2PKIT_P2P_DISABLE");
  P2PK_CHECK(p2pk_p2p_level_read(&r.p2p_level));
  r.sm_copy_max = p2pk_param_size("P2PKIT_SM_COPY_MAX");
  r.stage_chunk = p2pk_param_size("P2PKIT_STAGE_CHUNK");
  r.stage_depth = (int)p2pk_param_int("P2PKIT_STAGE_DEPTH");
  char err[160];
  const char *cfg = p2pk_param_str("P2PKIT_SM_COPY_CONFIG");
  if (p2pk_sm_config_parse(cfg, &r.sm, err, sizeof err) != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "P2PKIT_SM_COPY_CONFIG='%s': %s", cfg, err);
  *s = r;
  return P2PKIT_SUCCESS;
}

int p2pk_p2p_allowed(const p2pkit_pair_t *pair, const p2pk_xfer_settings *s, char *why,
                     size_t len) {
  if (pair->src == pair->dst) return 1;
  if (s->p2p_disable) {
    snprintf(why, len, "P2P disabled by P2PKIT_P2P_DISABLE");
    return 0;
  }
  if (pair->p2p == 0) {
    if (pair->cuda_access == 0)
      snprintf(why, len, "no peer access: cudaDeviceCanAccessPeer(GPU%d, GPU%d) = 0", pair->src,
               pair->dst);
    else
      snprintf(why, len, "no peer access: NVML P2P read %s, write %s",
               p2pkit_p2p_code_name(pair->caps[P2PKIT_P2P_READ]),
               p2pkit_p2p_code_name(pair->caps[P2PKIT_P2P_WRITE]));
    return 0;
  }
  return p2pk_level_allows(pair, s->p2p_level, why, len);
}

int p2pk_level_allows(const p2pkit_pair_t *pair, int level, char *why, size_t len) {
  if (level == P2PK_PL_ANY || p2pk_pair_level(pair) <= level) return 1;
  if (level == P2PK_PL_LOC)
    snprintf(why, len, "P2P disabled by P2PKIT_P2P_LEVEL=LOC");
  else
    snprintf(why, len, "path %s is beyond P2PKIT_P2P_LEVEL=%s", pair->label[0] ? pair->label : "?",
             p2pk_p2p_level_name(level));
  return 0;
}

size_t p2pk_sm_copy_threshold(const p2pk_xfer_settings *s) {
  return s->sm_copy_max ? s->sm_copy_max : P2PK_SM_COPY_AUTO;
}

int p2pk_path_is_p2p(p2pkit_path_t path) {
  return path == P2PKIT_PATH_P2P_CE || path == P2PKIT_PATH_P2P_SM_PUSH ||
         path == P2PKIT_PATH_P2P_SM_PULL;
}

static const char *link_word(const p2pkit_pair_t *pair) {
  if (pair->src == pair->dst) return "local";
  return pair->link == P2PKIT_LINK_NVLINK ? "NVLink" : "PCIe";
}

void p2pk_path_describe(const p2pkit_pair_t *pair, p2pkit_path_t path, const char *reason,
                        char *out, size_t len) {
  char base[64];
  switch (path) {
    case P2PKIT_PATH_P2P_CE: snprintf(base, sizeof base, "P2P/%s/CE", link_word(pair)); break;
    case P2PKIT_PATH_P2P_SM_PUSH: snprintf(base, sizeof base, "P2P/%s/SM", link_word(pair)); break;
    case P2PKIT_PATH_P2P_SM_PULL:
      snprintf(base, sizeof base, "P2P/%s/SM-pull", link_word(pair));
      break;
    case P2PKIT_PATH_STAGED: snprintf(base, sizeof base, "STAGED/host"); break;
    case P2PKIT_PATH_STAGED_SERIAL: snprintf(base, sizeof base, "STAGED-SERIAL/host"); break;
    case P2PKIT_PATH_DRIVER: snprintf(base, sizeof base, "DRIVER/cudaMemcpyPeerAsync"); break;
    default: snprintf(base, sizeof base, "?"); break;
  }
  if (reason && reason[0]) snprintf(out, len, "%s (%s)", base, reason);
  else snprintf(out, len, "%s", base);
}

p2pkit_path_t p2pk_path_choose(const p2pkit_pair_t *pair, const p2pk_xfer_settings *s,
                               size_t bytes, char *desc, size_t len) {
  char why[160] = "";
  p2pkit_path_t path;
  if (pair->src == pair->dst) {
    path = P2PKIT_PATH_P2P_CE;
  } else if (!p2pk_p2p_allowed(pair, s, why, sizeof why)) {
    path = P2PKIT_PATH_STAGED;
  } else if (bytes <= p2pk_sm_copy_threshold(s)) {
    /* Small copies: a kernel starts sooner than the copy engine. */
    path = P2PKIT_PATH_P2P_SM_PUSH;
  } else {
    path = P2PKIT_PATH_P2P_CE;
  }
  if (path != P2PKIT_PATH_STAGED && pair->src != pair->dst && pair->p2p < 0)
    snprintf(why, sizeof why, "peer access not recorded; trying it");
  p2pk_path_describe(pair, path, why, desc, len);
  return path;
}

const char *p2pkit_path_name(p2pkit_path_t path) {
  static const char *const names[P2PKIT_PATH_COUNT] = {
      [P2PKIT_PATH_AUTO] = "auto",
      [P2PKIT_PATH_P2P_CE] = "p2p-ce",
      [P2PKIT_PATH_P2P_SM_PUSH] = "p2p-sm-push",
      [P2PKIT_PATH_P2P_SM_PULL] = "p2p-sm-pull",
      [P2PKIT_PATH_STAGED] = "staged",
      [P2PKIT_PATH_STAGED_SERIAL] = "staged-serial",
      [P2PKIT_PATH_DRIVER] = "driver",
  };
  if ((int)path < 0 || path >= P2PKIT_PATH_COUNT) return "unknown";
  return names[path];
}
