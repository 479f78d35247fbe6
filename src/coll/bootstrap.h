/* TCP rendezvous for one process per GPU. Rank 0 listens on addr:port; the
 * others connect (retrying until the timeout), present the job secret and
 * their rank; rank 0 admits each once, refuses strangers, and answers every
 * admitted rank once all have arrived. After that the star of sockets carries
 * small all-gathers and barriers. Every socket operation is bounded by the
 * timeout (poll()); nothing here touches CUDA. */
#ifndef P2PK_BOOTSTRAP_H
#define P2PK_BOOTSTRAP_H

#include <stddef.h>

#include "p2pkit.h"

#define P2PK_BOOT_SECRET_MAX 256

typedef struct p2pk_boot p2pk_boot;

typedef struct {
  int rank, nranks;
  const char *addr;   /* rank 0 binds to it, the others connect to it */
  int port;           /* 1..65535 */
  const char *secret; /* NULL or "" for none; at most P2PK_BOOT_SECRET_MAX bytes */
  int timeout_ms;     /* for the rendezvous and for each later operation */
  int listen_fd;      /* rank 0: > 0 a listening socket to accept on instead of binding
                       * addr:port (p2pkit_get_unique_id's; the caller closes it); 0 none */
} p2pk_boot_opts;

/* Collective over all ranks. P2PKIT_ERR_TIMEOUT when a rank never arrives,
 * P2PKIT_ERR_REMOTE when rank 0 refuses this rank (wrong secret) or aborts the
 * job, P2PKIT_ERR_INVALID_ARGUMENT when ranks disagree on the rank count or a
 * rank appears twice, P2PKIT_ERR_SYSTEM when rank 0 cannot listen. */
p2pkit_status_t p2pk_boot_init(const p2pk_boot_opts *opts, p2pk_boot **boot_p);
/* Every rank gives `bytes` bytes; all[r * bytes ...] receives rank r's.
 * `tag` names the operation: ranks calling different operations (or sizes)
 * get P2PKIT_ERR_INVALID_ARGUMENT instead of garbage. */
p2pkit_status_t p2pk_boot_allgather(p2pk_boot *b, unsigned tag, const void *mine, void *all,
                                    size_t bytes);
p2pkit_status_t p2pk_boot_barrier(p2pk_boot *b, unsigned tag);
int p2pk_boot_rank(const p2pk_boot *b);
int p2pk_boot_nranks(const p2pk_boot *b);
void p2pk_boot_destroy(p2pk_boot *b);

/* Constant-time comparison of two secrets (lengths included). 1 when equal. */
int p2pk_secret_equal(const char *a, size_t alen, const char *b, size_t blen);
/* The uid owning the other end of the accepted TCP socket `fd` when that end
 * is a socket of this machine and network namespace (/proc/net/tcp or tcp6:
 * its local address is `fd`'s peer, its remote address `fd`'s own); -1 when
 * it cannot be told (another host or namespace, no /proc). */
long p2pk_sock_peer_uid(int fd);

#endif
