/* TEMPORARY placeholder, replaced by the real reader/writer (helper A). */
#include "core/check.h"
#include "topo/topo.h"
p2pkit_status_t p2pk_topo_write_file(const struct p2pkit_topo *t, FILE *out) {
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "p2pkit topology files: not written yet");
}
p2pkit_status_t p2pk_topo_read_file(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p) {
  return p2pk_fail(P2PKIT_ERR_UNSUPPORTED, "%s: p2pkit topology files: not read yet", name);
}
