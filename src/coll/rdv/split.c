/* SPDX-License-Identifier: BSD-3-Clause */
#include "coll/rdv/init_id.h"

#include <stdlib.h>

#include "core/check.h"

/* Order within one color: key, then old rank. */
static int before(const p2pk_split_in *in, int a, int b) {
  return in[a].key < in[b].key || (in[a].key == in[b].key && a < b);
}

static p2pkit_status_t check_colors(const p2pk_split_in *in, int nranks) {
  if (nranks < 1 || !in)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_split: %d ranks", nranks);
  for (int r = 0; r < nranks; r++)
    if (in[r].color < 0 && in[r].color != P2PKIT_SPLIT_NOCOLOR)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_split: rank %d gave color %d; a "
                       "color is 0 or more, or P2PKIT_SPLIT_NOCOLOR (%d)", r, in[r].color,
                       P2PKIT_SPLIT_NOCOLOR);
  return P2PKIT_SUCCESS;
}

int p2pk_split_members(const p2pk_split_in *in, int nranks, int old_rank, int *members) {
  if (old_rank < 0 || old_rank >= nranks || in[old_rank].color == P2PKIT_SPLIT_NOCOLOR) return 0;
  int n = 0;
  for (int r = 0; r < nranks; r++) {
    if (in[r].color != in[old_rank].color) continue;
    int at = n++; /* insertion keeps (key, old rank) order */
    while (at > 0 && before(in, r, members[at - 1])) {
      members[at] = members[at - 1];
      at--;
    }
    members[at] = r;
  }
  return n;
}

/* One rank's entry, sorted by color, key, old rank (no shared state: ranks
 * driven by threads of one process may split at once). */
typedef struct {
  int color, key, rank;
} entry;

static int by_color_key(const void *pa, const void *pb) {
  const entry *a = pa, *b = pb;
  if (a->color != b->color) return a->color < b->color ? -1 : 1;
  if (a->key != b->key) return a->key < b->key ? -1 : 1;
  return a->rank < b->rank ? -1 : a->rank > b->rank;
}

p2pkit_status_t p2pk_split_compute(const p2pk_split_in *in, int nranks, p2pk_split_out *out) {
  P2PK_CHECK(check_colors(in, nranks));
  entry *e = malloc((size_t)nranks * sizeof *e);
  if (!e) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "p2pkit_comm_split: no memory");
  for (int r = 0; r < nranks; r++) e[r] = (entry){in[r].color, in[r].key, r};
  qsort(e, (size_t)nranks, sizeof *e, by_color_key);
  for (int i = 0; i < nranks;) {
    int j = i;
    while (j < nranks && e[j].color == e[i].color) j++;
    int nocolor = e[i].color == P2PKIT_SPLIT_NOCOLOR;
    for (int k = i; k < j; k++) {
      out[e[k].rank].rank = nocolor ? -1 : k - i;
      out[e[k].rank].size = nocolor ? 0 : j - i;
    }
    i = j;
  }
  free(e);
  return P2PKIT_SUCCESS;
}

int p2pk_split_host_count(const p2pk_hosts *h, const int *members, int n) {
  int count = 0;
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = h->host_of[members[j]] == h->host_of[members[i]];
    count += !seen;
  }
  return count;
}
