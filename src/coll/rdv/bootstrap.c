/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP rendezvous: see bootstrap.h; the messages are in bootstrap_wire.c and
 * docs/rendezvous.md. Rank 0 is the hub of a star; all-gathers go through
 * it. */
#include "coll/rdv/bootstrap.h"

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

#include "coll/rdv/bootstrap_wire.h"
#include "core/check.h"
#include "core/clock.h"

#define PENDING_MAX 1024     /* unfinished connections rank 0 keeps (evict() says which goes) */
#define EVICT_IDLE_MS 200    /* a connection silent this long is the first to make room */
#define CLIENT_GRACE_MS 2000 /* clients wait this much past the timeout for rank 0's verdict */

typedef struct {
  int fd;
  int welcomed; /* a rank: rank 0's WELCOME arrived (no REJECT may follow) */
  p2pk_boot_seal seal;
} link_t;

struct p2pk_boot {
  int rank, nranks;
  int timeout_ms;
  int auth;      /* a job secret: proofs and MACs */
  int strong;    /* and one of P2PK_BOOT_SECRET_MIN_BITS: a user that cannot be told may join */
  link_t *links; /* rank 0: links[r] for r >= 1; others: links[0] is the link to rank 0 */
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

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* --- framed messages ------------------------------------------------------- */

/* The direction of what this rank sends, and of what it receives. */
static int dir_out(const p2pk_boot *b) { return b->rank == 0 ? P2PK_TO_RANK : P2PK_TO_ROOT; }
static int dir_in(const p2pk_boot *b) { return b->rank == 0 ? P2PK_TO_ROOT : P2PK_TO_RANK; }

/* Header, payload and, for a sealed type, the MAC under the link's key. */
static p2pkit_status_t send_frame(const p2pk_boot *b, link_t *l, uint32_t type, uint32_t tag,
                                  const void *payload, uint32_t len, int64_t deadline,
                                  const char *who) {
  unsigned char h[P2PK_BOOT_HDR], mac[P2PK_MAC_BYTES];
  p2pk_boot_hdr_pack(h, type, tag, len);
  P2PK_CHECK(send_all(l->fd, h, sizeof h, deadline, who));
  if (len) P2PK_CHECK(send_all(l->fd, payload, len, deadline, who));
  if (!p2pk_boot_sealed(type)) return P2PKIT_SUCCESS;
  if (p2pk_boot_frame_mac(&l->seal, dir_out(b), l->seal.sent++, h, payload, len, mac) != 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: computing a message's MAC failed");
  return send_all(l->fd, mac, sizeof mac, deadline, who);
}

/* A verdict (REJECT or ABORT) in one non-blocking send. Best effort and
 * silent: the receiver may be gone, and the caller's error detail must
 * survive. A few hundred bytes fit any socket buffer. */
static void send_verdict(const p2pk_boot *b, link_t *l, uint32_t type, uint32_t code,
                         const char *text) {
  unsigned char msg[P2PK_BOOT_HDR + P2PK_BOOT_VERDICT_MAX + P2PK_MAC_BYTES];
  size_t n = p2pk_boot_verdict_pack(msg + P2PK_BOOT_HDR, code, text);
  p2pk_boot_hdr_pack(msg, type, 0, (uint32_t)n);
  size_t total = P2PK_BOOT_HDR + n;
  if (p2pk_boot_sealed(type)) {
    p2pk_boot_frame_mac(&l->seal, dir_out(b), l->seal.sent++, msg, msg + P2PK_BOOT_HDR, n,
                        msg + total);
    total += P2PK_MAC_BYTES;
  }
  ssize_t sent = send(l->fd, msg, total, MSG_NOSIGNAL | MSG_DONTWAIT);
  (void)sent;
}

static p2pkit_status_t verdict_status(uint32_t type, uint32_t code, const char *text,
                                      const p2pk_boot *b) {
  if (type == P2PK_MSG_REJECT) {
    p2pkit_status_t st = (code == P2PK_REJ_NRANKS || code == P2PK_REJ_RANK || code == P2PK_REJ_DUP)
                             ? P2PKIT_ERR_INVALID_ARGUMENT
                             : P2PKIT_ERR_REMOTE;
    return p2pk_fail(st, "bootstrap: rank 0 at %s refused rank %d: %s", b->where, b->rank, text);
  }
  p2pkit_status_t st = code > 0 && code < P2PKIT_STATUS_COUNT ? (p2pkit_status_t)code
                                                               : P2PKIT_ERR_REMOTE;
  return p2pk_fail(st, "bootstrap: rank 0 aborted the job: %s", text);
}

static p2pkit_status_t tampered(const char *who) {
  return p2pk_fail(P2PKIT_ERR_REMOTE,
                   "bootstrap: a message from %s failed its authentication check (it was altered "
                   "on the way, or does not come from that rank)", who);
}

/* A verdict whose header is in `h`: read, checked (ABORT is sealed) and
 * turned into its status. REJECT only reaches a rank not yet welcomed. */
static p2pkit_status_t recv_verdict(p2pk_boot *b, link_t *l, const unsigned char h[P2PK_BOOT_HDR],
                                    const p2pk_boot_hdr *hd, int64_t deadline, const char *who) {
  unsigned char v[P2PK_BOOT_VERDICT_MAX], mac[P2PK_MAC_BYTES];
  if (b->rank == 0 || (hd->type == P2PK_MSG_REJECT && l->welcomed))
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: %s sent a message out of turn", who);
  P2PK_CHECK(recv_all(l->fd, v, hd->len, deadline, who));
  if (hd->type == P2PK_MSG_ABORT) {
    P2PK_CHECK(recv_all(l->fd, mac, sizeof mac, deadline, who));
    if (!p2pk_boot_frame_ok(&l->seal, dir_in(b), l->seal.received++, h, v, hd->len, mac))
      return tampered(who);
  }
  uint32_t code = 0;
  char text[P2PK_BOOT_VERDICT_MAX];
  p2pk_boot_verdict_parse(v, hd->len, &code, text, sizeof text);
  return verdict_status(hd->type, code, text, b);
}

/* Receive one sealed message of `type` (or a verdict, turned into its status). */
static p2pkit_status_t recv_frame(p2pk_boot *b, link_t *l, uint32_t type, uint32_t tag, void *buf,
                                  uint32_t len, int64_t deadline, const char *who) {
  unsigned char h[P2PK_BOOT_HDR], mac[P2PK_MAC_BYTES];
  P2PK_CHECK(recv_all(l->fd, h, sizeof h, deadline, who));
  p2pk_boot_hdr hd;
  if (p2pk_boot_hdr_parse(h, &hd) != 0)
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: malformed message from %s", who);
  if (hd.type == P2PK_MSG_REJECT || hd.type == P2PK_MSG_ABORT)
    return recv_verdict(b, l, h, &hd, deadline, who);
  if (hd.type != type || hd.tag != tag || hd.len != len)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT,
                     "bootstrap: %s sent operation %u/%u (%u bytes) while rank %d expected %u/%u "
                     "(%u bytes): ranks called different collectives",
                     who, hd.type, hd.tag, hd.len, b->rank, type, tag, len);
  if (len) P2PK_CHECK(recv_all(l->fd, buf, len, deadline, who));
  P2PK_CHECK(recv_all(l->fd, mac, sizeof mac, deadline, who));
  if (!p2pk_boot_frame_ok(&l->seal, dir_in(b), l->seal.received++, h, buf, len, mac))
    return tampered(who);
  return P2PKIT_SUCCESS;
}

/* --- addresses --------------------------------------------------------------- */

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

/* --- rank 0 ------------------------------------------------------------------- */

/* A connection that has not proved itself yet. */
typedef struct {
  int fd;
  int stage; /* 0: its HELLO is due, 1: its PROOF */
  int64_t since, deadline;
  size_t got;
  unsigned char buf[P2PK_BOOT_HDR + P2PK_BOOT_HELLO_BYTES];
  p2pk_boot_hello hello;
  unsigned char ns[P2PK_BOOT_NONCE];
  char from[64];
} pending_t;

typedef struct {
  p2pk_boot *b;
  const p2pk_boot_opts *o;
  pending_t *pend;
  int npend, missing;
  int warned_user, warned_full; /* each warning once; the rest at INFO */
  p2pkit_status_t failed; /* a rank of this job was misconfigured */
} server_t;

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

static void drop(server_t *s, int i) {
  close(s->pend[i].fd);
  s->pend[i] = s->pend[--s->npend];
}

/* A connection refused before it is admitted: told why, closed. */
static void refuse(server_t *s, int i, uint32_t code, const char *why) {
  link_t l = {s->pend[i].fd, 0, {0}};
  send_verdict(s->b, &l, P2PK_MSG_REJECT, code, why);
  P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: refused a connection from %s: %s", s->pend[i].from, why);
  drop(s, i);
}

/* Makes room for one more: drops the oldest connection that has owed its
 * HELLO for EVICT_IDLE_MS (a real rank sends it at once), else the oldest
 * of all; a flood of connections, idle or not, then turns over in the table
 * faster than a real rank's handshake, which completes in a round trip. */
static void evict(server_t *s) {
  const int64_t idle_since = now_ms() - EVICT_IDLE_MS;
  int victim = -1, oldest = -1;
  for (int i = 0; i < s->npend; i++) {
    const pending_t *p = &s->pend[i];
    if (oldest < 0 || p->since < s->pend[oldest].since) oldest = i;
    if (p->stage == 0 && p->since <= idle_since && (victim < 0 || p->since < s->pend[victim].since))
      victim = i;
  }
  if (victim < 0) victim = oldest;
  if (victim < 0) return;
  if (!s->warned_full++)
    P2PK_WARN("bootstrap: rank 0 at %s has %d connections that have not proved themselves; "
              "dropping the oldest (a flood of connections from %s?)", s->b->where, s->npend,
              s->pend[victim].from);
  drop(s, victim);
}

/* Whether the user at the other end may join. Read at accept, before a
 * byte of it: a job's ranks run as one user, whatever secret another
 * presents; without a secret of P2PK_BOOT_SECRET_MIN_BITS, a peer whose user
 * cannot be told cannot join. */
static int user_ok(server_t *s, int fd, const char *from, char *why, size_t len) {
  long uid = p2pk_sock_peer_uid(fd);
  if (uid >= 0 && (uid_t)uid != geteuid())
    snprintf(why, len, "a process of another user (uid %ld) may not join", uid);
  else if (uid < 0 && !s->b->strong)
    snprintf(why, len, "whose process this is cannot be told, and without a job secret of %d "
             "bits (P2PKIT_JOB_SECRET) only this user's processes may join",
             P2PK_BOOT_SECRET_MIN_BITS);
  else
    return 1;
  if (!s->warned_user++) P2PK_WARN("bootstrap: refused a connection from %s: %s", from, why);
  return 0;
}

static void accept_one(server_t *s, int fd, const struct sockaddr_storage *sa) {
  char from[64], why[200];
  describe_addr(sa, from, sizeof from);
  set_nonblock(fd);
  if (!user_ok(s, fd, from, why, sizeof why)) {
    link_t l = {fd, 0, {0}};
    send_verdict(s->b, &l, P2PK_MSG_REJECT, P2PK_REJ_USER, why);
    close(fd);
    return;
  }
  if (s->npend == PENDING_MAX) evict(s);
  pending_t *p = &s->pend[s->npend++];
  memset(p, 0, sizeof *p);
  p->fd = fd;
  p->since = now_ms();
  p->deadline = p->since + P2PK_BOOT_HANDSHAKE_MS;
  snprintf(p->from, sizeof p->from, "%s", from);
}

static void accept_all(server_t *s, int lfd) {
  for (int tries = 0; tries < 4 * PENDING_MAX; tries++) {
    struct sockaddr_storage sa = {0};
    socklen_t sl = sizeof sa;
    int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      accept_one(s, fd, &sa);
    } else if ((errno == EMFILE || errno == ENFILE) && s->npend > 0) {
      evict(s); /* out of descriptors: the oldest stranger makes way */
    } else if (errno != EINTR && errno != ECONNABORTED) {
      return; /* EAGAIN: none left */
    }
  }
}

/* The CHALLENGE: rank 0's nonce and nothing else. Nothing derived from the
 * secret leaves rank 0 before the rank has proved it knows it, so a
 * connection gets nothing to test guesses against offline. */
static int send_challenge(server_t *s, pending_t *p) {
  unsigned char msg[P2PK_BOOT_HDR + P2PK_BOOT_CHALLENGE_BYTES];
  p2pk_boot_hdr_pack(msg, P2PK_MSG_CHALLENGE, 0, P2PK_BOOT_CHALLENGE_BYTES);
  memset(p->ns, 0, sizeof p->ns);
  if (s->b->auth && p2pk_random_bytes(p->ns, sizeof p->ns) != 0) return -1;
  memcpy(msg + P2PK_BOOT_HDR, p->ns, sizeof p->ns);
  return send(p->fd, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof msg ? 0 : -1;
}

/* Rank 0's PROOF, sent once the rank's own checked out (zeroes without a
 * secret). */
static int send_root_proof(server_t *s, const pending_t *p) {
  unsigned char msg[P2PK_BOOT_HDR + P2PK_MAC_BYTES];
  p2pk_boot_hdr_pack(msg, P2PK_MSG_PROOF, 0, P2PK_MAC_BYTES);
  memset(msg + P2PK_BOOT_HDR, 0, P2PK_MAC_BYTES);
  if (s->b->auth && p2pk_boot_proof(s->o->secret, P2PK_TO_RANK, p->hello.nonce, p->ns,
                                    p->hello.nranks, p->hello.rank, msg + P2PK_BOOT_HDR) != 0)
    return -1;
  return send(p->fd, msg, sizeof msg, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof msg ? 0 : -1;
}

static void on_hello(server_t *s, int i) {
  pending_t *p = &s->pend[i];
  char why[160];
  if (p2pk_boot_hello_parse(p->buf + P2PK_BOOT_HDR, P2PK_BOOT_HELLO_BYTES, &p->hello, why,
                            sizeof why) != 0) {
    refuse(s, i, P2PK_REJ_VERSION, why);
    return;
  }
  if (!(p->hello.flags & P2PK_HELLO_SECRET) != !s->b->auth) {
    refuse(s, i, P2PK_REJ_SECRET,
           s->b->auth ? "rank 0 has a job secret and this rank none (P2PKIT_JOB_SECRET)"
                      : "this rank has a job secret and rank 0 none (P2PKIT_JOB_SECRET)");
    return;
  }
  if (send_challenge(s, p) != 0) {
    P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: could not answer %s; dropped", p->from);
    drop(s, i);
    return;
  }
  p->stage = 1;
  p->got = 0;
}

/* What an admitted rank's claims say about the job: 0 to admit, -1 to fail
 * the whole job (a rank of this job, proved so, is misconfigured). */
static int judge(const server_t *s, const p2pk_boot_hello *h, char *why, size_t wlen,
                 uint32_t *rej) {
  const p2pk_boot *b = s->b;
  *rej = h->nranks != (uint32_t)b->nranks ? P2PK_REJ_NRANKS
         : h->rank == 0 || h->rank >= (uint32_t)b->nranks ? P2PK_REJ_RANK
         : b->links[h->rank].fd >= 0 ? P2PK_REJ_DUP
                                     : 0;
  if (*rej == P2PK_REJ_NRANKS)
    snprintf(why, wlen, "rank %u (pid %u) says there are %u ranks, rank 0 has %d", h->rank, h->pid,
             h->nranks, b->nranks);
  else if (*rej == P2PK_REJ_RANK)
    snprintf(why, wlen, "a process (pid %u) claims rank %u, outside 1..%d", h->pid, h->rank,
             b->nranks - 1);
  else if (*rej == P2PK_REJ_DUP)
    snprintf(why, wlen, "rank %u arrived twice (second pid %u)", h->rank, h->pid);
  return *rej ? -1 : 0;
}

static void admit(server_t *s, int i) {
  pending_t *p = &s->pend[i];
  link_t *l = &s->b->links[p->hello.rank];
  l->fd = p->fd;
  l->seal.on = s->b->auth;
  if (s->b->auth)
    p2pk_boot_link_key(s->o->secret, p->hello.nonce, p->ns, p->hello.nranks, p->hello.rank,
                          l->seal.key);
  s->missing--;
  P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: rank %u (pid %u) arrived from %s; %d to go", p->hello.rank,
            p->hello.pid, p->from, s->missing);
  s->pend[i] = s->pend[--s->npend]; /* its descriptor lives on in the link */
}

static void abort_all(p2pk_boot *b, uint32_t status, const char *text) {
  for (int r = 1; r < b->nranks; r++)
    if (b->links[r].fd >= 0) send_verdict(b, &b->links[r], P2PK_MSG_ABORT, status, text);
}

/* The rank's PROOF: checked (constant time) before anything derived from the
 * secret goes back; then rank 0's own proof, and the rank's claims judged. */
static void on_proof(server_t *s, int i) {
  pending_t *p = &s->pend[i];
  unsigned char want[P2PK_MAC_BYTES];
  if (s->b->auth &&
      (p2pk_boot_proof(s->o->secret, P2PK_TO_ROOT, p->hello.nonce, p->ns, p->hello.nranks,
                       p->hello.rank, want) != 0 ||
       !p2pk_ct_equal(want, p->buf + P2PK_BOOT_HDR, sizeof want))) {
    refuse(s, i, P2PK_REJ_SECRET, "the job secret does not match (a rank of another job?)");
    return;
  }
  if (send_root_proof(s, p) != 0) {
    P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: could not answer %s's proof; dropped", p->from);
    drop(s, i);
    return;
  }
  char why[256];
  uint32_t rej = 0;
  if (judge(s, &p->hello, why, sizeof why, &rej) == 0) {
    admit(s, i);
    return;
  }
  refuse(s, i, rej, why);
  s->failed = p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: %s", why);
  abort_all(s->b, P2PKIT_ERR_INVALID_ARGUMENT, p2pkit_last_error());
}

/* Reads what the connection sent; acts on a whole frame. A header that is
 * not the one due ends the connection at once. */
static void on_readable(server_t *s, int i) {
  pending_t *p = &s->pend[i];
  const size_t want = P2PK_BOOT_HDR + (p->stage ? P2PK_MAC_BYTES : P2PK_BOOT_HELLO_BYTES);
  ssize_t n = recv(p->fd, p->buf + p->got, want - p->got, 0);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (n <= 0) {
    drop(s, i);
    return;
  }
  size_t before = p->got;
  p->got += (size_t)n;
  p2pk_boot_hdr hd;
  if (before < P2PK_BOOT_HDR && p->got >= P2PK_BOOT_HDR &&
      (p2pk_boot_hdr_parse(p->buf, &hd) != 0 ||
       hd.type != (p->stage ? P2PK_MSG_PROOF : P2PK_MSG_HELLO))) {
    refuse(s, i, P2PK_REJ_VERSION, "not a p2pkit rendezvous message");
    return;
  }
  if (p->got < want) return;
  if (p->stage) on_proof(s, i);
  else on_hello(s, i);
}

/* Drops the connections past their deadline; returns the nearest deadline
 * left (or `until`). */
static int64_t expire(server_t *s, int64_t now, int64_t until) {
  for (int i = s->npend - 1; i >= 0; i--) {
    if (s->pend[i].deadline > now) {
      if (s->pend[i].deadline < until) until = s->pend[i].deadline;
      continue;
    }
    P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: dropped a connection from %s: no %s within %d ms",
              s->pend[i].from, s->pend[i].stage ? "proof" : "hello", P2PK_BOOT_HANDSHAKE_MS);
    drop(s, i);
  }
  return until;
}

static p2pkit_status_t timed_out(server_t *s) {
  const p2pk_boot *b = s->b;
  char list[128] = "";
  size_t used = 0;
  for (int r = 1; r < b->nranks && used < sizeof list - 8; r++)
    if (b->links[r].fd < 0) used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? "," : "", r);
  p2pkit_status_t st = p2pk_fail(P2PKIT_ERR_TIMEOUT,
                                 "bootstrap: rank(s) %s did not arrive at %s:%d within %d ms", list,
                                 s->o->addr, s->o->port, s->o->timeout_ms);
  abort_all(s->b, P2PKIT_ERR_TIMEOUT, p2pkit_last_error());
  return st;
}

/* One round: wait for activity (at most until the next deadline), read
 * what came, accept newcomers. */
static p2pkit_status_t serve_once(server_t *s, int lfd, struct pollfd *pf, int64_t deadline) {
  int64_t now = now_ms();
  int64_t until = expire(s, now, deadline);
  int64_t wait = until - now;
  pf[0].fd = lfd;
  pf[0].events = POLLIN;
  for (int i = 0; i < s->npend; i++) {
    pf[1 + i].fd = s->pend[i].fd;
    pf[1 + i].events = POLLIN;
    pf[1 + i].revents = 0;
  }
  int n = s->npend;
  int r = poll(pf, (nfds_t)(1 + n), wait > 200 ? 200 : wait < 0 ? 0 : (int)wait);
  if (r < 0 && errno != EINTR) return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: poll: %s", strerror(errno));
  if (r <= 0) return P2PKIT_SUCCESS;
  /* Backwards: drop() moves the last entry into the hole, one already seen. */
  for (int i = n - 1; i >= 0 && s->failed == P2PKIT_SUCCESS; i--)
    if (pf[1 + i].revents & (POLLIN | POLLHUP | POLLERR)) on_readable(s, i);
  if (s->failed == P2PKIT_SUCCESS && (pf[0].revents & POLLIN)) accept_all(s, lfd);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t welcome_all(p2pk_boot *b, int timeout_ms) {
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = send_frame(b, &b->links[r], P2PK_MSG_WELCOME, 0, NULL, 0, now_ms() + timeout_ms, who);
  }
  if (st != P2PKIT_SUCCESS) abort_all(b, (uint32_t)st, p2pkit_last_error());
  return st;
}

static p2pkit_status_t server_rendezvous(p2pk_boot *b, const p2pk_boot_opts *o) {
  int lfd = o->listen_fd > 0 ? o->listen_fd : -1; /* p2pkit_get_unique_id's socket */
  if (lfd < 0) P2PK_CHECK(listen_on(o, &lfd));
  P2PK_INFO(P2PK_LOG_BOOT, "bootstrap: rank 0 listening on %s:%d for %d ranks (%s)", o->addr,
            o->port, b->nranks, b->auth ? "job secret: HMAC-SHA256 challenges" : "no secret: same user only");
  server_t s = {b, o, calloc(PENDING_MAX, sizeof(pending_t)), 0, b->nranks - 1, 0, 0, P2PKIT_SUCCESS};
  struct pollfd *pf = calloc(1 + PENDING_MAX, sizeof *pf);
  p2pkit_status_t st = s.pend && pf ? P2PKIT_SUCCESS
                                    : p2pk_fail(P2PKIT_ERR_NO_MEMORY, "bootstrap: out of memory");
  int64_t deadline = now_ms() + o->timeout_ms;
  while (st == P2PKIT_SUCCESS && s.missing > 0) {
    if (now_ms() >= deadline) st = timed_out(&s);
    else st = serve_once(&s, lfd, pf, deadline);
    if (st == P2PKIT_SUCCESS) st = s.failed;
  }
  if (st == P2PKIT_SUCCESS) st = welcome_all(b, o->timeout_ms);
  while (s.npend > 0) drop(&s, s.npend - 1);
  free(s.pend);
  free(pf);
  if (lfd != o->listen_fd) close(lfd); /* the id's socket is its owner's to close */
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

/* A connection to rank 0, retried until the deadline; -1 when none came. */
static int connect_root(const struct addrinfo *res, int64_t deadline) {
  for (;;) {
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
      int fd = try_connect(ai, deadline);
      if (fd >= 0) return fd;
    }
    if (now_ms() >= deadline) return -1;
    sleep_ms(20);
  }
}

/* The process at the other end is of this user (when that can be told; it
 * must be without a secret of P2PK_BOOT_SECRET_MIN_BITS, since this rank's
 * PROOF is a value to test guesses of a weaker one against). */
static p2pkit_status_t check_root_user(const p2pk_boot *b, int fd) {
  long uid = p2pk_sock_peer_uid(fd);
  /* connect() returns once rank 0's kernel answered; its socket may be
   * whole a moment later. */
  for (int tries = 0; uid < 0 && tries < 3; tries++) {
    sleep_ms(5);
    uid = p2pk_sock_peer_uid(fd);
  }
  if (uid >= 0 && (uid_t)uid != geteuid())
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: the process listening at %s belongs to another "
                     "user (uid %ld), not this job's (uid %ld): it is not this job's rank 0",
                     b->where, uid, (long)geteuid());
  if (uid < 0 && !b->strong)
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: whose process listens at %s cannot be told, "
                     "and without a job secret of %d bits a rank trusts only a rank 0 of its own "
                     "user: set P2PKIT_JOB_SECRET on every rank (`p2pkit env --new-secret`)",
                     b->where, P2PK_BOOT_SECRET_MIN_BITS);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t not_root(const p2pk_boot *b, const char *what) {
  return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: the process at %s %s: the ranks have different "
                   "job secrets (P2PKIT_JOB_SECRET), or a process that is not this job's rank 0 "
                   "holds the port", b->where, what);
}

/* The header of rank 0's next message, which must be `type` or a REJECT
 * (read whole and turned into its status). */
static p2pkit_status_t recv_step(p2pk_boot *b, uint32_t type, int64_t deadline) {
  link_t *l = &b->links[0];
  unsigned char h[P2PK_BOOT_HDR];
  P2PK_CHECK(recv_all(l->fd, h, sizeof h, deadline, "rank 0"));
  p2pk_boot_hdr hd;
  if (p2pk_boot_hdr_parse(h, &hd) != 0 || (hd.type != type && hd.type != P2PK_MSG_REJECT))
    return not_root(b, "did not answer as a p2pkit rank 0");
  if (hd.type == P2PK_MSG_REJECT) return recv_verdict(b, l, h, &hd, deadline, "rank 0");
  return P2PKIT_SUCCESS;
}

/* Rank 0's CHALLENGE (or its verdict): its nonce. *retry: rank 0 closed the
 * connection before answering (it had no room): try again. */
static p2pkit_status_t recv_challenge(p2pk_boot *b, int64_t deadline,
                                      unsigned char ns[P2PK_BOOT_NONCE], int *retry) {
  link_t *l = &b->links[0];
  unsigned char c;
  P2PK_CHECK(wait_fd(l->fd, POLLIN, deadline, "rank 0"));
  if (recv(l->fd, &c, 1, MSG_PEEK) <= 0) {
    *retry = 1;
    return p2pk_fail(P2PKIT_ERR_REMOTE, "bootstrap: rank 0 at %s closed the connection", b->where);
  }
  P2PK_CHECK(recv_step(b, P2PK_MSG_CHALLENGE, deadline));
  return recv_all(l->fd, ns, P2PK_BOOT_NONCE, deadline, "rank 0");
}

/* Rank 0's PROOF (or its verdict), checked in constant time: a process that
 * merely holds the port fails here. */
static p2pkit_status_t recv_root_proof(p2pk_boot *b, const p2pk_boot_opts *o,
                                       const p2pk_boot_hello *me,
                                       const unsigned char ns[P2PK_BOOT_NONCE], int64_t deadline) {
  unsigned char got[P2PK_MAC_BYTES], want[P2PK_MAC_BYTES];
  P2PK_CHECK(recv_step(b, P2PK_MSG_PROOF, deadline));
  P2PK_CHECK(recv_all(b->links[0].fd, got, sizeof got, deadline, "rank 0"));
  if (!b->auth) return P2PKIT_SUCCESS;
  if (p2pk_boot_proof(o->secret, P2PK_TO_RANK, me->nonce, ns, me->nranks, me->rank, want) != 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: computing rank 0's proof failed");
  if (!p2pk_ct_equal(want, got, sizeof want))
    return not_root(b, "could not prove that it knows the job secret");
  return P2PKIT_SUCCESS;
}

/* A REJECT rank 0 sent as the connection opened (before it closed it), as
 * its status; P2PKIT_SUCCESS when none is there. */
static p2pkit_status_t early_verdict(p2pk_boot *b) {
  link_t *l = &b->links[0];
  unsigned char h[P2PK_BOOT_HDR];
  struct pollfd pf = {l->fd, POLLIN, 0};
  p2pk_boot_hdr hd;
  if (poll(&pf, 1, 0) != 1 || recv(l->fd, h, sizeof h, MSG_PEEK) != (ssize_t)sizeof h ||
      p2pk_boot_hdr_parse(h, &hd) != 0 || hd.type != P2PK_MSG_REJECT)
    return P2PKIT_SUCCESS;
  P2PK_CHECK(recv_all(l->fd, h, sizeof h, now_ms() + 100, "rank 0"));
  return recv_verdict(b, l, h, &hd, now_ms() + 100, "rank 0");
}

/* One attempt: HELLO, rank 0's CHALLENGE (a nonce), this rank's PROOF, rank
 * 0's PROOF checked, the link's key. *retry as recv_challenge says. */
static p2pkit_status_t handshake(p2pk_boot *b, const p2pk_boot_opts *o, int64_t deadline,
                                 int *retry) {
  link_t *l = &b->links[0];
  p2pk_boot_hello me = {P2PK_BOOT_VERSION, (uint32_t)b->nranks, (uint32_t)b->rank,
                        (uint32_t)getpid(), b->auth ? P2PK_HELLO_SECRET : 0, {0}};
  if (b->auth && p2pk_random_bytes(me.nonce, sizeof me.nonce) != 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: no random bytes from libcrypto");
  unsigned char hello[P2PK_BOOT_HELLO_BYTES], ns[P2PK_BOOT_NONCE], proof[P2PK_MAC_BYTES];
  p2pk_boot_hello_pack(&me, hello);
  p2pkit_status_t st = check_root_user(b, l->fd);
  if (st == P2PKIT_SUCCESS)
    st = send_frame(b, l, P2PK_MSG_HELLO, 0, hello, sizeof hello, deadline, "rank 0");
  if (st != P2PKIT_SUCCESS) {
    /* Rank 0 may have refused this process as it connected: say why. */
    p2pkit_status_t v = early_verdict(b);
    return v != P2PKIT_SUCCESS ? v : st;
  }
  P2PK_CHECK(recv_challenge(b, deadline, ns, retry));
  memset(proof, 0, sizeof proof);
  if (b->auth &&
      p2pk_boot_proof(o->secret, P2PK_TO_ROOT, me.nonce, ns, me.nranks, me.rank, proof) != 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: computing this rank's proof failed");
  P2PK_CHECK(send_frame(b, l, P2PK_MSG_PROOF, 0, proof, sizeof proof, deadline, "rank 0"));
  P2PK_CHECK(recv_root_proof(b, o, &me, ns, deadline));
  if (b->auth && p2pk_boot_link_key(o->secret, me.nonce, ns, me.nranks, me.rank, l->seal.key) != 0)
    return p2pk_fail(P2PKIT_ERR_SYSTEM, "bootstrap: computing the link's key failed");
  l->seal.on = b->auth;
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
  const int64_t deadline = now_ms() + o->timeout_ms;
  link_t *l = &b->links[0];
  p2pkit_status_t st;
  for (int retry = 1; retry;) {
    retry = 0;
    if (l->fd >= 0) close(l->fd);
    l->fd = connect_root(res, deadline);
    if (l->fd < 0) {
      freeaddrinfo(res);
      return p2pk_fail(P2PKIT_ERR_TIMEOUT, "bootstrap: rank %d could not reach rank 0 at %s within %d ms",
                       b->rank, b->where, o->timeout_ms);
    }
    set_nonblock(l->fd);
    st = handshake(b, o, deadline + CLIENT_GRACE_MS, &retry);
    if (retry) sleep_ms(20);
  }
  freeaddrinfo(res);
  P2PK_CHECK(st);
  /* Rank 0 answers once everyone is there, or says why not. */
  st = recv_frame(b, l, P2PK_MSG_WELCOME, 0, NULL, 0, deadline + CLIENT_GRACE_MS, "rank 0");
  l->welcomed = st == P2PKIT_SUCCESS;
  if (st == P2PKIT_ERR_TIMEOUT)
    return p2pk_fail(P2PKIT_ERR_TIMEOUT,
                     "bootstrap: rank %d reached rank 0 at %s but not every rank arrived within %d ms",
                     b->rank, b->where, o->timeout_ms);
  return st;
}

/* --- public ------------------------------------------------------------------- */

static p2pkit_status_t check_opts(const p2pk_boot_opts *o) {
  if (!o->addr) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: options or address missing");
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
  return P2PKIT_SUCCESS;
}

/* A secret needs libcrypto; the address and the secret must suit each other
 * (p2pk_boot_judge_secret). */
static p2pkit_status_t check_security(const p2pk_boot_opts *o, int auth) {
  char why[400];
  if (auth && p2pk_crypto_load(why, sizeof why) != 0)
    return p2pk_fail(P2PKIT_ERR_UNSUPPORTED,
                     "bootstrap: a job secret is set, and the ranks prove it to each other with "
                     "OpenSSL's HMAC-SHA256 instead of sending it, but libcrypto cannot be loaded: "
                     "install libssl3 or set P2PKIT_CRYPTO_LIB, or, all ranks on this machine "
                     "(MASTER_ADDR on loopback), unset P2PKIT_JOB_SECRET to rely on the same-user "
                     "check (%s)", why);
  return p2pk_boot_judge_secret(o->addr, o->secret);
}

p2pkit_status_t p2pk_boot_init(const p2pk_boot_opts *o, p2pk_boot **boot_p) {
  if (!o || !boot_p) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: options or address missing");
  P2PK_CHECK(check_opts(o));
  const int auth = o->secret && o->secret[0];
  if (o->nranks > 1) P2PK_CHECK(check_security(o, auth));
  p2pk_boot *b = calloc(1, sizeof *b);
  link_t *links = calloc((size_t)o->nranks, sizeof *links);
  if (!b || !links) {
    free(b);
    free(links);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "bootstrap: out of memory");
  }
  for (int i = 0; i < o->nranks; i++) links[i].fd = -1;
  b->rank = o->rank;
  b->nranks = o->nranks;
  b->timeout_ms = o->timeout_ms;
  b->auth = auth;
  b->strong = auth && p2pk_boot_secret_bits(o->secret) >= P2PK_BOOT_SECRET_MIN_BITS;
  b->links = links;
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

static p2pkit_status_t gather_at_root(p2pk_boot *b, unsigned tag, void *all, size_t bytes,
                                      int64_t deadline) {
  char *out = all;
  const uint32_t total = (uint32_t)(bytes * (size_t)b->nranks);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = recv_frame(b, &b->links[r], P2PK_MSG_DATA, tag, out + (size_t)r * bytes, (uint32_t)bytes,
                    deadline, who);
  }
  for (int r = 1; r < b->nranks && st == P2PKIT_SUCCESS; r++) {
    char who[32];
    snprintf(who, sizeof who, "rank %d", r);
    st = send_frame(b, &b->links[r], P2PK_MSG_DATA, tag, all, total, deadline, who);
  }
  if (st != P2PKIT_SUCCESS) abort_all(b, (uint32_t)st, p2pkit_last_error());
  return st;
}

p2pkit_status_t p2pk_boot_allgather(p2pk_boot *b, unsigned tag, const void *mine, void *all,
                                    size_t bytes) {
  if (!b || (!mine && bytes) || (!all && bytes))
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: all-gather without buffers");
  if (bytes > P2PK_BOOT_MAX_PAYLOAD / (size_t)b->nranks)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "bootstrap: all-gather of %zu bytes is too big",
                     bytes);
  char *out = all;
  if (bytes) memmove(out + (size_t)b->rank * bytes, mine, bytes);
  if (b->nranks == 1) return P2PKIT_SUCCESS;
  int64_t deadline = now_ms() + b->timeout_ms;
  if (b->rank == 0) return gather_at_root(b, tag, all, bytes, deadline);
  const uint32_t total = (uint32_t)(bytes * (size_t)b->nranks);
  P2PK_CHECK(send_frame(b, &b->links[0], P2PK_MSG_DATA, tag, mine, (uint32_t)bytes, deadline, "rank 0"));
  return recv_frame(b, &b->links[0], P2PK_MSG_DATA, tag, all, total, deadline, "rank 0");
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
    if (b->links[i].fd >= 0) close(b->links[i].fd);
  memset(b->links, 0, (size_t)b->nranks * sizeof *b->links); /* the link keys */
  free(b->links);
  free(b);
}
