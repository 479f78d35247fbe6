/* SPDX-License-Identifier: BSD-3-Clause */
/* Which job secrets the rendezvous accepts where (see bootstrap.h and
 * docs/rendezvous.md): none needs a loopback address; off loopback a secret
 * must be able to hold P2PK_BOOT_SECRET_MIN_BITS, counted by its length and
 * alphabet, so that neither an online guess per connection nor anything a
 * process holding rank 0's port learns can find it. */
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "coll/rdv/bootstrap.h"
#include "core/check.h"

int p2pk_boot_secret_bits(const char *secret) {
  if (!secret) return 0;
  const size_t len = strlen(secret);
  size_t n = len < 4096 ? len : 4096; /* more than any floor; keeps the count an int */
  if (strspn(secret, "0123456789abcdefABCDEF") == len) return (int)(n * 4);
  while (n > 0 && secret[n - 1] == '=') n--; /* base64's padding holds nothing */
  return (int)(n * 6);
}

static int sa_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24 == 127;
  if (sa->sa_family != AF_INET6) return 0;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
}

p2pkit_status_t p2pk_boot_addr_loopback(const char *addr, int *loop) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  int g = getaddrinfo(addr, NULL, &hints, &res);
  if (g != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: cannot resolve address '%s': %s",
                     addr, gai_strerror(g));
  *loop = res != NULL;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) *loop &= sa_loopback(ai->ai_addr);
  freeaddrinfo(res);
  return P2PKIT_SUCCESS;
}

#define HOW_TO_MAKE \
  "give every rank the same secret of 32 hex digits in P2PKIT_JOB_SECRET (or "  \
  "p2pkit_comm_opts_t.secret), made by `openssl rand -hex 16` or `p2pkit env --new-secret`, or " \
  "use p2pkit_get_unique_id"

p2pkit_status_t p2pk_boot_judge_secret(const char *addr, const char *secret) {
  if (!addr) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: no address");
  int loop = 0;
  P2PK_CHECK(p2pk_boot_addr_loopback(addr, &loop));
  if (loop) return P2PKIT_SUCCESS;
  if (!secret || !secret[0])
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "bootstrap: rank 0's address %s is not a loopback address and there is no job "
                     "secret, so any host that reaches it could join: " HOW_TO_MAKE, addr);
  const int bits = p2pk_boot_secret_bits(secret);
  if (bits < P2PK_BOOT_SECRET_MIN_BITS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "bootstrap: rank 0's address %s is not a loopback address and the job secret "
                     "(%zu characters) counts %d bits, fewer than %d, so it could be guessed: " HOW_TO_MAKE, addr, strlen(secret), bits,
                     P2PK_BOOT_SECRET_MIN_BITS);
  return P2PKIT_SUCCESS;
}
