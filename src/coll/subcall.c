/* SPDX-License-Identifier: BSD-3-Clause */
/* One collective on a communicator from inside another call (the
 * hierarchical path's steps on a host's communicator): its plan, its
 * decision (logged at INFO), its path's launch on the caller's stream.
 * No group, no checks beyond the plan's: the caller made the buffers. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "coll/path.h"
#include "core/check.h"

p2pkit_status_t p2pk_sub_launch(p2pk_call *call) {
  struct p2pkit_comm *c = call->c;
  const char *name = p2pk_coll_name(call->kind);
  P2PK_CHECK(p2pk_coll_plan_make(call->kind, c->rank, c->nranks, call->root, call->bytes,
                                 call->send, call->recv, &call->plan));
  p2pk_sel_key k;
  p2pk_call_key(call, &k);
  if (p2pk_select_needs_capture(&c->sel, &k)) {
    call->capture = p2pk_capture_of(c, call->stream);
    k.capture = call->capture > 0;
  }
  p2pk_select(&c->sel, &k, &call->d);
  p2pk_sel_log(&c->sel, c->rank, &k, &call->d);
  const p2pk_path *p = p2pk_paths[call->d.path];
  if (!p->launch)
    return p2pk_fail(P2PKIT_ERR_INTERNAL, "%s: rank %d: path %s takes no single call", name,
                     c->rank, p->name);
  int prev = -1;
  P2PK_CHECK(p2pk_coll_enter(c, name, &prev));
  const p2pkit_status_t st = p->launch(call);
  p2pk_coll_leave(c, name, prev, cudaSuccess);
  return st;
}
