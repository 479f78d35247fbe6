/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/crypto.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "core/param.h"

/* The few libcrypto functions used, as OpenSSL 1.1 and 3.x declare them
 * (EVP_MD, HMAC_CTX and ENGINE are opaque there too). */
typedef struct {
  const void *(*sha256)(void);
  void *(*hmac_new)(void);
  void (*hmac_free)(void *ctx);
  int (*hmac_init)(void *ctx, const void *key, int keylen, const void *md, void *engine);
  int (*hmac_update)(void *ctx, const unsigned char *data, size_t len);
  int (*hmac_final)(void *ctx, unsigned char *md, unsigned int *len);
  int (*rand_bytes)(unsigned char *buf, int num);
  int (*memcmp)(const void *a, const void *b, size_t len);
} crypto_api;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static crypto_api api;
static int loaded;

/* Resolves every function from `lib`; 0 ok, -1 naming the missing one. */
static int resolve(void *lib, const char *name, crypto_api *a, char *why, size_t len) {
  struct {
    void **slot;
    const char *sym;
  } table[] = {
      {(void **)&a->sha256, "EVP_sha256"},         {(void **)&a->hmac_new, "HMAC_CTX_new"},
      {(void **)&a->hmac_free, "HMAC_CTX_free"},   {(void **)&a->hmac_init, "HMAC_Init_ex"},
      {(void **)&a->hmac_update, "HMAC_Update"},   {(void **)&a->hmac_final, "HMAC_Final"},
      {(void **)&a->rand_bytes, "RAND_bytes"},     {(void **)&a->memcmp, "CRYPTO_memcmp"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
    *table[i].slot = dlsym(lib, table[i].sym);
    if (!*table[i].slot) {
      snprintf(why, len, "%s has no %s (not OpenSSL 1.1 or 3)", name, table[i].sym);
      return -1;
    }
  }
  return 0;
}

/* Caller holds `lock`. */
static int load_locked(char *why, size_t len) {
  if (loaded) return 0;
  const int given = p2pk_param_is_set("P2PKIT_CRYPTO_LIB");
  const char *names[2] = {p2pk_param_str("P2PKIT_CRYPTO_LIB"), given ? NULL : "libcrypto.so"};
  char err[256] = "";
  for (int i = 0; i < 2 && names[i]; i++) {
    void *lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = dlerror();
      if (i == 0) snprintf(err, sizeof err, "%s", e ? e : names[i]);
      continue;
    }
    crypto_api a;
    if (resolve(lib, names[i], &a, why, len) != 0) {
      dlclose(lib);
      return -1;
    }
    api = a; /* the library stays loaded for the life of the process */
    loaded = 1;
    return 0;
  }
  snprintf(why, len, "cannot load OpenSSL's libcrypto (%s%s): %s", names[0],
           names[1] ? ", then libcrypto.so" : "", err);
  return -1;
}

int p2pk_crypto_load(char *why, size_t len) {
  pthread_mutex_lock(&lock);
  const int rc = load_locked(why, len);
  pthread_mutex_unlock(&lock);
  return rc;
}

/* The loaded functions, or NULL. */
static const crypto_api *get(void) {
  pthread_mutex_lock(&lock);
  const crypto_api *a = loaded ? &api : NULL;
  pthread_mutex_unlock(&lock);
  return a;
}

int p2pk_hmac_sha256(const void *key, size_t keylen, const p2pk_bytes *parts, int nparts,
                     unsigned char out[P2PK_MAC_BYTES]) {
  memset(out, 0, P2PK_MAC_BYTES);
  const crypto_api *a = get();
  if (!a || keylen > INT_MAX) return -1;
  void *ctx = a->hmac_new();
  if (!ctx) return -1;
  /* A NULL key means "keep the last one" to HMAC_Init_ex: an empty key needs a pointer. */
  static const unsigned char none[1];
  int ok = a->hmac_init(ctx, keylen ? key : none, (int)keylen, a->sha256(), NULL) == 1;
  for (int i = 0; ok && i < nparts; i++)
    ok = parts[i].n == 0 || a->hmac_update(ctx, parts[i].p, parts[i].n) == 1;
  unsigned int n = 0;
  ok = ok && a->hmac_final(ctx, out, &n) == 1 && n == P2PK_MAC_BYTES;
  a->hmac_free(ctx);
  if (!ok) memset(out, 0, P2PK_MAC_BYTES);
  return ok ? 0 : -1;
}

int p2pk_random_bytes(void *buf, size_t n) {
  const crypto_api *a = get();
  if (!a || n > INT_MAX) return -1;
  return a->rand_bytes(buf, (int)n) == 1 ? 0 : -1;
}

int p2pk_ct_equal(const void *x, const void *y, size_t n) {
  const crypto_api *a = get();
  return a && a->memcmp(x, y, n) == 0;
}
