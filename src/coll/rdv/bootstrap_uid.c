/* SPDX-License-Identifier: BSD-3-Clause */
/* Whose process is at the other end of a TCP connection (see bootstrap.h).
 * The kernel is asked for that one socket through NETLINK_SOCK_DIAG, a
 * lookup by its addresses that costs the same with a thousand connections
 * open; where that is not available, /proc/net/tcp{,6} is read line by line. */
#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "coll/rdv/bootstrap.h"

/* One end of a connection as the kernel's tables hold it. */
typedef struct {
  int family;              /* AF_INET or AF_INET6 */
  unsigned char addr[16];  /* network order; 4 bytes for AF_INET */
  uint16_t port;           /* network order */
} endpoint;

/* The address as an IPv4 socket holds it: an IPv4 one, or the IPv4 one an
 * IPv4-mapped IPv6 address (::ffff:a.b.c.d, what a dual-stack listener sees
 * of an IPv4 peer) stands for. 0 when it is neither. */
static int as_v4(const struct sockaddr_storage *sa, endpoint *e) {
  memset(e, 0, sizeof *e);
  e->family = AF_INET;
  if (sa->ss_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    memcpy(e->addr, &s4->sin_addr, 4);
    e->port = s4->sin_port;
    return 1;
  }
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
  if (sa->ss_family != AF_INET6 || !IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr)) return 0;
  memcpy(e->addr, &s6->sin6_addr.s6_addr[12], 4);
  e->port = s6->sin6_port;
  return 1;
}

/* The address as an IPv6 socket holds it (an IPv4 one mapped). */
static int as_v6(const struct sockaddr_storage *sa, endpoint *e) {
  memset(e, 0, sizeof *e);
  e->family = AF_INET6;
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    memcpy(e->addr, &s6->sin6_addr, 16);
    e->port = s6->sin6_port;
    return 1;
  }
  if (sa->ss_family != AF_INET) return 0;
  const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
  e->addr[10] = e->addr[11] = 0xff;
  memcpy(e->addr + 12, &s4->sin_addr, 4);
  e->port = s4->sin_port;
  return 1;
}

/* --- NETLINK_SOCK_DIAG ------------------------------------------------------ */

/* The uid of the socket whose local end is `local` and remote end `remote`:
 * 1 found (*uid set), 0 no such socket (or one without an owner, in
 * TIME_WAIT), -1 when the kernel cannot be asked. */
static int diag_uid(const endpoint *local, const endpoint *remote, long *uid) {
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return -1;
  struct timeval tv = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  struct {
    struct nlmsghdr nh;
    struct inet_diag_req_v2 r;
  } req;
  memset(&req, 0, sizeof req);
  req.nh.nlmsg_len = sizeof req;
  req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.nh.nlmsg_flags = NLM_F_REQUEST; /* one socket, by its addresses: not a dump */
  req.r.sdiag_family = (unsigned char)local->family;
  req.r.sdiag_protocol = IPPROTO_TCP;
  req.r.idiag_states = ~0u;
  req.r.id.idiag_sport = local->port;
  req.r.id.idiag_dport = remote->port;
  memcpy(req.r.id.idiag_src, local->addr, sizeof req.r.id.idiag_src);
  memcpy(req.r.id.idiag_dst, remote->addr, sizeof req.r.id.idiag_dst);
  req.r.id.idiag_cookie[0] = req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  long buf[256]; /* aligned for nlmsghdr */
  ssize_t n = -1;
  if (sendto(fd, &req, sizeof req, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)sizeof req)
    n = recv(fd, buf, sizeof buf, 0);
  close(fd);
  const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
  if (n < 0 || !NLMSG_OK(h, (unsigned)n)) return -1;
  if (h->nlmsg_type == NLMSG_ERROR) return 0; /* ENOENT: no such socket */
  const struct inet_diag_msg *m = NLMSG_DATA(h);
  if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof *m)) return -1;
  if (m->idiag_state == TCP_TIME_WAIT || m->idiag_state == TCP_SYN_RECV) return 0;
  *uid = (long)m->idiag_uid;
  return 1;
}

/* Whether the kernel answers: asked once for this process's own socket,
 * which exists (a kernel without the TCP diag module answers "no such
 * socket" to everything). */
static int diag_works(const struct sockaddr_storage *self, const struct sockaddr_storage *peer) {
  static _Atomic int works = -1;
  int w = atomic_load(&works);
  if (w >= 0) return w;
  endpoint s, p;
  long uid = -1;
  const int v4 = self->ss_family == AF_INET;
  w = (v4 ? as_v4(self, &s) && as_v4(peer, &p) : as_v6(self, &s) && as_v6(peer, &p)) &&
      diag_uid(&s, &p, &uid) == 1 && uid == (long)geteuid();
  atomic_store(&works, w);
  return w;
}

/* --- /proc/net/tcp{,6} ---------------------------------------------------------- */

/* "ADDR:PORT" as /proc/net/tcp{,6} print it: the address's 32-bit words as
 * the kernel holds them (%08X each), the port in host order. */
static void proc_form(const endpoint *e, char *out, size_t len) {
  uint32_t w[4];
  memcpy(w, e->addr, sizeof w);
  if (e->family == AF_INET)
    snprintf(out, len, "%08X:%04X", (unsigned)w[0], ntohs(e->port));
  else
    snprintf(out, len, "%08X%08X%08X%08X:%04X", (unsigned)w[0], (unsigned)w[1], (unsigned)w[2],
             (unsigned)w[3], ntohs(e->port));
}

/* As diag_uid, from the table's lines (established ones only: a TIME_WAIT
 * line of an earlier connection shows uid 0). */
static int proc_uid(const endpoint *local, const endpoint *remote, long *uid) {
  char want_local[48], want_remote[48];
  proc_form(local, want_local, sizeof want_local);
  proc_form(remote, want_remote, sizeof want_remote);
  FILE *f = fopen(local->family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6", "r");
  if (!f) return -1;
  char line[512];
  int found = 0;
  if (fgets(line, sizeof line, f)) /* the header */
    while (!found && fgets(line, sizeof line, f)) {
      char l[48], r[48];
      unsigned st = 0;
      unsigned long u = 0;
      /* sl: local remote st tx:rx tr:when retrnsmt uid ... */
      if (sscanf(line, " %*d: %47s %47s %x %*s %*s %*s %lu", l, r, &st, &u) != 4) continue;
      found = st == TCP_ESTABLISHED && strcasecmp(l, want_local) == 0 && strcasecmp(r, want_remote) == 0;
      if (found) *uid = (long)u;
    }
  fclose(f);
  return found;
}

long p2pk_sock_peer_uid(int fd) {
  struct sockaddr_storage peer = {0}, self = {0};
  socklen_t pl = sizeof peer, sl = sizeof self;
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 ||
      getsockname(fd, (struct sockaddr *)&self, &sl) != 0)
    return -1;
  /* The other end's socket: its local address is our peer, its remote one
   * us. An IPv4 connection is an IPv4 socket there, unless that end is an
   * IPv6 socket of a dual-stack listener, which holds IPv4-mapped addresses. */
  endpoint p4, s4, p6, s6;
  const int have4 = as_v4(&peer, &p4) && as_v4(&self, &s4);
  const int have6 = as_v6(&peer, &p6) && as_v6(&self, &s6);
  int (*lookup)(const endpoint *, const endpoint *, long *) =
      diag_works(&self, &peer) ? diag_uid : proc_uid;
  long uid = -1;
  int found = have4 ? lookup(&p4, &s4, &uid) : 0;
  if (found <= 0 && have6) found = lookup(&p6, &s6, &uid);
  return found > 0 ? uid : -1;
}
