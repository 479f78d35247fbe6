/* SPDX-License-Identifier: BSD-3-Clause */
#include "ddp/plan.h"

#include <stdlib.h>
#include <string.h>

#include "core/check.h"

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

void p2pk_ddp_plan_init(p2pk_ddp_plan *p, size_t bucket_bytes, size_t first_bucket_bytes) {
  memset(p, 0, sizeof *p);
  p->bucket_bytes = bucket_bytes;
  p->first_bucket_bytes = first_bucket_bytes;
}

void p2pk_ddp_plan_free(p2pk_ddp_plan *p) {
  free(p->grads);
  free(p->buckets);
  free(p->members);
  free(p->by_addr);
  memset(p, 0, sizeof *p);
}

p2pkit_status_t p2pk_ddp_plan_add(p2pk_ddp_plan *p, const void *user, size_t count,
                                  p2pkit_dtype_t dtype) {
  if (p->laid_out)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: register after build (gradient %zu); "
                     "register every gradient first", p->ngrads);
  size_t es = p2pkit_dtype_size(dtype);
  if (!es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu: data type %d is not a "
                     "p2pkit_dtype_t", p->ngrads, (int)dtype);
  if (count == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu has 0 elements",
                     p->ngrads);
  if (count > (UINT64_C(1) << 40) / es)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu: %zu elements is too "
                     "many", p->ngrads, count);
  size_t bytes = count * es;
  if (user) {
    if ((uintptr_t)user % es)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu at %p is not aligned "
                       "to its %zu-byte %s elements", p->ngrads, user, es, p2pkit_dtype_name(dtype));
    uintptr_t a = (uintptr_t)user;
    for (size_t i = 0; i < p->ngrads; i++) {
      const p2pk_ddp_grad *g = &p->grads[i];
      if (!g->user) continue;
      uintptr_t b = (uintptr_t)g->user;
      if (a == b)
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: buffer %p is registered twice "
                         "(gradients %zu and %zu)", user, i, p->ngrads);
      if (a < b + g->bytes && b < a + bytes)
        return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu (%p, %zu bytes) "
                         "overlaps gradient %zu (%p, %zu bytes)", p->ngrads, user, bytes, i,
                         g->user, g->bytes);
    }
  }
  if (p->ngrads == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    p2pk_ddp_grad *g = realloc(p->grads, cap * sizeof *g);
    if (!g) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "grad_sync: out of memory");
    p->grads = g;
    p->cap = cap;
  }
  p2pk_ddp_grad *g = &p->grads[p->ngrads++];
  memset(g, 0, sizeof *g);
  g->user = user;
  g->addr = (uintptr_t)user;
  g->count = count;
  g->bytes = bytes;
  g->dtype = dtype;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_ddp_plan_layout(p2pk_ddp_plan *p) {
  if (p->laid_out)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: build called twice");
  if (p->ngrads == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: build with no registered gradient");
  if (p->bucket_bytes == 0 || p->first_bucket_bytes == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: bucket sizes must be positive "
                     "(bucket %zu, first bucket %zu bytes)", p->bucket_bytes, p->first_bucket_bytes);
  p->buckets = calloc(p->ngrads, sizeof *p->buckets); /* at most one per gradient */
  p->members = calloc(p->ngrads, sizeof *p->members);
  if (!p->buckets || !p->members) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "grad_sync: out of memory");
  size_t nb = 0, arena = 0;
  p2pk_ddp_bucket *cur = NULL;
  for (size_t k = 0; k < p->ngrads; k++) {
    size_t i = p->ngrads - 1 - k;
    p2pk_ddp_grad *g = &p->grads[i];
    size_t cap = cur && cur != p->buckets ? p->bucket_bytes : p->first_bucket_bytes;
    size_t off = cur ? round_up(cur->bytes, P2PK_DDP_GRAD_ALIGN) : 0;
    if (!cur || cur->dtype != g->dtype || off + g->bytes > cap) {
      if (cur) arena = round_up(cur->offset + cur->bytes, P2PK_DDP_BUCKET_ALIGN);
      cur = &p->buckets[nb++];
      cur->first = k;
      cur->dtype = g->dtype;
      cur->offset = arena;
      off = 0;
    }
    g->bucket = (size_t)(cur - p->buckets);
    g->offset = off;
    p->members[k] = i;
    cur->n++;
    cur->bytes = off + g->bytes;
  }
  for (size_t b = 0; b < nb; b++) {
    p2pk_ddp_bucket *bk = &p->buckets[b];
    bk->count = bk->bytes / p2pkit_dtype_size(bk->dtype);
    bk->pending = bk->n;
  }
  p->arena_bytes = round_up(cur->offset + cur->bytes, P2PK_DDP_BUCKET_ALIGN);
  p->nbuckets = nb;
  p->laid_out = 1;
  return P2PKIT_SUCCESS;
}

static int by_addr_cmp(const void *x, const void *y, void *arg) {
  const p2pk_ddp_grad *g = arg;
  uintptr_t a = g[*(const size_t *)x].addr, b = g[*(const size_t *)y].addr;
  return a < b ? -1 : a > b;
}

p2pkit_status_t p2pk_ddp_plan_bind(p2pk_ddp_plan *p, uintptr_t arena) {
  if (!p->laid_out) return p2pk_fail(P2PKIT_ERR_INTERNAL, "grad_sync: bind before layout");
  for (size_t i = 0; i < p->ngrads; i++) {
    p2pk_ddp_grad *g = &p->grads[i];
    if (!g->user) g->addr = arena + p->buckets[g->bucket].offset + g->offset;
  }
  free(p->by_addr);
  p->by_addr = malloc(p->ngrads * sizeof *p->by_addr);
  if (!p->by_addr) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "grad_sync: out of memory");
  for (size_t i = 0; i < p->ngrads; i++) p->by_addr[i] = i;
  qsort_r(p->by_addr, p->ngrads, sizeof *p->by_addr, by_addr_cmp, p->grads);
  for (size_t k = 1; k < p->ngrads; k++) {
    const p2pk_ddp_grad *a = &p->grads[p->by_addr[k - 1]], *b = &p->grads[p->by_addr[k]];
    if (a->addr + a->bytes > b->addr)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradients %zu and %zu overlap at "
                       "%p (a registered buffer inside p2pkit's buckets?)", p->by_addr[k - 1],
                       p->by_addr[k], (void *)b->addr);
  }
  p->bound = 1;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_ddp_plan_find(const p2pk_ddp_plan *p, const void *addr, size_t *index_p) {
  if (!p->bound)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: mark_ready before build");
  uintptr_t a = (uintptr_t)addr;
  size_t lo = 0, hi = p->ngrads;
  while (lo < hi) { /* first gradient with addr > a */
    size_t mid = lo + (hi - lo) / 2;
    if (p->grads[p->by_addr[mid]].addr <= a) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0) {
    size_t i = p->by_addr[lo - 1];
    const p2pk_ddp_grad *g = &p->grads[i];
    if (g->addr == a) {
      *index_p = i;
      return P2PKIT_SUCCESS;
    }
    if (a < g->addr + g->bytes)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: %p is inside gradient %zu (%p), not "
                       "its start; mark gradients by the address they were registered with",
                       addr, i, (void *)g->addr);
  }
  return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: %p is not a registered gradient", addr);
}

p2pkit_status_t p2pk_ddp_plan_mark(p2pk_ddp_plan *p, size_t index, size_t *from_p, size_t *to_p) {
  if (!p->bound)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: mark_ready before build");
  if (index >= p->ngrads)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu of %zu", index, p->ngrads);
  p2pk_ddp_grad *g = &p->grads[index];
  if (g->ready)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: gradient %zu (%p) marked ready twice "
                     "in step %llu", index, (void *)g->addr, (unsigned long long)p->step);
  g->ready = 1;
  p->nready++;
  p->buckets[g->bucket].pending--;
  size_t from = p->next_launch, to = from;
  while (to < p->nbuckets && p->buckets[to].pending == 0) {
    p->buckets[to].launched = 1;
    to++;
  }
  p->next_launch = to;
  *from_p = from;
  *to_p = to;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_ddp_plan_finish(p2pk_ddp_plan *p) {
  if (!p->bound) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: wait before build");
  size_t missing = p->ngrads - p->nready, first = p->ngrads;
  for (size_t i = 0; i < p->ngrads && first == p->ngrads; i++)
    if (!p->grads[i].ready) first = i;
  for (size_t i = 0; i < p->ngrads; i++) p->grads[i].ready = 0;
  for (size_t b = 0; b < p->nbuckets; b++) {
    p->buckets[b].pending = p->buckets[b].n;
    p->buckets[b].launched = 0;
  }
  p->next_launch = 0;
  p->nready = 0;
  uint64_t step = p->step++;
  if (missing)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "grad_sync: step %llu ended with %zu gradient(s) "
                     "never marked ready, the first gradient %zu (%p, %zu elements, bucket %zu); "
                     "their buckets were not reduced", (unsigned long long)step, missing, first,
                     (void *)p->grads[first].addr, p->grads[first].count, p->grads[first].bucket);
  return P2PKIT_SUCCESS;
}
