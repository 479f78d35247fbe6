/* TCP rendezvous: see bootstrap.h. Wire format: a 12-byte header (type, tag,
 * payload length; network byte order) and the payload. Rank 0 is the hub of a
 * star; all-gathers go through it. */
#include "coll/bootstrap.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/check.h"
#include "core/clock.h"

enum { MSG_HELLO = 1, MSG_WELCOME = 2, MSG_REJECT = 3, MSG_ABORT = 4, MSG_DATA = 5 };
enum { REJ_VERSION = 1, REJ_SECRET = 2, REJ_NRANKS = 3, REJ_RANK = 4, REJ_DUP = 5, REJ_USER = 6 };

#define BOOT_MAGIC "P2PKBOOT"
#define BOOT_VERSION 1u
#define HDR_BYTES 12
#define HELLO_BYTES (8 + 4 * 4 + P2PK_BOOT_SECRET_MAX + 4)
#define MAX_PAYLOAD (64u << 20)
#define MAX_PENDING 64
#define CLIENT_GRACE_MS 2000 /* clients wait this much past the timeout for rank 0's verdict */

struct p2pk_boot {
  int rank, nranks;
  int timeout_ms;
  int *fds; /* rank 0: fds[r] for r >= 1; others: fds[0] is the link to rank 0 */
  char where[160];
};

/* --- time and raw socket I/O ---------------------------------------------- */

static int64_t now_ms(void) { return (int64_t)(p2pk_now_ns() / 1000000u); }

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Wait until fd is ready for `ev` or the deadline passes. */
static p2pkit_status_t wait_fd(int fd, short ev, int64_t deadline, const char *who) {
  for (;;) {
    int64_t left = deadline - now_ms();
    if (left <= 0) return p2pk_fail(P2PKIT_ERR_TIMEOUT, "bootstrap: %s did not answer in time", who);
    struct pollfd p = {fd, ev, 0};
    int r = poll(&p, 1, left > 1000 ? 1000 : (int)left);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: poll: %s", strerror(errno));
    if (r > 0) return P2PKIT_SUCCESS; /* errors and hang-ups surface in the read/write */
  }
}

static p2pkit_status_t send_all(int fd, const void *buf, size_t len, int64_t deadline,
                                const char *who) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      P2PK_CHECK(wait_fd(fd, POLLOUT, deadline, who));
      continue;
    }
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: sending to %s failed: %s (did it exit?)", who,
                     n < 0 ? strerror(errno) : "connection closed");
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t recv_all(int fd, void *buf, size_t len, int64_t deadline, const char *who) {
  char *p = buf;
  while (len > 0) {
    ssize_t n = recv(fd, p, len, 0);
    if (n > 0) {
      p += n;
      len -= (size_t)n;
      continue;
    }
    if (n == 0)
      return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: %s closed the connection (did it exit?)", who);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      P2PK_CHECK(wait_fd(fd, POLLIN, deadline, who));
      continue;
    }
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: receiving from %s failed: %s", who,
                     strerror(errno));
  }
  return P2PKIT_SUCCESS;
}

static void put32(unsigned char *p, uint32_t v) {
  uint32_t n = htonl(v);
  memcpy(p, &n, 4);
}

static uint32_t get32(const unsigned char *p) {
  uint32_t n;
  memcpy(&n, p, 4);
  return ntohl(n);
}

static p2pkit_status_t send_msg(int fd, uint32_t type, uint32_t tag, const void *payload,
                                uint32_t len, int64_t deadline, const char *who) {
  unsigned char h[HDR_BYTES];
  put32(h, type);
  put32(h + 4, tag);
  put32(h + 8, len);
  P2PK_CHECK(send_all(fd, h, sizeof h, deadline, who));
  if (len) P2PK_CHECK(send_all(fd, payload, len, deadline, who));
  return P2PKIT_SUCCESS;
}

/* A verdict: a status code and a sentence, for REJECT and ABORT. */
static void send_verdict(int fd, uint32_t type, uint32_t code, const char *text) {
  size_t n = strlen(text);
  if (n > 255) n = 255;
  unsigned char msg[HDR_BYTES + 4 + 256];
  put32(msg, type);
  put32(msg + 4, 0);
  put32(msg + 8, (uint32_t)(4 + n));
  put32(msg + HDR_BYTES, code);
  memcpy(msg + HDR_BYTES + 4, text, n);
  /* Best effort and silent: the receiver may be gone, and the caller's error
   * detail must survive. A few hundred bytes fit any socket buffer. */
  ssize_t sent = send(fd, msg, HDR_BYTES + 4 + n, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
}

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int p2pk_secret_equal(const char *a, size_t alen, const char *b, size_t blen) {
  /* Compare a fixed number of bytes whatever the lengths, so timing says nothing. */
  unsigned char diff = (unsigned char)(alen != blen);
  for (size_t i = 0; i < P2PK_BOOT_SECRET_MAX; i++) {
    unsigned char x = i < alen ? (unsigned char)a[i] : 0;
    unsigned char y = i < blen ? (unsigned char)b[i] : 0;
    diff |= (unsigned char)(x ^ y);
  }
  return diff == 0;
}

/* --- the HELLO message ------------------------------------------------------ */

typedef struct {
  uint32_t version, nranks, rank, pid;
  size_t secret_len;
  char secret[P2PK_BOOT_SECRET_MAX];
  int magic_ok;
} hello_t;

static void hello_pack(unsigned char out[HELLO_BYTES], int nranks, int rank, const char *secret) {
  memset(out, 0, HELLO_BYTES);
  size_t sl = secret ? strlen(secret) : 0;
  memcpy(out, BOOT_MAGIC, 8);
  put32(out + 8, BOOT_VERSION);
  put32(out + 12, (uint32_t)nranks);
  put32(out + 16, (uint32_t)rank);
  put32(out + 20, (uint32_t)sl);
  if (sl) memcpy(out + 24, secret, sl);
  put32(out + 24 + P2PK_BOOT_SECRET_MAX, (uint32_t)getpid());
}

static void hello_unpack(const unsigned char in[HELLO_BYTES], hello_t *h) {
  h->magic_ok = memcmp(in, BOOT_MAGIC, 8) == 0;
  h->version = get32(in + 8);
  h->nranks = get32(in + 12);
  h->rank = get32(in + 16);
  uint32_t sl = get32(in + 20);
  h->secret_len = sl > P2PK_BOOT_SECRET_MAX ? P2PK_BOOT_SECRET_MAX + 1 : sl;
  memcpy(h->secret, in + 24, P2PK_BOOT_SECRET_MAX);
  h->pid = get32(in + 24 + P2PK_BOOT_SECRET_MAX);
}

/* --- rank 0 ------------------------------------------------------------------- */

typedef struct {
  int fd;
  size_t got;
  unsigned char buf[HDR_BYTES + HELLO_BYTES];
  char from[64];
  long uid; /* the connecting process's user, -1 unknown (p2pk_sock_peer_uid) */
} pending_t;

/* "ADDR:PORT" as /proc/net/tcp{,6} print a socket address: the address's
 * 32-bit words as the kernel holds them (%08X each), the port in host order. */
static int proc_addr(const struct sockaddr_storage *sa, char *out, size_t len, int *v6) {
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    *v6 = 0;
    return snprintf(out, len, "%08X:%04X", (unsigned)s4->sin_addr.s_addr, ntohs(s4->sin_port)) > 0;
  }
  if (sa->ss_family != AF_INET6) return 0;
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
  uint32_t w[4];
  memcpy(w, &s6->sin6_addr, sizeof w);
  *v6 = 1;
  return snprintf(out, len, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2],
                  (unsigned)w[3], ntohs(s6->sin6_port)) > 0;
}

long p2pk_sock_peer_uid(int fd) {
  struct sockaddr_storage peer = {0}, self = {0};
  socklen_t pl = sizeof peer, sl = sizeof self;
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 ||
      getsockname(fd, (struct sockaddr *)&self, &sl) != 0)
    return -1;
  char want_local[48], want_remote[48];
  int v6a = 0, v6b = 0;
  if (!proc_addr(&peer, want_local, sizeof want_local, &v6a) ||
      !proc_addr(&self, want_remote, sizeof want_remote, &v6b) || v6a != v6b)
    return -1;
  FILE *f = fopen(v6a ? "/proc/net/tcp6" : "/proc/net/tcp", "r");
  if (!f) return -1;
  char line[512];
  long uid = -1;
  if (fgets(line, sizeof line, f)) /* the header */
    while (uid < 0 && fgets(line, sizeof line, f)) {
      char local[48], remote[48];
      unsigned st = 0;
      unsigned long u = 0;
      /* sl: local remote st tx:rx tr:when retrnsmt uid ... Established only:
       * a TIME_WAIT line of an earlier connection shows uid 0. */
      if (sscanf(line, " %*d: %47s %47s %x %*s %*s %*s %lu", local, remote, &st, &u) != 4) continue;
      if (st == 0x01 && strcasecmp(local, want_local) == 0 && strcasecmp(remote, want_remote) == 0)
        uid = (long)u;
    }
  fclose(f);
  return uid;
}

static p2pkit_status_t listen_on(const p2pk_boot_opts *o, int *fd_p) {
  char port[16];
  snprintf(port, sizeof port, "%d", o->port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  int g = getaddrinfo(o->addr, port, &hints, &res);
  if (g != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: cannot resolve address '%s': %s",
                     o->addr, gai_strerror(g));
  int err = 0, fd = -1;
  for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) break;
    err = errno;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: rank 0 cannot listen on %s:%d: %s", o->addr,
                     o->port, strerror(err));
  set_nonblock(fd);
  *fd_p = fd;
  return P2PKIT_SUCCESS;
}

static void describe_addr(const struct sockaddr_storage *sa, char *out, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
  } else if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)sa;
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    port = ntohs(s->sin6_port);
  }
  snprintf(out, len, "%s:%d", host, port);
}

/* Judge one complete HELLO. Returns 0 to admit, 1 to refuse this connection
 * and keep waiting (a stranger), -1 to fail the whole job (a misconfigured
 * rank of this job); `why` says it. */
static int judge_hello(const p2pk_boot *b, const p2pk_boot_opts *o, const hello_t *h,
                       int *const admitted, char *why, size_t wlen, uint32_t *rej) {
  if (!h->magic_ok || h->version != BOOT_VERSION) {
    snprintf(why, wlen, "not a p2pkit rendezvous of this version (got version %u, want %u)",
             h->version, BOOT_VERSION);
    *rej = REJ_VERSION;
    return 1;
  }
  const char *sec = o->secret ? o->secret : "";
  if (!p2pk_secret_equal(sec, strlen(sec), h->secret, h->secret_len)) {
    snprintf(why, wlen, "the job secret does not match (a rank of another job?)");
    *rej = REJ_SECRET;
    return 1;
  }
  if ((int)h->nranks != b->nranks) {
    snprintf(why, wlen, "rank %u (pid %u) says there are %u ranks, rank 0 has %d", h->rank, h->pid,
             h->nranks, b->nranks);
    *rej = REJ_NRANKS;
    return -1;
  }
  if (h->rank == 0 || (int)h->rank >= b->nranks) {
    snprintf(why, wlen, "a process (pid %u) claims rank %u, outside 1..%d", h->pid, h->rank,
             b->nranks - 1);
    *rej = REJ_RANK;
    return -1;
  }
  if (admitted[h->rank] >= 0) {
    snprintf(why, wlen, "rank %u arrived twice (second pid %u)", h->rank, h->pid);
    *rej = REJ_DUP;
    return -1;
  }
  return 0;
}

static void abort_all(p2pk_boot *b, uint32_t status, const char *text) {
  for (int r = 1; r < b->nranks; r++)
    if (b->fds[r] >= 0) send_verdict(b->fds[r], MSG_ABORT, status, text);
}

static p2pkit_status_t server_rendezvous(p2pk_boot *b, const p2pk_boot_opts *o) {
  int lfd = o->listen_fd;
  if (lfd <= 0) P2PK_CHECK(listen_on(o, &lfd));
  P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: rank 0 listening on %s:%d for %d ranks", o->addr, o->port,
            b->nranks);
  pending_t pend[MAX_PENDING];
  int npend = 0, missing = b->nranks - 1;
  int64_t deadline = now_ms() + o->timeout_ms;
  p2pkit_status_t st = P2PKIT_SUCCESS;
  char why[256];
  while (missing > 0) {
    int64_t left = deadline - now_ms();
    if (left <= 0) {
      char list[128] = "";
      size_t used = 0;
      for (int r = 1; r < b->nranks && used < sizeof list - 8; r++)
        if (b->fds[r] < 0) used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? "," : "", r);
      st = p2pk_fail(P2PKIT_ERR_TIMEOUT,
                     "bootstrap: rank(s) %s did not arrive at %s:%d within %d ms", list, o->addr,
                     o->port, o->timeout_ms);
      abort_all(b, P2PKIT_ERR_TIMEOUT, p2pkit_last_error());
      goto out;
    }
    struct pollfd pf[1 + MAX_PENDING];
    pf[0].fd = lfd;
    pf[0].events = POLLIN;
    for (int i = 0; i < npend; i++) {
      pf[1 + i].fd = pend[i].fd;
      pf[1 + i].events = POLLIN;
    }
    int r = poll(pf, (nfds_t)(1 + npend), left > 200 ? 200 : (int)left);
    if (r < 0 && errno != EINTR) {
      st = p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: poll: %s", strerror(errno));
      goto out;
    }
    if (r <= 0) continue;
    /* Pending connections first (indices stay valid), newcomers after. */
    for (int i = npend - 1; i >= 0; i--) {
      if (!(pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      pending_t *p = &pend[i];
      ssize_t n = recv(p->fd, p->buf + p->got, sizeof p->buf - p->got, 0);
      int drop = 0;
      if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) drop = 1;
      if (n > 0) p->got += (size_t)n;
      if (!drop && p->got == sizeof p->buf) {
        hello_t h;
        uint32_t rej = 0;
        int verdict;
        if (get32(p->buf) != MSG_HELLO || get32(p->buf + 8) != HELLO_BYTES) {
          snprintf(why, sizeof why, "did not start with a p2pkit hello");
          rej = REJ_VERSION;
          verdict = 1;
        } else if (p->uid >= 0 && (uid_t)p->uid != geteuid()) {
          /* A process of another user on this machine: a job's ranks run as
           * one user, whatever secret it presents (the secret may be empty
           * or a launcher's guessable run id). */
          snprintf(why, sizeof why, "a process of another user (uid %ld) may not join", p->uid);
          rej = REJ_USER;
          verdict = 1;
        } else {
          hello_unpack(p->buf + HDR_BYTES, &h);
          verdict = judge_hello(b, o, &h, b->fds, why, sizeof why, &rej);
        }
        if (verdict == 0) {
          b->fds[h.rank] = p->fd;
          missing--;
          P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: rank %u (pid %u) arrived from %s; %d to go",
                    h.rank, h.pid, p->from, missing);
          pend[i] = pend[--npend];
          continue;
        }
        send_verdict(p->fd, MSG_REJECT, rej, why);
        if (verdict < 0) {
          close(p->fd);
          pend[i] = pend[--npend];
          st = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: %s", why);
          abort_all(b, P2PKIT_ERR_INVALID_ARGUMENT, p2pkit_last_error());
          goto out;
        }
        P2PK_WARN("bootstrap: refused a connection from %s: %s", p->from, why);
        drop = 1;
      }
      if (drop) {
        close(p->fd);
        pend[i] = pend[--npend];
      }
    }
    if (pf[0].revents & POLLIN) {
      for (;;) {
        struct sockaddr_storage sa = {0};
        socklen_t sl = sizeof sa;
        int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        if (npend == MAX_PENDING) {
          close(fd);
          continue;
        }
        set_nonblock(fd);
        pend[npend].fd = fd;
        pend[npend].got = 0;
        pend[npend].uid = p2pk_sock_peer_uid(fd);
        describe_addr(&sa, pend[npend].from, sizeof pend[npend].from);
        npend++;
      }
    }
  }
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = send_msg(b->fds[r], MSG_WELCOME, 0, NULL, 0, now_ms() + o->timeout_ms, who);
  }
  if (st != P2PKIT_SUCCESS) abort_all(b, (uint32_t)st, p2pkit_last_error());
out:
  for (int i = 0; i < npend; i++) close(pend[i].fd);
  if (lfd != o->listen_fd) close(lfd);
  return st;
}

/* --- other ranks -------------------------------------------------------------- */

static int try_connect(const struct addrinfo *ai, int64_t deadline) {
  int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
  if (fd < 0) return -1;
  if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) return fd;
  if (errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  int64_t left = deadline - now_ms();
  struct pollfd p = {fd, POLLOUT, 0};
  if (left <= 0 || poll(&p, 1, left > 1000 ? 1000 : (int)left) <= 0) {
    close(fd);
    return -1;
  }
  int err = 0;
  socklen_t el = sizeof err;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

static p2pkit_status_t verdict_status(uint32_t type, const unsigned char *payload, uint32_t len,
                                      const p2pk_boot *b) {
  uint32_t code = len >= 4 ? get32(payload) : 0;
  char text[257] = "";
  if (len > 4) {
    size_t n = len - 4 > 256 ? 256 : len - 4;
    memcpy(text, payload + 4, n);
    text[n] = '\0';
  }
  if (type == MSG_REJECT) {
    p2pkit_status_t st = (code == REJ_NRANKS || code == REJ_RANK || code == REJ_DUP)
                             ? P2PKIT_ERR_INVALID_ARGUMENT
                             : P2PKIT_ERR_REMOTE;
    return p2pk_fail(st, "bootstrap: rank 0 at %s refused rank %d: %s", b->where, b->rank, text);
  }
  p2pkit_status_t st = code > 0 && code < P2PKIT_STATUS_COUNT ? (p2pkit_status_t)code
                                                               : P2PKIT_ERR_REMOTE;
  return p2pk_fail(st, "bootstrap: rank 0 aborted the job: %s", text);
}

/* Receive one message of `type` (or a verdict, turned into its status). */
static p2pkit_status_t recv_msg(p2pk_boot *b, int fd, uint32_t type, uint32_t tag, void *buf,
                                uint32_t len, int64_t deadline, const char *who) {
  unsigned char h[HDR_BYTES];
  P2PK_CHECK(recv_all(fd, h, sizeof h, deadline, who));
  uint32_t t = get32(h), g = get32(h + 4), l = get32(h + 8);
  if (t == MSG_REJECT || t == MSG_ABORT) {
    unsigned char v[4 + 256];
    if (l > sizeof v) return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: malformed message from %s", who);
    P2PK_CHECK(recv_all(fd, v, l, deadline, who));
    return verdict_status(t, v, l, b);
  }
  if (t != type || g != tag || l != len)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "bootstrap: %s sent operation %u/%u (%u bytes) while rank %d expected %u/%u "
                     "(%u bytes): ranks called different collectives",
                     who, t, g, l, b->rank, type, tag, len);
  if (len) P2PK_CHECK(recv_all(fd, buf, len, deadline, who));
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t client_rendezvous(p2pk_boot *b, const p2pk_boot_opts *o) {
  char port[16];
  snprintf(port, sizeof port, "%d", o->port);
  struct addrinfo hints, *res = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  int g = getaddrinfo(o->addr, port, &hints, &res);
  if (g != 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: cannot resolve address '%s': %s",
                     o->addr, gai_strerror(g));
  int64_t start = now_ms(), deadline = start + o->timeout_ms;
  int fd = -1;
  while (fd < 0) {
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) fd = try_connect(ai, deadline);
    if (fd >= 0) break;
    if (now_ms() >= deadline) {
      freeaddrinfo(res);
      return p2pk_fail(P2PKIT_ERR_TIMEOUT, "bootstrap: rank %d could not reach rank 0 at %s within %d ms",
                       b->rank, b->where, o->timeout_ms);
    }
    sleep_ms(20);
  }
  freeaddrinfo(res);
  set_nonblock(fd);
  b->fds[0] = fd;
  unsigned char hello[HELLO_BYTES];
  hello_pack(hello, b->nranks, b->rank, o->secret);
  p2pkit_status_t st = send_msg(fd, MSG_HELLO, 0, hello, HELLO_BYTES, deadline, "rank 0");
  memset(hello, 0, sizeof hello);
  P2PK_CHECK(st);
  /* Rank 0 answers once everyone is there, or says why not. */
  st = recv_msg(b, fd, MSG_WELCOME, 0, NULL, 0, deadline + CLIENT_GRACE_MS, "rank 0");
  if (st == P2PKIT_ERR_TIMEOUT)
    return p2pk_fail(P2PKIT_ERR_TIMEOUT,
                     "bootstrap: rank %d reached rank 0 at %s but not every rank arrived within %d ms",
                     b->rank, b->where, o->timeout_ms);
  return st;
}

/* --- public ------------------------------------------------------------------- */

p2pkit_status_t p2pk_boot_init(const p2pk_boot_opts *o, p2pk_boot **boot_p) {
  if (!o || !boot_p || !o->addr)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: options or address missing");
  if (o->nranks < 1 || o->rank < 0 || o->rank >= o->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: rank %d of %d is out of range",
                     o->rank, o->nranks);
  if (o->port < 1 || o->port > 65535)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: port %d is out of range (1..65535)",
                     o->port);
  if (o->secret && strlen(o->secret) > P2PK_BOOT_SECRET_MAX)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: the job secret is longer than %d bytes",
                     P2PK_BOOT_SECRET_MAX);
  if (o->timeout_ms <= 0)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: timeout %d ms", o->timeout_ms);
  p2pk_boot *b = calloc(1, sizeof *b);
  int *fds = calloc((size_t)o->nranks, sizeof *fds);
  if (!b || !fds) {
    free(b);
    free(fds);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "bootstrap: out of memory");
  }
  for (int i = 0; i < o->nranks; i++) fds[i] = -1;
  b->rank = o->rank;
  b->nranks = o->nranks;
  b->timeout_ms = o->timeout_ms;
  b->fds = fds;
  snprintf(b->where, sizeof b->where, "%s:%d", o->addr, o->port);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (o->nranks > 1) st = o->rank == 0 ? server_rendezvous(b, o) : client_rendezvous(b, o);
  if (st != P2PKIT_SUCCESS) {
    p2pk_boot_destroy(b);
    return st;
  }
  P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: rank %d of %d joined at %s", b->rank, b->nranks, b->where);
  *boot_p = b;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_boot_allgather(p2pk_boot *b, unsigned tag, const void *mine, void *all,
                                    size_t bytes) {
  if (!b || (!mine && bytes) || (!all && bytes))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: all-gather without buffers");
  if (bytes > MAX_PAYLOAD / (size_t)b->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: all-gather of %zu bytes is too big",
                     bytes);
  char *out = all;
  if (bytes) memmove(out + (size_t)b->rank * bytes, mine, bytes);
  int64_t deadline = now_ms() + b->timeout_ms;
  uint32_t total = (uint32_t)(bytes * (size_t)b->nranks);
  if (b->nranks == 1) return P2PKIT_SUCCESS;
  if (b->rank != 0) {
    P2PK_CHECK(send_msg(b->fds[0], MSG_DATA, tag, mine, (uint32_t)bytes, deadline, "rank 0"));
    return recv_msg(b, b->fds[0], MSG_DATA, tag, all, total, deadline, "rank 0");
  }
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = recv_msg(b, b->fds[r], MSG_DATA, tag, out + (size_t)r * bytes, (uint32_t)bytes, deadline,
                  who);
  }
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = send_msg(b->fds[r], MSG_DATA, tag, all, total, deadline, who);
  }
  if (st != P2PKIT_SUCCESS) abort_all(b, (uint32_t)st, p2pkit_last_error());
  return st;
}

p2pkit_status_t p2pk_boot_barrier(p2pk_boot *b, unsigned tag) {
  if (!b) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: barrier without a bootstrap");
  unsigned char one = 1;
  unsigned char stack[64];
  unsigned char *all = b->nranks <= (int)sizeof stack ? stack : malloc((size_t)b->nranks);
  if (!all) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "bootstrap: out of memory");
  p2pkit_status_t st = p2pk_boot_allgather(b, tag, &one, all, 1);
  if (all != stack) free(all);
  return st;
}

int p2pk_boot_rank(const p2pk_boot *b) { return b ? b->rank : -1; }
int p2pk_boot_nranks(const p2pk_boot *b) { return b ? b->nranks : 0; }

void p2pk_boot_destroy(p2pk_boot *b) {
  if (!b) return;
  for (int i = 0; i < b->nranks; i++)
    if (b->fds[i] >= 0) close(b->fds[i]);
  free(b->fds);
  free(b);
}
