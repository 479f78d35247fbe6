/* Tests that start ranks on loopback: a port nobody listens on. */
#ifndef P2PK_TEST_NET_H
#define P2PK_TEST_NET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* A socket bound to an ephemeral loopback port (its address in *a), or -1. */
static inline int bind_loopback(struct sockaddr_in *a) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  memset(a, 0, sizeof *a);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t l = sizeof *a;
  if (fd < 0 || bind(fd, (struct sockaddr *)a, sizeof *a) != 0 ||
      getsockname(fd, (struct sockaddr *)a, &l) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

/* An ephemeral loopback port, free when asked (-1 on failure). */
static inline int free_port(void) {
  struct sockaddr_in a;
  int fd = bind_loopback(&a);
  if (fd < 0) return -1;
  close(fd);
  return ntohs(a.sin_port);
}

#endif
