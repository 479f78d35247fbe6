/* SPDX-License-Identifier: BSD-3-Clause */
/* Communicator creation from a unique id (see init_id.h and p2pkit.h).
 *
 * The id, 128 bytes:
 *   0   "P2KU"            magic
 *   4   version           P2PK_UID_VERSION
 *   5   family            4 or 6
 *   6   port              big-endian
 *   8   address           16 bytes (IPv4: the first 4)
 *   24  secret            32 random bytes (getrandom); its hex is the
 *                         rendezvous's job secret
 *   56  pid               big-endian, the process that made it
 *   60  zeros             room for later versions
 *   124 checksum          FNV-1a of bytes 0..123, big-endian
 *
 * p2pkit_get_unique_id binds and listens at once, on an ephemeral port, and
 * keeps the socket in a small table keyed by the secret; rank 0's init in
 * the same process takes it over, so no other process can take the port in
 * between and peers that arrive early wait in the backlog (NCCL keeps its
 * root socket open the same way). */
#include "coll/rdv/init_id.h"

#include <arpa/inet.h>
#include <cuda_runtime_api.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "coll/coll.h"
#include "core/check.h"

#define UID_MAGIC "P2KU"
#define UID_SUM_AT (P2PKIT_UNIQUE_ID_BYTES - 4)

_Static_assert(sizeof(p2pkit_unique_id_t) == P2PKIT_UNIQUE_ID_BYTES, "the id is 128 bytes");

/* --- the wire form ---------------------------------------------------------- */

static uint32_t fnv1a(const unsigned char *p, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 16777619u;
  return h;
}

static void put_be(unsigned char *p, uint32_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; i--, v >>= 8) p[i] = (unsigned char)(v & 0xff);
}

static uint32_t get_be(const unsigned char *p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; i++) v = (v << 8) | p[i];
  return v;
}

static void to_hex(const unsigned char *in, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[in[i] >> 4];
    out[2 * i + 1] = digits[in[i] & 15];
  }
  out[2 * n] = '\0';
}

p2pkit_status_t p2pk_uid_encode(const p2pk_uid *u, p2pkit_unique_id_t *id) {
  if (!u || !id) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: NULL argument");
  if (u->port < 1 || u->port > 65535)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: port %d out of range", u->port);
  unsigned char *b = (unsigned char *)id->internal;
  memset(b, 0, P2PKIT_UNIQUE_ID_BYTES);
  memcpy(b, UID_MAGIC, 4);
  b[4] = P2PK_UID_VERSION;
  b[5] = u->family == AF_INET6 ? 6 : 4;
  put_be(b + 6, (uint32_t)u->port, 2);
  if (inet_pton(u->family == AF_INET6 ? AF_INET6 : AF_INET, u->addr, b + 8) != 1)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: '%s' is not a numeric IPv%c address",
                     u->addr, u->family == AF_INET6 ? '6' : '4');
  memcpy(b + 24, u->secret, P2PK_UID_SECRET_BYTES);
  put_be(b + 56, u->pid, 4);
  put_be(b + UID_SUM_AT, fnv1a(b, UID_SUM_AT), 4);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_uid_decode(const p2pkit_unique_id_t *id, p2pk_uid *u) {
  if (!id || !u) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: NULL argument");
  const unsigned char *b = (const unsigned char *)id->internal;
  memset(u, 0, sizeof *u);
  if (memcmp(b, UID_MAGIC, 4) != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "not a p2pkit unique id (it does not start with "
                     "'%s'): pass the %d bytes p2pkit_get_unique_id made, whole", UID_MAGIC,
                     P2PKIT_UNIQUE_ID_BYTES);
  if (b[4] != P2PK_UID_VERSION)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id of version %d; this p2pkit reads "
                     "version %d (ranks run different p2pkit versions?)", b[4], P2PK_UID_VERSION);
  if (get_be(b + UID_SUM_AT, 4) != fnv1a(b, UID_SUM_AT))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "the unique id is damaged (its checksum does not "
                     "match): pass the %d bytes p2pkit_get_unique_id made, unchanged",
                     P2PKIT_UNIQUE_ID_BYTES);
  if (b[5] != 4 && b[5] != 6)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: address family %d", b[5]);
  u->version = b[4];
  u->family = b[5] == 6 ? AF_INET6 : AF_INET;
  u->port = (int)get_be(b + 6, 2);
  if (u->port < 1)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: port 0");
  if (!inet_ntop(u->family, b + 8, u->addr, sizeof u->addr))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "unique id: unreadable address");
  memcpy(u->secret, b + 24, P2PK_UID_SECRET_BYTES);
  to_hex(u->secret, P2PK_UID_SECRET_BYTES, u->secret_hex);
  u->pid = get_be(b + 56, 4);
  return P2PKIT_SUCCESS;
}

/* --- this process's listening sockets ---------------------------------------- */

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  int fd; /* 0: free slot (the sockets are never fds 0..2) */
  unsigned char secret[P2PK_UID_SECRET_BYTES];
} table[P2PK_UID_MAX_OPEN];

int p2pk_uid_take_listen_fd(const p2pk_uid *u) {
  int fd = -1;
  pthread_mutex_lock(&table_lock);
  for (int i = 0; i < P2PK_UID_MAX_OPEN && fd < 0; i++)
    if (table[i].fd > 0 && memcmp(table[i].secret, u->secret, P2PK_UID_SECRET_BYTES) == 0) {
      fd = table[i].fd;
      table[i].fd = 0;
    }
  pthread_mutex_unlock(&table_lock);
  return fd;
}

int p2pk_uid_open_count(void) {
  int n = 0;
  pthread_mutex_lock(&table_lock);
  for (int i = 0; i < P2PK_UID_MAX_OPEN; i++) n += table[i].fd > 0;
  pthread_mutex_unlock(&table_lock);
  return n;
}

/* A listening socket on `host` (numeric or a name), any free port: its fd
 * (never 0..2, so a zeroed p2pk_boot_opts means "none") and the address and
 * port bound; -1 and errno's sentence in `why` when it cannot. */
static int listen_any_port(const char *host, p2pk_uid *u, char *why, size_t wlen) {
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int g = getaddrinfo(host, "0", &hints, &res);
  if (g != 0) {
    snprintf(why, wlen, "%s", gai_strerror(g));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
    if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    if (fd < 3) { /* keep 0..2 free of it: see above */
      int hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
      close(fd);
      fd = hi;
      if (fd < 0) continue;
    }
    struct sockaddr_storage sa;
    memset(&sa, 0, sizeof sa);
    socklen_t sl = sizeof sa;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
      snprintf(why, wlen, "%s", strerror(errno));
      close(fd);
      fd = -1;
      continue;
    }
    u->family = sa.ss_family;
    const void *a = sa.ss_family == AF_INET6 ? (const void *)&((struct sockaddr_in6 *)&sa)->sin6_addr
                                             : (const void *)&((struct sockaddr_in *)&sa)->sin_addr;
    u->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                              : ((struct sockaddr_in *)&sa)->sin_port);
    inet_ntop(sa.ss_family, a, u->addr, sizeof u->addr);
  }
  freeaddrinfo(res);
  return fd;
}

/* n bytes from the kernel's generator (getrandom: no libcrypto needed). */
static p2pkit_status_t fill_random(unsigned char *buf, size_t len, const char *who) {
  for (size_t got = 0; got < len;) {
    ssize_t n = getrandom(buf + got, len - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "%s: getrandom: %s", who, strerror(errno));
    got += (size_t)n;
  }
  return P2PKIT_SUCCESS;
}

/* A fresh secret and this process's pid into u. */
static p2pkit_status_t uid_secret(p2pk_uid *u, const char *who) {
  memset(u, 0, sizeof *u);
  P2PK_CHECK(fill_random(u->secret, sizeof u->secret, who));
  u->pid = (uint32_t)getpid();
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_secret_new(char hex[P2PK_SECRET_HEX + 1]) {
  unsigned char r[P2PK_SECRET_HEX / 2];
  P2PK_CHECK(fill_random(r, sizeof r, "new secret"));
  to_hex(r, sizeof r, hex);
  memset(r, 0, sizeof r);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_uid_make(const char *host, p2pkit_unique_id_t *id, int *listen_fd) {
  p2pk_uid u;
  P2PK_CHECK(uid_secret(&u, "unique id"));
  char why[128] = "";
  const int fd = listen_any_port(host, &u, why, sizeof why);
  if (fd < 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "unique id: cannot listen on %s: %s", host, why);
  const p2pkit_status_t st = p2pk_uid_encode(&u, id);
  if (st != P2PKIT_SUCCESS) {
    close(fd);
    return st;
  }
  *listen_fd = fd;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pkit_get_unique_id(p2pkit_unique_id_t *id) {
  if (!id) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "get_unique_id: id is NULL");
  if (p2pk_uid_open_count() >= P2PK_UID_MAX_OPEN)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "get_unique_id: %d ids of this process await "
                     "their rank 0 init (each holds a listening socket): init with them first",
                     P2PK_UID_MAX_OPEN);
  p2pk_uid u;
  P2PK_CHECK(uid_secret(&u, "get_unique_id"));
  /* Where rank 0 listens: MASTER_ADDR (the launcher's host for rank 0), this
   * host's name, or loopback, the first one this process can bind. */
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  const char *master = getenv("MASTER_ADDR");
  const char *cands[3] = {master && *master ? master : NULL, host[0] ? host : NULL, "127.0.0.1"};
  const char *label[3] = {"MASTER_ADDR", "this host's name", "loopback"};
  char why[3][128] = {"", "", ""};
  int fd = -1, used = -1;
  for (int i = 0; i < 3 && fd < 0; i++) {
    if (!cands[i]) continue;
    fd = listen_any_port(cands[i], &u, why[i], sizeof why[i]);
    used = i;
  }
  if (fd < 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "get_unique_id: cannot listen on MASTER_ADDR '%s' (%s), "
                     "host '%s' (%s) or 127.0.0.1 (%s)", cands[0] ? cands[0] : "", why[0], host,
                     why[1], why[2]);
  if (used > 0 && cands[0])
    P2PK_WARN("get_unique_id: MASTER_ADDR '%s' is not an address of this host (%s); rank 0 "
              "listens on %s (%s) instead", cands[0], why[0], u.addr, label[used]);
  p2pkit_status_t st = p2pk_uid_encode(&u, id);
  if (st != P2PKIT_SUCCESS) {
    close(fd);
    return st;
  }
  int stored = 0;
  pthread_mutex_lock(&table_lock);
  for (int i = 0; i < P2PK_UID_MAX_OPEN && !stored; i++)
    if (table[i].fd <= 0) {
      table[i].fd = fd;
      memcpy(table[i].secret, u.secret, sizeof u.secret);
      stored = 1;
    }
  pthread_mutex_unlock(&table_lock);
  if (!stored) {
    close(fd);
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "get_unique_id: %d ids of this process await "
                     "their rank 0 init: init with them first", P2PK_UID_MAX_OPEN);
  }
  P2PK_INFO(P2PK_LOG_BOOT, "get_unique_id: rank 0 will listen on %s port %d (%s)", u.addr, u.port,
            label[used]);
  return P2PKIT_SUCCESS;
}

/* --- config and init ---------------------------------------------------------- */

p2pkit_status_t p2pk_config_check(const p2pkit_config_t *in, p2pkit_config_t *out) {
  const p2pkit_config_t defaults = P2PKIT_CONFIG_INIT;
  *out = defaults;
  if (!in) return P2PKIT_SUCCESS;
  if (in->version == 0 || in->size == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config: size %zu, version %u: start from "
                     "P2PKIT_CONFIG_INIT", in->size, in->version);
  if (in->version > P2PKIT_CONFIG_VERSION)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config version %u is newer than this library's "
                     "(%d): the caller was built against a newer p2pkit.h", in->version,
                     P2PKIT_CONFIG_VERSION);
  if (in->size != sizeof(p2pkit_config_t))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config.size is %zu, but a version %u "
                     "p2pkit_config_t has %zu bytes: start from P2PKIT_CONFIG_INIT", in->size,
                     in->version, sizeof(p2pkit_config_t));
  for (size_t i = 0; i < sizeof in->reserved / sizeof in->reserved[0]; i++)
    if (in->reserved[i] != 0)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config.reserved[%zu] is %d, not 0: start from "
                       "P2PKIT_CONFIG_INIT", i, in->reserved[i]);
  if (in->device < -1)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config.device %d: expected -1 (the current "
                     "device) or a device number", in->device);
  if (in->timeout_s < -1 || in->timeout_s == 0 || in->timeout_s > 86400)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config.timeout_s %d: expected -1 (P2PKIT_TIMEOUT) "
                     "or 1..86400", in->timeout_s);
  if (in->max_blocks < -1 || in->max_blocks > P2PK_COLL_MAX_BLOCKS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "config.max_blocks %d: expected -1 "
                     "(P2PKIT_MAX_BLOCKS), 0 (no cap) or up to %d", in->max_blocks,
                     P2PK_COLL_MAX_BLOCKS);
  *out = *in;
  return P2PKIT_SUCCESS;
}

void p2pkit_comm_opts_init(p2pkit_comm_opts_t *o) {
  const p2pkit_comm_opts_t defaults = P2PKIT_COMM_OPTS_INIT;
  if (o) *o = defaults;
}

/* The caller's options as this library knows them: filled by
 * P2PKIT_COMM_OPTS_INIT or p2pkit_comm_opts_init with this header's size
 * and version (the only ones version 1 has). */
p2pkit_status_t p2pk_comm_opts_check(const p2pkit_comm_opts_t *o) {
  if (o->size == 0 || o->version == 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t: size %zu, version %u: fill "
                     "it with p2pkit_comm_opts_init or P2PKIT_COMM_OPTS_INIT", o->size, o->version);
  if (o->version > P2PKIT_COMM_OPTS_VERSION)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t version %u is newer than this "
                     "library's (%d): the caller was built against a newer p2pkit.h", o->version,
                     P2PKIT_COMM_OPTS_VERSION);
  if (o->size != sizeof *o)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "p2pkit_comm_opts_t.size is %zu, but a version %u "
                     "one has %zu bytes: fill it with p2pkit_comm_opts_init or "
                     "P2PKIT_COMM_OPTS_INIT", o->size, o->version, sizeof *o);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_uid_comm_opts(const p2pk_uid *u, int nranks, int rank,
                                   const p2pkit_config_t *cfg, p2pkit_comm_opts_t *o) {
  if (nranks < 1 || nranks > P2PK_COLL_MAX_RANKS || rank < 0 || rank >= nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "init_rank_config: rank %d of %d: expected "
                     "0 <= rank < nranks <= %d", rank, nranks, P2PK_COLL_MAX_RANKS);
  p2pkit_comm_opts_init(o);
  o->nranks = nranks;
  o->rank = rank;
  o->device = cfg->device;
  o->addr = u->addr;
  o->port = u->port;
  o->secret = u->secret_hex;
  o->timeout_s = cfg->timeout_s;
  return P2PKIT_SUCCESS;
}
