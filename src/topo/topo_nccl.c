/* TEMPORARY placeholder, replaced by the real reader/writer (helper A). */
#include "core/check.h"
#include "topo/topo.h"
p2pkit_status_t p2pk_topo_read_nccl(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p) {
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: NCCL XML: not read yet", name);
}
p2pkit_status_t p2pk_topo_write_nccl(const struct p2pkit_topo *t, FILE *out) {
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "NCCL XML: not written yet");
}
