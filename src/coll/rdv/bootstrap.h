/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP rendezvous for one process per GPU. Rank 0 listens on addr:port; the
 * others connect (retrying until the timeout). With a job secret the two
 * ends of each connection prove to each other that they know it, without
 * sending it (HMAC-SHA256 challenges, OpenSSL's libcrypto loaded at run
 * time; the joining rank proves first, so rank 0 gives nothing derived from
 * the secret to a process that does not know it), and every later message
 * carries a MAC under a key of that link; off loopback the secret must hold
 * P2PK_BOOT_SECRET_MIN_BITS; without one (loopback only) both ends must
 * belong to the same user. Rank 0
 * admits each rank once, refuses strangers without letting them hold up the
 * job, and answers every admitted rank once all have arrived. After that the
 * star of sockets carries small all-gathers and barriers. Every socket
 * operation is bounded by the timeout (poll()); nothing here touches CUDA.
 * docs/rendezvous.md describes the protocol and what it protects against. */
#ifndef P2PK_BOOTSTRAP_H
#define P2PK_BOOTSTRAP_H

#include <stddef.h>

#include "p2pkit.h"

#define P2PK_BOOT_SECRET_MAX 256
/* Off loopback a job secret must count at least this many bits
 * (p2pk_boot_secret_bits). */
#define P2PK_BOOT_SECRET_MIN_BITS 128
/* A connection to rank 0 that has not proved itself within this long is dropped. */
#define P2PK_BOOT_HANDSHAKE_MS 3000

typedef struct p2pk_boot p2pk_boot;

typedef struct {
  int rank, nranks;
  const char *addr;   /* rank 0 binds to it, the others connect to it */
  int port;           /* 1..65535 */
  const char *secret; /* NULL or "" for none (loopback addresses only); at most
                         P2PK_BOOT_SECRET_MAX bytes; off loopback at least
                         P2PK_BOOT_SECRET_MIN_BITS (p2pk_boot_judge_secret) */
  int timeout_ms;     /* for the rendezvous and for each later operation */
  int listen_fd;      /* rank 0: > 0 a listening socket to accept on instead of binding
                       * addr:port (p2pkit_get_unique_id's; the caller closes it); 0 none */
} p2pk_boot_opts;

/* The bits a job secret counts: 4 for each character when every one is a
 * hex digit, else 6 for each character not counting '=' padding at its end
 * (base64's alphabet: 6 bits a character; any other text is counted as
 * generously). So P2PK_BOOT_SECRET_MIN_BITS takes 32 hex digits or 22 other
 * characters. The count is what the text could hold, never more: a long
 * word passes it and is still a guessable secret. NULL counts 0. */
int p2pk_boot_secret_bits(const char *secret);
/* Whether ranks may meet at `addr` with `secret` (NULL or "": none): any
 * secret, or none, on an address whose every resolution is loopback; else
 * a secret of P2PK_BOOT_SECRET_MIN_BITS. INVALID_ARGUMENT otherwise, in one
 * line naming P2PKIT_JOB_SECRET and how to make a secret, or when `addr`
 * does not resolve. */
p2pkit_status_t p2pk_boot_judge_secret(const char *addr, const char *secret);
/* *loop = 1 when every address `addr` resolves to is a loopback one. */
p2pkit_status_t p2pk_boot_addr_loopback(const char *addr, int *loop);

/* Collective over all ranks. P2PKIT_ERR_TIMEOUT when a rank never arrives,
 * P2PKIT_ERR_REMOTE when rank 0 refuses this rank, rank 0 cannot prove the
 * secret (or is another user's process), or it aborts the job,
 * P2PKIT_ERR_INVALID_ARGUMENT when ranks disagree on the rank count, a rank
 * appears twice, or the address is not loopback and the secret is missing
 * or short of P2PK_BOOT_SECRET_MIN_BITS,
 * P2PKIT_ERR_UNSUPPORTED when a secret is given but libcrypto cannot be
 * loaded, P2PKIT_ERR_SYSTEM when rank 0 cannot listen. */
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

/* The uid owning the other end of the TCP socket `fd` when that end is a
 * socket of this machine and network namespace (asked of the kernel through
 * NETLINK_SOCK_DIAG, else read from /proc/net/tcp{,6}; an IPv4-mapped IPv6
 * address is looked up as the IPv4 one it maps, and the reverse); -1 when
 * it cannot be told (another host or namespace). */
long p2pk_sock_peer_uid(int fd);

#endif
