/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests that start ranks on loopback: a port nobody listens on. */
#ifndef P2PK_TEST_NET_H
#define P2PK_TEST_NET_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
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

/* The ranks of a multi-process test: child k runs run(k, arg, fd), which
 * writes one report of `size` bytes to fd and exits (it never returns).
 * Report k lands at reps + k * size, zeroed when none came; a child that has
 * not reported within limit_ms of the start is killed. Every child is
 * reaped. Returns the mask of the children that did not report, or -1 when
 * a pipe or a child cannot be made (those started are killed). */
typedef void (*t_child_fn)(int k, void *arg, int fd);

static inline long long t_run_children(int n, t_child_fn run, void *arg, void *reps, size_t size,
                                       int limit_ms) {
  enum { MAXC = 64 };
  pid_t pid[MAXC];
  int in[MAXC];
  if (n < 1 || n > MAXC) return -1;
  for (int k = 0; k < n; k++) {
    int p[2] = {-1, -1};
    pid[k] = -1;
    if (pipe(p) == 0) {
      fflush(NULL);
      pid[k] = fork();
    }
    if (pid[k] < 0) { /* no pipe or no child: stop those already started */
      if (p[0] >= 0) close(p[0]), close(p[1]);
      for (int j = 0; j < k; j++) kill(pid[j], SIGKILL), waitpid(pid[j], NULL, 0), close(in[j]);
      return -1;
    }
    if (pid[k] == 0) { /* it holds its own write end and no other pipe */
      for (int j = 0; j <= k; j++) close(j < k ? in[j] : p[0]);
      run(k, arg, p[1]);
      _exit(4); /* run returned: a bug in the test */
    }
    close(p[1]);
    in[k] = p[0];
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  long long missing = 0;
  for (int k = 0; k < n; k++) {
    char *rep = (char *)reps + (size_t)k * size;
    memset(rep, 0, size);
    clock_gettime(CLOCK_MONOTONIC, &t);
    long left = limit_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
    struct pollfd pf = {in[k], POLLIN, 0};
    if (!(left > 0 && poll(&pf, 1, (int)left) == 1 && read(in[k], rep, size) == (ssize_t)size)) {
      missing |= 1LL << k;
      kill(pid[k], SIGKILL);
    }
    close(in[k]);
  }
  for (int k = 0; k < n; k++) waitpid(pid[k], NULL, 0);
  return missing;
}

#endif
