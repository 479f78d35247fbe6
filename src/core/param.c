/* SPDX-License-Identifier: BSD-3-Clause */
#include "core/param.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* P2PKIT_SM_COPY_CONFIG's grammar lives with the kernels that read it
 * (xfer/smcfg.c); the registry calls it so that every reader of the setting
 * refuses the same texts. */
int p2pk_sm_config_check(const char *text, char *why, size_t len);

int p2pk_param_path(const char *pattern, char *path, size_t len) {
  size_t o = 0;
  for (const char *p = pattern; *p; p++) {
    char host[64] = "host", pid[24];
    const char *piece = NULL;
    if (p[0] == '%' && p[1] == 'p') {
      snprintf(pid, sizeof pid, "%d", (int)getpid());
      piece = pid;
    } else if (p[0] == '%' && p[1] == 'h') {
      gethostname(host, sizeof host - 1);
      piece = host;
    }
    const size_t n = piece ? strlen(piece) : 1;
    if (o + n >= len) return -1;
    memcpy(path + o, piece ? piece : p, n);
    o += n;
    p += piece != NULL;
  }
  path[o] = '\0';
  return 0;
}

/* P2PKIT_DEBUG_FILE's grammar: a pattern that, %h and %p expanded, fits a
 * path (the log opens the file at its first line, log.c). */
static int path_check(const char *pattern, char *why, size_t len) {
  char path[PATH_MAX];
  if (p2pk_param_path(pattern, path, sizeof path) == 0) return 0;
  snprintf(why, len, "the path is longer than %d bytes once %%h and %%p are expanded", PATH_MAX - 1);
  return -1;
}

#define RANGE(a, b) .ranged = 1, .lo = (a), .hi = (b)
#define RANGE_OR_0(a, b) RANGE(a, b), .or_zero = 1
#define KiB(x) ((int64_t)(x) << 10)
#define MiB(x) ((int64_t)(x) << 20)
#define GiB(x) ((int64_t)(x) << 30)
/* The top of a size that is a threshold or a count of bytes with no limit
 * of its own: more than any GPU holds, so larger would mean the same. */
#define TiB(x) ((int64_t)(x) << 40)

/* Every setting p2pkit reads. Add new ones here, nowhere else; give each
 * the range, words or grammar its readers accept. */
static const p2pk_param_def params[] = {
    {"P2PKIT_DEBUG", "WARN", "log level: NONE, WARN, INFO or TRACE", .kind = P2PK_PARAM_STR, .words = "NONE|WARN|INFO|TRACE"},
    {"P2PKIT_DEBUG_SUBSYS", "ALL",
     "subsystems to log, comma separated (INIT,TOPO,XFER,COLL,BOOT,BENCH,ENV); ^ excludes", .kind = P2PK_PARAM_STR, .words = "INIT|TOPO|XFER|COLL|BOOT|BENCH|ENV|ALL", .list = 1},
    {"P2PKIT_DEBUG_FILE", "", "write the log to this file instead of stderr (%h host, %p pid): a new file is created 0600; an existing one is appended to only when it is a regular file of this user's, mode 0600 or stricter, with no other name (never a link, pipe or device); else one line on stderr says why and the log goes to stderr", .kind = P2PK_PARAM_STR, .valid = path_check},
    {"P2PKIT_TOPO_FILE", "", "use this recorded topology instead of discovering the machine", .kind = P2PK_PARAM_STR},
    {"P2PKIT_TOPO_DUMP_FILE", "", "write the discovered topology in NCCL's XML format here", .kind = P2PK_PARAM_STR},
    {"P2PKIT_NVML_LIB", "libnvidia-ml.so.1", "NVML library loaded at run time", .kind = P2PK_PARAM_STR},
    {"P2PKIT_NCCL_LIB", "libnccl.so.2", "NCCL library loaded at run time: the NCCL path, the comparisons of `p2pkit perf --vs-nccl`, the doctor's probe", .kind = P2PK_PARAM_STR},
    {"P2PKIT_NCCL", "auto", "which calls NCCL carries: auto (where no measured p2pkit path beats it: 3-4 ranks from the sizes measured slower, more than 4 ranks, the types only NCCL has, communicators spanning hosts; without NCCL installed p2pkit's own paths, one INFO line), 0 (never: p2pkit's own paths, those types refused, spanning hosts refused), 1 (every call); every rank the same", .kind = P2PK_PARAM_STR, .words = "auto|0|1"},
    {"P2PKIT_CRYPTO_LIB", "libcrypto.so.3", "OpenSSL's libcrypto, loaded at run time when a job secret is set: the rendezvous proves the secret with its HMAC-SHA256 (not set: libcrypto.so.3, then libcrypto.so)", .kind = P2PK_PARAM_STR},
    {"P2PKIT_SYSFS_ROOT", "", "read /sys and /proc under this root (tests, recorded machines)", .kind = P2PK_PARAM_STR},
    {"P2PKIT_P2P_DISABLE", "0", "1: never use direct P2P; stage through host memory", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_P2P_LEVEL", "",
     "farthest path P2P may use: LOC (never), NVL, PIX, PXB, PHB (nvidia-smi's NODE too) or "
     "SYS, as NCCL_P2P_LEVEL; copies and communicators alike; empty: any pair the driver allows", .kind = P2PK_PARAM_STR, .words = "LOC|NVL|PIX|PXB|PHB|SYS"},
    {"P2PKIT_STAGE_CHUNK", "8M", "chunk size of the host-staged pipeline", .kind = P2PK_PARAM_SIZE, RANGE(KiB(4), GiB(1))},
    {"P2PKIT_STAGE_DEPTH", "4", "chunks in flight in the host-staged pipeline (2 or more)", .kind = P2PK_PARAM_INT, RANGE(2, 16)},
    {"P2PKIT_SM_COPY_MAX", "0",
     "copies up to this size use an SM kernel instead of the copy engine (0: auto)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_SM_COPY_CONFIG", "", "SM copy kernel, e.g. kind=chunk,hint=cs,bps=2,threads=512,unroll=4 or kind=tma,bps=1,tile=16K,stages=4 (empty: built-in default)", .kind = P2PK_PARAM_STR, .valid = p2pk_sm_config_check},
    {"P2PKIT_SHARE_GPUS", "0", "testing: let several ranks of a process-per-GPU job share one GPU (their kernels take turns on it: for checking results with more ranks than GPUs, never for speed); every rank the same (1: on)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_HOSTID", "", "this rank's host id for communicators spanning hosts (empty: hostname and boot id, as NCCL's host hash); ranks with different ids count as different hosts, so one machine can simulate several; the NCCL path hands NCCL the same value as NCCL_HOSTID unless that is set", .kind = P2PK_PARAM_STR},
    {"P2PKIT_TIMEOUT", "600", "seconds a communicator waits for a peer rank before failing: its rendezvous and exchanges, p2pkit's waits on the host and in kernels, NCCL's init (600 as PyTorch's for NCCL, so a rank minutes late, writing a checkpoint, does not break the job); a communicator's own timeout_s wins (p2pkit_config_t, p2pkit_comm_opts_t, Comm(timeout_s=), the torch group's timeout=)", .kind = P2PK_PARAM_INT, RANGE(1, 86400)},
    {"P2PKIT_TRACE_RING", "2048", "calls each communicator remembers for its desync report (`p2pkit trace`): number, collective, type, count, root or peer, operation, path, stream, enqueue time; rounded up to a power of two (0: none, the report holds only who and where)", .kind = P2PK_PARAM_INT, RANGE(0, 65536)},
    {"P2PKIT_TRACE_DIR", "", "where each rank writes its desync report on a timeout, an asynchronous error, an abort, p2pkit_comm_dump_trace or P2PKIT_TRACE_SIGNAL: a new file (0600) per rank and communicator, never through a link; a missing directory is made (0700, one level); a directory of another user, or one every user may write without the sticky bit, is refused (empty: /tmp/p2pkit-trace-<uid>, made 0700; off: no reports)", .kind = P2PK_PARAM_STR},
    {"P2PKIT_TRACE_SIGNAL", "0", "a signal (USR1 or USR2) that makes every communicator of the process write its desync report, for a job that hangs; not taken when the application handles (or ignores) that signal already (0: none)", .kind = P2PK_PARAM_STR, .words = "0|USR1|USR2|SIGUSR1|SIGUSR2"},
    {"P2PKIT_ALGO", "", "force the all-reduce algorithm: oneshot, twoshot or staged (twoshot: broadcast and reduce take their rooted two-shot too)", .kind = P2PK_PARAM_STR, .words = "oneshot|twoshot|staged"},
    {"P2PKIT_ROOTED_TWOSHOT_MIN", "4M", "broadcast and reduce on more than 2 ranks over P2P take the rooted two-shot from this size: the root scatters (gathers) n - 1 shards and their owners forward them to each other (reduce them), so the root's links carry the message once, not once per peer; P2PKIT_ALGO=twoshot forces it at any size and rank count; every rank the same (0: never)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_BUFFER_SIZE", "0", "per-rank collective buffer: device scratch over P2P, host staging part without (0: 128M per peer over P2P, at most 512M; 64M staged); spanning hosts, the hierarchical path's scratch (0: 128M)", .kind = P2PK_PARAM_SIZE, RANGE(0, GiB(16))},
    {"P2PKIT_JOB_SECRET", "", "rendezvous secret every rank must know (a launcher's run id never is one); proved, never sent; required when MASTER_ADDR is not a loopback address, and then of 128 bits: 32 hex digits or 22 other characters (p2pkit env --new-secret)", .kind = P2PK_PARAM_STR, .secret = 1},
    {"P2PKIT_ALGO_TABLE", "", "all-reduce algorithm table file (as `p2pkit perf` writes it)", .kind = P2PK_PARAM_STR},
    {"P2PKIT_PROTO", "", "force the all-reduce protocol: ll, ll128 or simple", .kind = P2PK_PARAM_STR, .words = "ll|ll128|simple"},
    {"P2PKIT_LL128_X2", "1", "LL128 grids capped or set within one block per SM, whose warps have more than one pass: each warp works two passes an iteration, their loads together (0: one pass at a time)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_LL128_MAX", "32M", "largest LL128 message summed over peers; sets the LL128 scratch (about 2.13 x this per GPU; 0: no LL128)", .kind = P2PK_PARAM_SIZE, RANGE(0, GiB(1))},
    {"P2PKIT_PDL", "1", "collective kernels over P2P launch as programmatic dependent launches on sm_90+: a kernel's launch overlaps the end of the stream's previous kernel (0: off)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_COLL_BLOCKS", "0", "all-reduce grid size (0: from the algorithm table; at most half the mailboxes, a block uses 2)", .kind = P2PK_PARAM_INT, RANGE(0, 1024)},
    {"P2PKIT_MAX_BLOCKS", "0", "most thread blocks any collective kernel of a communicator takes over P2P, so collectives leave multiprocessors to compute beside them, like NCCL_MAX_CTAS; every rank the same (0: no cap; p2pkit_comm_set_max_blocks changes it later)", .kind = P2PK_PARAM_INT, RANGE(0, 1024)},
    {"P2PKIT_COLL_THREADS", "0", "all-reduce threads per block, rounded down to whole warps (0: from the algorithm table; the kernels are built for at most 512)", .kind = P2PK_PARAM_INT, RANGE_OR_0(64, 512)},
    {"P2PKIT_COLL_CHUNK", "0", "all-reduce bytes per mailbox use, rounded down to 16 bytes, at most a mailbox (0: from the algorithm table)", .kind = P2PK_PARAM_SIZE, RANGE_OR_0(16, GiB(1))},
    {"P2PKIT_COLL_MAILBOXES", "0", "P2P mailboxes per peer, 16..512 (0: 4 per multiprocessor; a block uses 2)", .kind = P2PK_PARAM_INT, RANGE_OR_0(16, 512)},
    {"P2PKIT_BCAST_CE_MIN", "32M", "broadcast over the copy engines from this size: in a group of one process's GPUs (under a CUDA graph straight into the peers' outputs), or with a process per GPU (not set: 16M there); not set, under a CUDA graph: 128M (0: never)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_STAGED_CE_MIN", "16M", "staged all-reduce (no P2P): copy engines through host memory from this size, in a group of one process's GPUs or process per GPU (0: never)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_STAGED_CE_CHUNK", "4M", "chunk of the copy-engine staged all-reduce, rounded up to 4K (one process: at most half the staging data area)", .kind = P2PK_PARAM_SIZE, RANGE(KiB(4), MiB(64))},
    {"P2PKIT_STAGED_CE_DEPTH", "4", "chunks of the copy-engine staged all-reduce in flight per peer, 2..8", .kind = P2PK_PARAM_INT, RANGE(2, 8)},
    {"P2PKIT_CE_ALLREDUCE_MIN", "64M", "all-reduce over P2P, in a group of one process's GPUs or with a process per GPU (not set: 256M there; 512M in one process under a CUDA graph, the results straight into the peers' outputs): the copy engines move the data (the SMs only reduce locally) from this size (0: never; more than 2 ranks: only when set)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_CE_REDUCE_SCATTER_MIN", "64M", "reduce-scatter over P2P, in a group of one process's GPUs or with a process per GPU (not set: 128M in one process under a CUDA graph): the copy engines from this share size, bytes per rank (0: never; more than 2 ranks: only when set)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_CE_ALL_GATHER_MIN", "64M", "all-gather over the copy engines from this share size, bytes per rank: in a group of one process's GPUs (under a CUDA graph straight into the peers' outputs), or with a process per GPU through the landing slots (not set: 256M there) (0: never; more than 2 ranks: only when set, but 64M for one process eagerly)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_CE_ALL_TO_ALL_MIN", "32M", "all-to-all over the copy engines from this block size, bytes per peer: in a group of one process's GPUs out of place (under a CUDA graph straight into the peers' outputs), or with a process per GPU through the landing slots (not set: 256M there) (0: never; more than 2 ranks: only when set, but 64M for one process eagerly)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_CE_REDUCE_MIN", "64M", "reduce over P2P, in a group of one process's GPUs or with a process per GPU (not set: 64M there too, 128M in one process under a CUDA graph): the copy engines from this size (0: never; more than 2 ranks: only when set)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_CE_CHUNK", "0", "chunk of the copy-engine collectives over P2P (0: half a rank's shard, 16M..64M; the landing buffer, (ranks - 1) x depth chunks, stays within P2PKIT_CE_LAND; with a process per GPU the slots are part of the scratch, made at init, and as large as that cap allows when not set)", .kind = P2PK_PARAM_SIZE, RANGE_OR_0(KiB(4), GiB(4))},
    {"P2PKIT_CE_LAND", "192M", "the copy engines' landing slots over P2P per GPU, all peers and depths together (16M..4G; every rank the same): larger slots allow larger chunks (send/recv with a process per GPU takes them, the rest with P2PKIT_CE_CHUNK); on 2x H200 no default path got faster with them", .kind = P2PK_PARAM_SIZE, RANGE(MiB(16), GiB(4))},
    {"P2PKIT_PERF_HOST_TIME", "0", "p2pkit perf: print on stderr, per timed repeat and process, how long the host took to enqueue a call beside the GPU's time per call (1: on)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_CEP_TRACE", "0", "process per GPU: time each step of every collective and send/recv over the landing slots (copies, waits, reduces, copies out) with CUDA events and log the call's timeline at INFO (COLL) at the next such call; a diagnostic: each call waits for the one before it to be logged", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_CEP_MEMOPS", "1", "process per GPU, copy engines: write the posts to the peers as stream memory operations (cuStreamWriteValue64), which need no multiprocessor (0: one-thread kernels)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_CE_DEPTH", "3", "chunks of the copy-engine collectives over P2P in flight per peer, 2..8 (process per GPU, not set: 2)", .kind = P2PK_PARAM_INT, RANGE(2, 8)},
    {"P2PKIT_LAUNCH_THREADS", "1", "one process driving several GPUs: inside a group, launch each GPU's kernels from a thread of its own, at once (0: every launch from the calling thread, at the call)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_LAUNCH_SPIN_US", "1000", "how long a launch thread waits for work, spinning, before it sleeps (its next job is then made by the calling thread, and it wakes)", .kind = P2PK_PARAM_INT, RANGE(0, 3600LL * 1000 * 1000)},
    {"P2PKIT_SENDRECV_CE_MIN", "4M", "send/recv over the copy engines from this size: between GPUs driven by one process, or with a process per GPU through the landing slots (not set: 256M there; one process under a CUDA graph: 64M, both ends in one group) (0: never)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_SENDRECV_DIRECT", "1", "process per GPU, send/recv, out-of-place all-to-all and all-gather over the copy engines: a receive (a block) into a registered buffer (p2pkit_comm_register) may take the sender's copy straight in, with no landing slot and no copy out, when the two hosts agree in time (0: always through the landing slots)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_SENDRECV_MAP", "0", "process per GPU, with P2PKIT_SENDRECV_DIRECT: a receive (a block) into a buffer that is not registered may go straight in too; its allocation is shared through CUDA IPC the first time and the sender keeps it mapped until the communicator is destroyed, so the caller promises not to free such a buffer while the communicator lives (as a caching allocator never does); every rank the same (1: on, 0: registered buffers only)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
    {"P2PKIT_SENDRECV_DIRECT_WAIT_US", "2000", "process per GPU: how long a send over the copy engines waits on the host for its receiver to say where its registered buffer is (and a receive into one for its sender's decision) before the call goes through the landing slots; after a wait in vain the pair waits not at all for its next 16 calls (0: never wait)", .kind = P2PK_PARAM_INT, RANGE(0, 1000000)},
    {"P2PKIT_BCAST_SELF_CE", "8M", "under a CUDA graph, a broadcast root out of place whose call takes the kernels copies its own buffer by copy engine beside the kernel from this size (0: the kernel copies it; eagerly it always does)", .kind = P2PK_PARAM_SIZE, RANGE(0, TiB(1))},
    {"P2PKIT_BUCKET_SIZE", "25M", "gradient sync: bytes per bucket (as DDP's bucket_cap_mb)", .kind = P2PK_PARAM_SIZE, RANGE(1, TiB(1))},
    {"P2PKIT_FIRST_BUCKET_SIZE", "1M", "gradient sync: bytes of the first bucket (launched earliest)", .kind = P2PK_PARAM_SIZE, RANGE(1, TiB(1))},
    {"P2PKIT_TORCH_ASYNC_ERROR_HANDLING", "2", "the PyTorch backend's watchdog, when a collective fails on the GPU or outlives the group's timeout (as TORCH_NCCL_ASYNC_ERROR_HANDLING): 0 records the error (work.wait() and the next call raise it), 1 aborts the communicator and ends the process, 2 aborts the communicator (the default; later calls on the group raise), 3 ends the process without an abort", .kind = P2PK_PARAM_INT, RANGE(0, 3)},
    {"P2PKIT_GRAD_SYNC_BLOCKS", "0", "gradient sync: most thread blocks of a bucket's all-reduce kernel, which shares the GPU with the backward pass (0: half the multiprocessors, rounded down to 8; -1: no cap)", .kind = P2PK_PARAM_INT, RANGE(-1, 1024)},
    {"P2PKIT_LIB", "", "Python package: the libp2pkit.so to load (empty: the one installed with the package, else the build tree's)", .kind = P2PK_PARAM_STR},
    {"P2PKIT_TORCH_SAME_STREAM", "0", "the PyTorch backend: 1 runs every call on the caller's current stream, asynchronous ones and sends and receives too, instead of the group's own streams (no overlap with compute; an isend and an irecv between two ranks then wait for each other)", .kind = P2PK_PARAM_INT, RANGE(0, 1)},
};

#define NPARAMS (sizeof params / sizeof params[0])

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *cache[NPARAMS];
static int cached[NPARAMS];
static int warned[NPARAMS]; /* a refused value was read as the default, and logged */

/* The registry entry of `name`, or -1. */
static long find(const char *name) {
  for (size_t i = 0; i < NPARAMS; i++)
    if (strcmp(params[i].name, name) == 0) return (long)i;
  return -1;
}

static size_t index_of(const char *name) {
  const long i = find(name);
  if (i >= 0) return (size_t)i;
  fprintf(stderr, "p2pkit: internal error: setting %s is not in the registry\n", name);
  abort();
}

const p2pk_param_def *p2pk_param_def_of(const char *name) { return &params[index_of(name)]; }

const p2pk_param_def *p2pk_param_find(const char *name) {
  const long i = find(name);
  return i >= 0 ? &params[i] : NULL;
}

const char *p2pk_param_str(const char *name) {
  size_t i = index_of(name);
  pthread_mutex_lock(&cache_lock);
  if (!cached[i]) {
    const char *v = getenv(name);
    cache[i] = v;
    cached[i] = 1;
  }
  const char *v = cache[i] ? cache[i] : params[i].def;
  pthread_mutex_unlock(&cache_lock);
  return v;
}

int p2pk_param_is_set(const char *name) {
  size_t i = index_of(name);
  p2pk_param_str(name);
  pthread_mutex_lock(&cache_lock);
  int set = cache[i] != NULL;
  pthread_mutex_unlock(&cache_lock);
  return set;
}

int p2pk_parse_size(const char *text, size_t *bytes_p) {
  if (!text || !*text) return -1;
  if (text[0] == '-' || text[0] == '+') return -1;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(text, &end, 10);
  if (end == text || errno == ERANGE) return -1;
  unsigned long long mul = 1;
  if (*end) {
    char c = (char)(*end | 0x20);
    if (c == 'k') mul = 1ULL << 10;
    else if (c == 'm') mul = 1ULL << 20;
    else if (c == 'g') mul = 1ULL << 30;
    else if (c == 't') mul = 1ULL << 40;
    else if (c == 'b' && end[1] == '\0') mul = 1;
    else return -1;
    end++;
    if (mul > 1 && (strcasecmp(end, "") == 0 || strcasecmp(end, "b") == 0 ||
                    strcasecmp(end, "ib") == 0))
      end += strlen(end);
    if (*end) return -1;
  }
  if (v != 0 && mul > ~0ULL / v) return -1;
  *bytes_p = (size_t)(v * mul);
  return 0;
}

/* A whole number and nothing else (no suffix, within int64); 0 on success. */
int p2pk_parse_int(const char *text, long long *out) {
  errno = 0;
  char *end = NULL;
  long long x = strtoll(text, &end, 10);
  if (end == text || *end || errno == ERANGE) return -1;
  *out = x;
  return 0;
}

int p2pk_param_first_refusal(const char *name) {
  const size_t i = index_of(name);
  pthread_mutex_lock(&cache_lock);
  const int first = !warned[i];
  warned[i] = 1;
  pthread_mutex_unlock(&cache_lock);
  return first;
}

/* `text` is one of the '|'-separated words (any case). */
static int one_of(const char *words, const char *text) {
  size_t n = strlen(text);
  for (const char *w = words; *w;) {
    size_t len = strcspn(w, "|");
    if (len == n && strncasecmp(w, text, n) == 0) return 1;
    w += len + (w[len] == '|');
  }
  return 0;
}

/* A value as error messages quote it: whole up to 160 bytes, else its start and "...". */
static const char *quoted(const char *text, char *buf, size_t len) {
  if (strlen(text) <= 160) return text;
  snprintf(buf, len, "%.150s...", text);
  return buf;
}

/* A size as the registry's ranges say it: "16M", "4G", "4096". */
static void size_text(int64_t v, char *buf, size_t len) {
  static const char units[] = "KMGT";
  int u = -1;
  while (v && u < 3 && v % 1024 == 0) v /= 1024, u++;
  if (u < 0) snprintf(buf, len, "%lld", (long long)v);
  else snprintf(buf, len, "%lld%c", (long long)v, units[u]);
}

void p2pk_param_range_text(const p2pk_param_def *d, char *buf, size_t len) {
  if (len) buf[0] = '\0';
  if (!d->ranged || d->kind == P2PK_PARAM_STR) return;
  char lo[24], hi[24];
  if (d->kind == P2PK_PARAM_SIZE) {
    size_text(d->lo, lo, sizeof lo);
    size_text(d->hi, hi, sizeof hi);
  } else {
    snprintf(lo, sizeof lo, "%lld", (long long)d->lo);
    snprintf(hi, sizeof hi, "%lld", (long long)d->hi);
  }
  snprintf(buf, len, "%sa %s from %s to %s", d->or_zero ? "0 or " : "",
           d->kind == P2PK_PARAM_SIZE ? "size" : "whole number", lo, hi);
}

static int in_range(const p2pk_param_def *d, long long x) {
  return !d->ranged || (x >= d->lo && x <= d->hi) || (d->or_zero && x == 0);
}

static int valid_int(const p2pk_param_def *d, const char *text, char *why, size_t len) {
  long long x = 0;
  if (p2pk_parse_int(text, &x) == 0 && in_range(d, x)) return 0;
  char q[160], range[96];
  p2pk_param_range_text(d, range, sizeof range);
  snprintf(why, len, "%s='%s' must be %s", d->name, quoted(text, q, sizeof q),
           range[0] ? range : "a whole number");
  return -1;
}

static int valid_size(const p2pk_param_def *d, const char *text, char *why, size_t len) {
  size_t b = 0;
  char q[160], range[96];
  const int parsed = p2pk_parse_size(text, &b) == 0;
  if (parsed && b <= (uint64_t)INT64_MAX && in_range(d, (long long)b)) return 0;
  p2pk_param_range_text(d, range, sizeof range);
  if (!parsed)
    snprintf(why, len, "%s='%s' is not a size (bytes, with K, M, G or T)%s%s", d->name,
             quoted(text, q, sizeof q), range[0] ? ": it must be " : "", range);
  else
    snprintf(why, len, "%s='%s' is out of range: it must be %s", d->name,
             quoted(text, q, sizeof q), range);
  return -1;
}

/* A comma-separated list of the words, a leading ^ excluding them. */
static int valid_list(const p2pk_param_def *d, const char *text, char *why, size_t len) {
  char buf[256], *save = NULL;
  int ok = strlen(text) < sizeof buf - 1;
  snprintf(buf, sizeof buf, "%s", text + (text[0] == '^'));
  for (char *t = strtok_r(buf, ",", &save); ok && t; t = strtok_r(NULL, ",", &save))
    ok = one_of(d->words, t);
  if (ok) return 0;
  char q[160], list[160];
  size_t o = 0;
  for (const char *w = d->words; *w && o < sizeof list - 4; w++)
    o += (size_t)snprintf(list + o, sizeof list - o, *w == '|' ? ", " : "%c", *w);
  snprintf(why, len, "%s='%s': not a list of %s (comma separated, a leading ^ excludes)", d->name,
           quoted(text, q, sizeof q), list);
  return -1;
}

static int valid_str(const p2pk_param_def *d, const char *text, char *why, size_t len) {
  if (!text[0]) return 0; /* the default */
  char q[160];
  if (d->list) return valid_list(d, text, why, len);
  if (d->words && !one_of(d->words, text)) {
    char list[160];
    size_t o = 0;
    for (const char *w = d->words; *w && o < sizeof list - 4; w++)
      o += (size_t)snprintf(list + o, sizeof list - o, *w == '|' ? ", " : "%c", *w);
    snprintf(why, len, "%s='%s' is not one of %s", d->name, quoted(text, q, sizeof q), list);
    return -1;
  }
  char detail[160] = "";
  if (d->valid && d->valid(text, detail, sizeof detail) != 0) {
    snprintf(why, len, "%s='%s': %s", d->name, quoted(text, q, sizeof q), detail);
    return -1;
  }
  return 0;
}

int p2pk_param_valid(const p2pk_param_def *d, const char *text, char *why, size_t len) {
  if (d->kind == P2PK_PARAM_INT) return valid_int(d, text, why, len);
  if (d->kind == P2PK_PARAM_SIZE) return valid_size(d, text, why, len);
  return valid_str(d, text, why, len);
}

const char *p2pk_param_shown(const char *name) {
  const p2pk_param_def *d = &params[index_of(name)];
  return d->secret && p2pk_param_is_set(name) ? "(set, hidden)" : p2pk_param_str(name);
}

/* Variables of the project's build and test scripts and test programs, not
 * settings (the Python package's are settings: they are in the registry). */
static const char *const tool_vars[] = {
    "P2PKIT_CMAKE_ARGS", "P2PKIT_SANITIZE",  "P2PKIT_FUZZ_BUILD", "P2PKIT_NO_FUZZ",
    "P2PKIT_NO_TSAN",    "P2PKIT_NO_ANALYZE", "P2PKIT_TEST_BUILD", "P2PKIT_TEST_NRANKS",
    "P2PKIT_CONF_ONLY",  "P2PKIT_CONF_QUICK", "P2PKIT_CONF_RANKS", "P2PKIT_CONF_FULL", "P2PKIT_TEST_LATE"};

/* Edit distance of a and b, stopping early above `cap`. */
static size_t distance(const char *a, const char *b, size_t cap) {
  size_t la = strlen(a), lb = strlen(b);
  if (la > 63 || lb > 63) return cap + 1;
  size_t row[64];
  for (size_t j = 0; j <= lb; j++) row[j] = j;
  for (size_t i = 1; i <= la; i++) {
    size_t diag = row[0], best = row[0] = i;
    for (size_t j = 1; j <= lb; j++) {
      size_t up = row[j];
      size_t v = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < v) v = up + 1;
      if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
      row[j] = v;
      diag = up;
      if (v < best) best = v;
    }
    if (best > cap) return cap + 1;
  }
  return row[lb];
}

extern char **environ;

int p2pk_param_unknown(char *out, size_t len) {
  int n = 0;
  size_t used = 0;
  if (out && len) out[0] = '\0';
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "P2PKIT_", 7) != 0) continue;
    const char *eq = strchr(*e, '=');
    size_t nl = eq ? (size_t)(eq - *e) : strlen(*e);
    char name[96];
    if (nl >= sizeof name) nl = sizeof name - 1;
    memcpy(name, *e, nl);
    name[nl] = '\0';
    int known = find(name) >= 0;
    for (size_t i = 0; i < sizeof tool_vars / sizeof tool_vars[0] && !known; i++)
      known = strcmp(tool_vars[i], name) == 0;
    if (known) continue;
    const char *near = NULL;
    size_t best = 3; /* at most 2 edits away */
    for (size_t i = 0; i < NPARAMS; i++) {
      size_t d = distance(name, params[i].name, best);
      if (d < best) best = d, near = params[i].name;
    }
    if (out && used < len) {
      int w = near ? snprintf(out + used, len - used, "%s%s (did you mean %s?)", n ? ", " : "", name,
                              near)
                   : snprintf(out + used, len - used, "%s%s", n ? ", " : "", name);
      if (w > 0) used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
    n++;
  }
  return n;
}

size_t p2pk_param_count(void) { return NPARAMS; }

const p2pk_param_def *p2pk_param_at(size_t i) { return i < NPARAMS ? &params[i] : NULL; }

void p2pk_param_reset(void) {
  pthread_mutex_lock(&cache_lock);
  memset(cached, 0, sizeof cached);
  memset(warned, 0, sizeof warned);
  pthread_mutex_unlock(&cache_lock);
}
