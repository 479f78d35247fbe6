/* SPDX-License-Identifier: BSD-3-Clause */
/* A minimal test harness: each test file is one executable with several
 * TEST() functions; a failed CHECK prints file:line and the values and marks
 * the test failed. GPU tests call T_REQUIRE_GPU(), which exits with 77 (CTest's
 * skip code) and prints the reason when there is no GPU. */
#ifndef P2PK_TEST_H
#define P2PK_TEST_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int t_failed;
extern const char *t_current;

#define T_FAIL(...)                                                  \
  do {                                                               \
    fprintf(stderr, "%s:%d: [%s] ", __FILE__, __LINE__, t_current);  \
    fprintf(stderr, __VA_ARGS__);                                    \
    fputc('\n', stderr);                                             \
    t_failed++;                                                      \
  } while (0)

#define CHECK(cond)                                          \
  do {                                                       \
    if (!(cond)) T_FAIL("CHECK(%s) failed", #cond);          \
  } while (0)
#define CHECK_EQ(a, b)                                                              \
  do {                                                                              \
    long long a_ = (long long)(a), b_ = (long long)(b);                             \
    if (a_ != b_) T_FAIL("%s == %s failed: %lld != %lld", #a, #b, a_, b_);          \
  } while (0)
#define CHECK_STR(a, b)                                                             \
  do {                                                                              \
    const char *a_ = (a), *b_ = (b);                                                \
    if (!a_ || !b_ || strcmp(a_, b_) != 0)                                          \
      T_FAIL("%s == %s failed: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",       \
             b_ ? b_ : "(null)");                                                   \
  } while (0)
#define CHECK_NEAR(a, b, tol)                                                       \
  do {                                                                              \
    double a_ = (double)(a), b_ = (double)(b);                                      \
    if (!(fabs(a_ - b_) <= (tol))) T_FAIL("%s ~ %s failed: %g vs %g", #a, #b, a_, b_); \
  } while (0)
#define CHECK_OK(call)                                                              \
  do {                                                                              \
    p2pkit_status_t s_ = (call);                                                    \
    if (s_ != P2PKIT_SUCCESS)                                                       \
      T_FAIL("%s returned %s: %s", #call, p2pkit_strerror(s_), p2pkit_last_error()); \
  } while (0)

typedef void (*t_fn)(void);
typedef struct {
  const char *name;
  t_fn fn;
} t_case;

#define TEST(name) static void name(void)
#define T_CASE(name) {#name, name}

/* Run `cases` in order, printing each verdict; the names of the failed ones
 * go to `failed` (comma separated). Returns how many failed. For tests that
 * run their cases inside a shared set-up instead of through T_MAIN. */
static inline int t_run_cases(const t_case *cases, size_t n, char *failed, size_t cap) {
  int nfailed = 0;
  failed[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    int before = t_failed;
    t_current = cases[i].name;
    cases[i].fn();
    int ok = t_failed == before;
    printf("%-40s %s\n", cases[i].name, ok ? "ok" : "FAILED");
    if (!ok) {
      size_t at = strlen(failed);
      snprintf(failed + at, cap - at, "%s%s", nfailed ? ", " : "", cases[i].name);
      nfailed++;
    }
  }
  return nfailed;
}

/* Every name on the command line is one of the n cases (`stride` bytes
 * apart, each beginning with its t_case); else it says which is not and
 * lists the cases (a misspelt name must not pass by running nothing). */
static inline int t_names_known(int argc, char **argv, const t_case *first, size_t n, size_t stride) {
  int ok = 1;
  for (int a = 1; a < argc; a++) {
    size_t i = 0;
    while (i < n && strcmp(argv[a], ((const t_case *)(const void *)((const char *)first + i * stride))->name) != 0)
      i++;
    if (i < n) continue;
    ok = 0;
    fprintf(stderr, "unknown test case '%s'; the cases are:", argv[a]);
    for (i = 0; i < n; i++)
      fprintf(stderr, " %s", ((const t_case *)(const void *)((const char *)first + i * stride))->name);
    fputc('\n', stderr);
  }
  return ok;
}

/* Runs every case, or those named on the command line (2 for a name that
 * is no case). */
static inline int t_main_cases(int argc, char **argv, const t_case *cases, size_t n) {
  if (!t_names_known(argc, argv, cases, n, sizeof cases[0])) return 2;
  int nfail_cases = 0;
  for (size_t i = 0; i < n; i++) {
    int want = argc == 1;
    for (int a = 1; a < argc; a++)
      if (strcmp(argv[a], cases[i].name) == 0) want = 1;
    if (!want) continue;
    t_current = cases[i].name;
    int before = t_failed;
    cases[i].fn();
    printf("%-40s %s\n", cases[i].name, t_failed == before ? "ok" : "FAILED");
    if (t_failed != before) nfail_cases++;
  }
  return nfail_cases ? 1 : 0;
}

#define T_MAIN(...)                                                          \
  int t_failed;                                                              \
  const char *t_current;                                                     \
  int main(int argc, char **argv) {                                          \
    static const t_case cases[] = {__VA_ARGS__};                             \
    return t_main_cases(argc, argv, cases, sizeof cases / sizeof cases[0]);  \
  }

/* Path of a file under tests/data (set by CMake). */
#ifndef P2PK_TEST_DATA
#define P2PK_TEST_DATA "tests/data"
#endif

#endif
