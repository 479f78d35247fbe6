/* SPDX-License-Identifier: BSD-3-Clause */
/* p2pkit's own recorded-machine format: `p2pkit topo --save` writes it,
 * `--from` reads it. Line based and versioned:
 *
 *   p2pkit-topo 2
 *   machine host=dgx01 driver=580.159.04 cuda_driver=13000 known=pci_tree,numa
 *   note text="what the source could not tell"
 *   numa os=0 cpus=0-31
 *   pci id=0 kind=hostbridge busid=0000:00 parent=-1 numa=0
 *   pci id=1 kind=gpu busid=0000:00:06.0 parent=0 max_gen=5 max_width=16
 *   gpu index=0 busid=0000:00:06.0 name="NVIDIA H200" cc=9.0 pci=1
 *   nvlink gpu=0 peer=switch busid=fffffff:ff:ff.0 count=18 version=4
 *   nic index=0 name=mlx5_0 pci=2 speed=400000
 *   p2p src=0 dst=1 cuda_access=1 read=OK write=OK
 *   end
 *
 * One record per line: a keyword, then key=value pairs (values with spaces
 * in double quotes, C escapes). '#' starts a comment. Keys left out take the
 * model's "unknown" value; unknown keys are errors. pci ids and GPU indices
 * count up from 0 in file order. The writer leaves out unknown values, so
 * write(read(write(t))) is byte-identical to write(t).
 *
 * Version 2 adds the `end` record, which must close the file: without it a
 * file cut short (an interrupted copy) would read as a smaller machine.
 * Version 1 files (no `end`) are still read. `nic` records need no new
 * version: a version-1 reader refuses them as an unknown record.
 *
 * Both directions run off one table of fields per record, so a field added
 * to the table is written, read and checked alike. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"
#include "topo/topo.h"

#define FILE_MAGIC "p2pkit-topo"
#define FILE_VERSION 2       /* written; versions 1 to FILE_VERSION are read */
#define FILE_VERSION_END 2   /* from this version on, files close with `end` */
#define MAX_TOKENS 24
#define MAX_KEY 32
#define MAX_VALUE 512
#define MAX_NUMA_OS (1 << 20)
#define MAX_LINKS_PER_PEER 64 /* NVLinks in one group; the NCCL reader takes the same */

/* --- the records ---------------------------------------------------------- */

typedef enum { F_INT, F_HEX, F_U64, F_DOUBLE, F_STR, F_BUSID, F_ENUM, F_CC, F_KNOWN } ftype;

enum { REQUIRED = 1, ALWAYS = 2 }; /* must be read / is written even when unknown */

typedef struct {
  const char *key;
  ftype type;
  size_t off; /* into the record struct */
  size_t aux; /* F_STR/F_BUSID: buffer size; F_CC: offset of the minor number */
  double min, max;
  const char *const *names; /* F_ENUM: value i is spelled names[i] */
  int flags;
} field;

_Static_assert(sizeof(p2pk_pci_kind) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(p2pk_nvl_peer) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(p2pkit_p2p_code_t) == sizeof(int), "enums are stored as int");

static const char *const kind_names[] = {"hostbridge", "switch", "gpu", "other", NULL};
static const char *const peer_names[] = {"gpu", "switch", "cpu", "unknown", NULL};
static const char *const code_names[] = {"OK", "CNS", "GNS", "TNS", "NS", "U", NULL};
static const char *const known_names[] = {"cuda",   "pci_tree", "hostbridges", "numa",
                                          "nvlink", "p2p",      "pcie_link",   NULL};

typedef struct {
  char hostname[64], driver[32], nvml_version[32];
  int cuda_driver, cuda_runtime;
  unsigned known;
} machine_rec;

typedef struct {
  char text[sizeof(((struct p2pkit_topo *)0)->notes[0])];
} note_rec;

typedef struct {
  int id;
  p2pk_pci_node n;
} pci_rec;

typedef struct {
  int index;
  p2pk_gpu g;
} gpu_rec;

typedef struct {
  int gpu;
  p2pk_nvl_group grp;
} nvl_rec;

typedef struct {
  int index;
  p2pk_nic n;
} nic_rec;

typedef struct {
  int src, dst;
  p2pk_p2p p;
} p2p_rec;

#define FSTR(k, rec, m, fl) \
  { .key = k, .type = F_STR, .off = offsetof(rec, m), .aux = sizeof(((rec *)0)->m), .flags = fl }
#define FBUSID(k, rec, m, fl) \
  { .key = k, .type = F_BUSID, .off = offsetof(rec, m), .aux = sizeof(((rec *)0)->m), .flags = fl }
#define FINT(k, rec, m, lo, hi, fl) \
  { .key = k, .type = F_INT, .off = offsetof(rec, m), .min = lo, .max = hi, .flags = fl }
#define FHEX(k, rec, m, hi) \
  { .key = k, .type = F_HEX, .off = offsetof(rec, m), .max = hi }
#define FU64(k, rec, m) \
  { .key = k, .type = F_U64, .off = offsetof(rec, m) }
#define FDOUBLE(k, rec, m, lo, hi) \
  { .key = k, .type = F_DOUBLE, .off = offsetof(rec, m), .min = lo, .max = hi }
#define FENUM(k, rec, m, nm, fl) \
  { .key = k, .type = F_ENUM, .off = offsetof(rec, m), .names = nm, .flags = fl }
#define FCC(k, rec, major, minor) \
  { .key = k, .type = F_CC, .off = offsetof(rec, major), .aux = offsetof(rec, minor), .max = 99 }
#define FKNOWN(k, rec, m) \
  { .key = k, .type = F_KNOWN, .off = offsetof(rec, m), .flags = ALWAYS }
#define MUST (REQUIRED | ALWAYS)

static const field machine_fields[] = {
    FSTR("host", machine_rec, hostname, 0),
    FSTR("driver", machine_rec, driver, 0),
    FSTR("nvml", machine_rec, nvml_version, 0),
    FINT("cuda_driver", machine_rec, cuda_driver, 0, 1e8, 0),
    FINT("cuda_runtime", machine_rec, cuda_runtime, 0, 1e8, 0),
    FKNOWN("known", machine_rec, known),
};

static const field note_fields[] = {FSTR("text", note_rec, text, MUST)};

static const field numa_fields[] = {
    FINT("os", p2pk_numa_node, os_index, 0, MAX_NUMA_OS, MUST),
    FSTR("cpus", p2pk_numa_node, cpus, 0),
};

static const field pci_fields[] = {
    FINT("id", pci_rec, id, 0, P2PK_MAX_PCI - 1, MUST),
    FENUM("kind", pci_rec, n.kind, kind_names, MUST),
    FBUSID("busid", pci_rec, n.busid, MUST),
    FINT("parent", pci_rec, n.parent, -1, P2PK_MAX_PCI - 1, MUST),
    FINT("numa", pci_rec, n.numa, -1, MAX_NUMA_OS, 0),
    FINT("gen", pci_rec, n.link_gen, 0, 16, 0),
    FINT("width", pci_rec, n.link_width, 0, 64, 0),
    FINT("max_gen", pci_rec, n.max_gen, 0, 16, 0),
    FINT("max_width", pci_rec, n.max_width, 0, 64, 0),
    FHEX("vendor", pci_rec, n.vendor, 0xffff),
    FHEX("device", pci_rec, n.device, 0xffff),
    FHEX("class", pci_rec, n.class_id, 0xffffff),
};

static const field gpu_fields[] = {
    FINT("index", gpu_rec, index, 0, P2PK_MAX_GPUS - 1, MUST),
    FBUSID("busid", gpu_rec, g.busid, MUST),
    FSTR("name", gpu_rec, g.name, 0),
    FSTR("uuid", gpu_rec, g.uuid, 0),
    FU64("memory", gpu_rec, g.memory_bytes),
    FINT("sms", gpu_rec, g.sm_count, 0, 1e6, 0),
    FCC("cc", gpu_rec, g.cc_major, g.cc_minor),
    FINT("numa_id", gpu_rec, g.mem_numa, P2PK_GPU_NUMA_UNKNOWN, MAX_NUMA_OS, 0),
    FINT("pci", gpu_rec, g.pci, -1, P2PK_MAX_PCI - 1, 0),
    FINT("nvlinks_present", gpu_rec, g.nvlinks_present, -1, 1024, 0),
    FINT("nvlinks_active", gpu_rec, g.nvlinks_active, -1, 1024, 0),
    FDOUBLE("nvlink_gbps", gpu_rec, g.nvlink_gbps, 0, 1e6),
};

static const field nvl_fields[] = {
    FINT("gpu", nvl_rec, gpu, 0, P2PK_MAX_GPUS - 1, MUST),
    FENUM("peer", nvl_rec, grp.peer, peer_names, MUST),
    FBUSID("busid", nvl_rec, grp.peer_busid, 0),
    FINT("count", nvl_rec, grp.count, 0, MAX_LINKS_PER_PEER, MUST),
    FINT("version", nvl_rec, grp.version, 0, 64, 0),
};

static const field nic_fields[] = {
    FINT("index", nic_rec, index, 0, P2PK_MAX_NICS - 1, MUST),
    FSTR("name", nic_rec, n.name, 0),
    FINT("pci", nic_rec, n.pci, 0, P2PK_MAX_PCI - 1, MUST),
    FINT("speed", nic_rec, n.speed_mbps, 0, 1e8, 0),
    FINT("gdr", nic_rec, n.gdr, -1, 1, 0),
};

static const field p2p_fields[] = {
    FINT("src", p2p_rec, src, 0, P2PK_MAX_GPUS - 1, MUST),
    FINT("dst", p2p_rec, dst, 0, P2PK_MAX_GPUS - 1, MUST),
    FINT("cuda_access", p2p_rec, p.cuda_access, -1, 1, 0),
    FINT("attr_access", p2p_rec, p.attr_access, -1, 1, 0),
    FINT("attr_atomics", p2p_rec, p.attr_atomics, -1, 1, 0),
    FINT("attr_perf_rank", p2p_rec, p.attr_perf_rank, -1, 1000, 0),
    FINT("attr_array", p2p_rec, p.attr_array, -1, 1, 0),
    FENUM("read", p2p_rec, p.nvml[P2PKIT_P2P_READ], code_names, 0),
    FENUM("write", p2p_rec, p.nvml[P2PKIT_P2P_WRITE], code_names, 0),
    FENUM("atomics", p2p_rec, p.nvml[P2PKIT_P2P_ATOMICS], code_names, 0),
    FENUM("nvlink", p2p_rec, p.nvml[P2PKIT_P2P_NVLINK], code_names, 0),
};

#define NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/* The "unknown" value of every record: what p2pk_topo_new/add_* leave. */
static void pci_default(pci_rec *r) {
  memset(r, 0, sizeof *r);
  r->n.parent = -1;
  r->n.numa = -1;
}

static void gpu_default(gpu_rec *r) {
  memset(r, 0, sizeof *r);
  r->g.pci = -1;
  r->g.nvlinks_present = r->g.nvlinks_active = -1;
  r->g.mem_numa = P2PK_GPU_NUMA_UNKNOWN; /* absent: the recording did not say */
}

static void nic_default(nic_rec *r) {
  memset(r, 0, sizeof *r);
  r->n.gdr = -1;
}

static void p2p_default(p2p_rec *r) {
  memset(r, 0, sizeof *r);
  r->p.cuda_access = r->p.attr_access = r->p.attr_atomics = -1;
  r->p.attr_perf_rank = r->p.attr_array = -1;
  for (int c = 0; c < P2PKIT_P2P_CAPS; c++) r->p.nvml[c] = P2PKIT_P2P_U;
}

/* --- consistency, checked on both paths ---------------------------------- */

/* `lines` (the line of each record) is NULL when writing. */
__attribute__((format(printf, 4, 5))) static p2pkit_status_t ref_error(const char *file, const int *lines,
                                                                       int i, const char *fmt, ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (lines) return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: %s", file, lines[i], what);
  return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot save the topology: %s", what);
}

static p2pkit_status_t check_pci(const struct p2pkit_topo *t, const char *file, const int *lines) {
  for (int i = 0; i < t->npci; i++) {
    const p2pk_pci_node *n = &t->pci[i];
    if (!n->busid[0]) return ref_error(file, lines, i, "pci id=%d: expected a bus id, found \"\"", i);
    if (n->parent < -1 || n->parent >= t->npci)
      return ref_error(file, lines, i, "pci id=%d: parent %d is not a pci id defined in the file", i,
                       n->parent);
    if (n->kind == P2PK_PCI_HOSTBRIDGE && n->parent != -1)
      return ref_error(file, lines, i, "pci id=%d: a hostbridge is a root: expected parent=-1", i);
    for (int j = 0; j < i; j++)
      if (strcmp(t->pci[j].busid, n->busid) == 0)
        return ref_error(file, lines, i, "pci id=%d: bus id %s is pci id=%d's too", i, n->busid, j);
  }
  for (int i = 0; i < t->npci; i++) {
    int steps = 0;
    for (int p = t->pci[i].parent; p >= 0; p = t->pci[p].parent)
      if (++steps > t->npci) return ref_error(file, lines, i, "pci id=%d: its parents form a loop", i);
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t check_gpus(const struct p2pkit_topo *t, const char *file, const int *lines) {
  for (int g = 0; g < t->ngpus; g++) {
    const p2pk_gpu *gp = &t->gpus[g];
    if (!gp->busid[0]) return ref_error(file, lines, g, "gpu index=%d: expected a bus id, found \"\"", g);
    if (gp->pci < -1 || gp->pci >= t->npci)
      return ref_error(file, lines, g, "gpu index=%d: pci=%d is not a pci id defined in the file", g,
                       gp->pci);
    if (gp->pci >= 0 && t->pci[gp->pci].kind != P2PK_PCI_GPU)
      return ref_error(file, lines, g, "gpu index=%d: pci=%d is a %s node, expected a gpu node", g, gp->pci,
                       kind_names[t->pci[gp->pci].kind]);
    for (int h = 0; h < g; h++)
      if (strcmp(t->gpus[h].busid, gp->busid) == 0)
        return ref_error(file, lines, g, "gpu index=%d: bus id %s is GPU %d's too", g, gp->busid, h);
  }
  return P2PKIT_SUCCESS;
}

/* Every gpu node belongs to a GPU: a file that lost its last gpu records
 * (cut short) must not read as a smaller machine. */
static p2pkit_status_t check_gpu_nodes(const struct p2pkit_topo *t, const char *file, const int *lines) {
  for (int i = 0; i < t->npci; i++) {
    if (t->pci[i].kind != P2PK_PCI_GPU) continue;
    int g = 0;
    while (g < t->ngpus && t->gpus[g].pci != i) g++;
    if (g == t->ngpus)
      return ref_error(file, lines, i,
                       "pci id=%d is a gpu node but no gpu record has pci=%d: a gpu record is missing "
                       "(is the file cut short?)",
                       i, i);
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t check_nics(const struct p2pkit_topo *t, const char *file, const int *lines) {
  for (int n = 0; n < t->nnics; n++) {
    const p2pk_nic *x = &t->nics[n];
    if (x->pci < 0 || x->pci >= t->npci)
      return ref_error(file, lines, n, "nic index=%d: pci=%d is not a pci id defined in the file", n, x->pci);
    p2pk_pci_kind k = t->pci[x->pci].kind;
    if (k != P2PK_PCI_OTHER && k != P2PK_PCI_HOSTBRIDGE)
      return ref_error(file, lines, n, "nic index=%d: pci=%d is a %s node, expected an other node (its "
                       "device) or a hostbridge", n, x->pci, kind_names[k]);
    for (int m = 0; m < n; m++) {
      const p2pk_nic *y = &t->nics[m];
      if (x->name[0] && strcmp(x->name, y->name) == 0)
        return ref_error(file, lines, n, "nic index=%d: name %s is NIC %d's too", n, x->name, m);
      if (!x->name[0] && !y->name[0] && x->pci == y->pci)
        return ref_error(file, lines, n, "nic index=%d: a second NIC without a name at pci=%d (NIC %d)", n,
                         x->pci, m);
    }
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t check_numa(const struct p2pkit_topo *t, const char *file, const int *lines) {
  for (int i = 0; i < t->nnuma; i++)
    for (int j = 0; j < i; j++)
      if (t->numa[i].os_index == t->numa[j].os_index)
        return ref_error(file, lines, i, "numa os=%d is defined twice", t->numa[i].os_index);
  return P2PKIT_SUCCESS;
}

/* --- writing -------------------------------------------------------------- */

static int int_at(const void *rec, size_t off) {
  int v;
  memcpy(&v, (const char *)rec + off, sizeof v);
  return v;
}

static unsigned uint_at(const void *rec, size_t off) {
  unsigned v;
  memcpy(&v, (const char *)rec + off, sizeof v);
  return v;
}

static double double_at(const void *rec, size_t off) {
  double v;
  memcpy(&v, (const char *)rec + off, sizeof v);
  return v;
}

static int enum_count(const char *const *names) {
  int n = 0;
  while (names[n]) n++;
  return n;
}

static int needs_quotes(const char *s) {
  if (!*s) return 1;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p <= ' ' || *p == '"' || *p == '\\' || *p == '#' || *p == 0x7f) return 1;
  return 0;
}

static void put_str(FILE *out, const char *s) {
  if (!needs_quotes(s)) {
    fputs(s, out);
    return;
  }
  fputc('"', out);
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\')
      fprintf(out, "\\%c", *p);
    else if (*p == '\n')
      fputs("\\n", out);
    else if (*p == '\t')
      fputs("\\t", out);
    else if (*p == '\r')
      fputs("\\r", out);
    else if (*p < ' ' || *p == 0x7f)
      fprintf(out, "\\x%02x", *p);
    else
      fputc(*p, out);
  }
  fputc('"', out);
}

/* The shortest %g spelling that reads back as the same double. */
static void put_double(FILE *out, double v) {
  char buf[40];
  for (int prec = 15; prec <= 17; prec++) {
    snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (strtod(buf, NULL) == v) break;
  }
  fputs(buf, out);
}

static void put_known(FILE *out, unsigned known) {
  int any = 0;
  for (int b = 0; known_names[b]; b++)
    if (known & (1u << b)) {
      fprintf(out, "%s%s", any ? "," : "", known_names[b]);
      any = 1;
    }
  if (!any) fputs("none", out);
}

static void put_value(FILE *out, const field *f, const void *rec) {
  const char *p = (const char *)rec + f->off;
  char canon[P2PK_BUSID_LEN];
  uint64_t u64;
  switch (f->type) {
    case F_INT:
      fprintf(out, "%d", int_at(rec, f->off));
      break;
    case F_HEX:
      fprintf(out, "0x%04x", uint_at(rec, f->off));
      break;
    case F_U64:
      memcpy(&u64, p, sizeof u64);
      fprintf(out, "%llu", (unsigned long long)u64);
      break;
    case F_DOUBLE:
      put_double(out, double_at(rec, f->off));
      break;
    case F_STR:
      put_str(out, p);
      break;
    case F_BUSID:
      put_str(out, p2pk_busid_normalize(p, canon) == 0 ? canon : p);
      break;
    case F_ENUM:
      fputs(f->names[int_at(rec, f->off)], out);
      break;
    case F_CC:
      fprintf(out, "%d.%d", int_at(rec, f->off), int_at(rec, f->aux));
      break;
    case F_KNOWN:
      put_known(out, uint_at(rec, f->off));
      break;
  }
}

/* Whether the reader would take the value back: the writer refuses to write
 * what it could not read. */
static int in_range(const field *f, double v) { return v >= f->min && v <= f->max; }

static int value_readable(const field *f, const void *rec) {
  switch (f->type) {
    case F_INT:
      return in_range(f, int_at(rec, f->off));
    case F_HEX:
      return uint_at(rec, f->off) <= f->max;
    case F_DOUBLE:
      return isfinite(double_at(rec, f->off)) && in_range(f, double_at(rec, f->off));
    case F_ENUM:
      return int_at(rec, f->off) >= 0 && int_at(rec, f->off) < enum_count(f->names);
    case F_CC:
      return in_range(f, int_at(rec, f->off)) && in_range(f, int_at(rec, f->aux));
    case F_STR:
    case F_BUSID:
      return memchr((const char *)rec + f->off, '\0', f->aux) != NULL;
    default:
      return 1;
  }
}

static int field_is_default(const field *f, const void *rec, const void *def) {
  const char *a = (const char *)rec + f->off, *b = (const char *)def + f->off;
  switch (f->type) {
    case F_STR:
    case F_BUSID:
      return strcmp(a, b) == 0;
    case F_U64:
      return memcmp(a, b, sizeof(uint64_t)) == 0;
    case F_DOUBLE:
      return memcmp(a, b, sizeof(double)) == 0;
    case F_CC:
      return int_at(rec, f->off) == int_at(def, f->off) && int_at(rec, f->aux) == int_at(def, f->aux);
    default:
      return int_at(rec, f->off) == int_at(def, f->off);
  }
}

static int record_is_default(const field *fs, size_t nf, const void *rec, const void *def) {
  for (size_t i = 0; i < nf; i++)
    if (!(fs[i].flags & REQUIRED) && !field_is_default(&fs[i], rec, def)) return 0;
  return 1;
}

/* out == NULL: only check that every value is readable. */
static p2pkit_status_t emit(FILE *out, const char *kw, const field *fs, size_t nf, const void *rec,
                            const void *def) {
  for (size_t i = 0; i < nf; i++)
    if (!value_readable(&fs[i], rec))
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot save the topology: %s %s= is out of range", kw,
                       fs[i].key);
  if (!out) return P2PKIT_SUCCESS;
  fputs(kw, out);
  for (size_t i = 0; i < nf; i++) {
    if (!(fs[i].flags & ALWAYS) && field_is_default(&fs[i], rec, def)) continue;
    fprintf(out, " %s=", fs[i].key);
    put_value(out, &fs[i], rec);
  }
  fputc('\n', out);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_machine(const struct p2pkit_topo *t, FILE *out) {
  machine_rec m, def;
  memset(&m, 0, sizeof m);
  memset(&def, 0, sizeof def);
  snprintf(m.hostname, sizeof m.hostname, "%s", t->hostname);
  snprintf(m.driver, sizeof m.driver, "%s", t->driver);
  snprintf(m.nvml_version, sizeof m.nvml_version, "%s", t->nvml_version);
  m.cuda_driver = t->cuda_driver;
  m.cuda_runtime = t->cuda_runtime;
  m.known = t->known;
  P2PK_CHECK(emit(out, "machine", machine_fields, NFIELDS(machine_fields), &m, &def));
  for (int i = 0; i < t->nnotes; i++) {
    note_rec n, ndef;
    memset(&n, 0, sizeof n);
    memset(&ndef, 0, sizeof ndef);
    snprintf(n.text, sizeof n.text, "%s", t->notes[i]);
    P2PK_CHECK(emit(out, "note", note_fields, NFIELDS(note_fields), &n, &ndef));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_nodes(const struct p2pkit_topo *t, FILE *out) {
  p2pk_numa_node ndef = {0};
  for (int i = 0; i < t->nnuma; i++)
    P2PK_CHECK(emit(out, "numa", numa_fields, NFIELDS(numa_fields), &t->numa[i], &ndef));
  pci_rec p, pdef;
  pci_default(&pdef);
  for (int i = 0; i < t->npci; i++) {
    p.id = i;
    p.n = t->pci[i];
    P2PK_CHECK(emit(out, "pci", pci_fields, NFIELDS(pci_fields), &p, &pdef));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_gpus(const struct p2pkit_topo *t, FILE *out) {
  gpu_rec g, gdef;
  gpu_default(&gdef);
  nvl_rec l, ldef = {0};
  for (int i = 0; i < t->ngpus; i++) {
    g.index = i;
    g.g = t->gpus[i];
    P2PK_CHECK(emit(out, "gpu", gpu_fields, NFIELDS(gpu_fields), &g, &gdef));
    for (int k = 0; k < t->gpus[i].ngroups; k++) {
      l.gpu = i;
      l.grp = t->gpus[i].groups[k];
      P2PK_CHECK(emit(out, "nvlink", nvl_fields, NFIELDS(nvl_fields), &l, &ldef));
    }
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_nics(const struct p2pkit_topo *t, FILE *out) {
  nic_rec r, def;
  nic_default(&def);
  for (int n = 0; n < t->nnics; n++) {
    r.index = n;
    r.n = t->nics[n];
    P2PK_CHECK(emit(out, "nic", nic_fields, NFIELDS(nic_fields), &r, &def));
  }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_p2p(const struct p2pkit_topo *t, FILE *out) {
  p2p_rec r, def;
  p2p_default(&def);
  for (int a = 0; a < t->ngpus; a++)
    for (int b = 0; b < t->ngpus; b++) {
      r.src = a;
      r.dst = b;
      r.p = t->p2p[a][b];
      if (record_is_default(p2p_fields, NFIELDS(p2p_fields), &r, &def)) continue;
      P2PK_CHECK(emit(out, "p2p", p2p_fields, NFIELDS(p2p_fields), &r, &def));
    }
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t write_all(const struct p2pkit_topo *t, FILE *out) {
  if (out) {
    fprintf(out, "%s %d\n", FILE_MAGIC, FILE_VERSION);
    fputs("# p2pkit recorded machine; read it with: p2pkit topo --from FILE\n", out);
  }
  P2PK_CHECK(write_machine(t, out));
  P2PK_CHECK(write_nodes(t, out));
  P2PK_CHECK(write_gpus(t, out));
  P2PK_CHECK(write_nics(t, out));
  P2PK_CHECK(write_p2p(t, out));
  if (out) fputs("end\n", out);
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_topo_write_file(const struct p2pkit_topo *t, FILE *out) {
  if (!t || !out) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "topology or file is NULL");
  if (t->ngpus < 0 || t->ngpus > P2PK_MAX_GPUS || t->npci < 0 || t->npci > P2PK_MAX_PCI || t->nnuma < 0 ||
      t->nnuma > P2PK_MAX_NUMA || t->nnotes < 0 || t->nnotes > P2PK_MAX_NOTES || t->nnics < 0 ||
      t->nnics > P2PK_MAX_NICS)
    return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot save the topology: a count is out of range");
  for (int g = 0; g < t->ngpus; g++)
    if (t->gpus[g].ngroups < 0 || t->gpus[g].ngroups > P2PK_MAX_NVL_GROUPS)
      return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "cannot save the topology: GPU%d NVLink groups", g);
  /* Check everything first, so a refused topology leaves no half-written file. */
  P2PK_CHECK(write_all(t, NULL));
  P2PK_CHECK(check_pci(t, NULL, NULL));
  P2PK_CHECK(check_gpus(t, NULL, NULL));
  P2PK_CHECK(check_gpu_nodes(t, NULL, NULL));
  P2PK_CHECK(check_nics(t, NULL, NULL));
  P2PK_CHECK(check_numa(t, NULL, NULL));
  return write_all(t, out);
}

/* --- reading -------------------------------------------------------------- */

typedef struct {
  char key[MAX_KEY]; /* "" for a bare word */
  char value[MAX_VALUE];
} token;

typedef struct {
  const char *file;
  int line;
  struct p2pkit_topo *t;
  int have_header, have_machine, have_end, version;
  int numa_line[P2PK_MAX_NUMA], pci_line[P2PK_MAX_PCI], gpu_line[P2PK_MAX_GPUS], nic_line[P2PK_MAX_NICS];
  int p2p_line[P2PK_MAX_GPUS][P2PK_MAX_GPUS];
  int ntok;
  token tok[MAX_TOKENS]; /* tok[0].value is the record's keyword */
} reader;

__attribute__((format(printf, 2, 3))) static p2pkit_status_t ferr(const reader *r, const char *fmt, ...) {
  char what[384];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: %s", r->file, r->line, what);
}

static int is_sep(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '#'; }

static int hex_digit(char ch) {
  return ch >= '0' && ch <= '9'   ? ch - '0'
         : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
         : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                  : -1;
}

/* One escape after '\' in a quoted value; -1 when it is not one we write. */
static int unescape(const char **pp, const char *end) {
  const char *p = *pp;
  if (p >= end) return -1;
  char e = *p++;
  int ch = e == '"' || e == '\\' ? e : e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : -1;
  if (e == 'x' && end - p >= 2 && hex_digit(p[0]) >= 0 && hex_digit(p[1]) >= 0) {
    ch = hex_digit(p[0]) * 16 + hex_digit(p[1]);
    p += 2;
    if (ch == 0) return -1;
  }
  *pp = p;
  return ch;
}

static p2pkit_status_t read_quoted(reader *r, const char **pp, const char *end, token *tk) {
  const char *p = *pp + 1;
  size_t n = 0;
  for (;;) {
    if (p >= end) return ferr(r, "value of '%s': expected a closing '\"'", tk->key);
    char ch = *p++;
    if (ch == '"') break;
    if (ch == '\\') {
      int u = unescape(&p, end);
      if (u < 0)
        return ferr(r, "value of '%s': unknown escape (expected \\\" \\\\ \\n \\t \\r or \\xHH)", tk->key);
      ch = (char)u;
    }
    if (n + 1 >= MAX_VALUE) return ferr(r, "value of '%s' is longer than %d bytes", tk->key, MAX_VALUE - 1);
    tk->value[n++] = ch;
  }
  tk->value[n] = '\0';
  *pp = p;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_bare(reader *r, const char **pp, const char *end, token *tk) {
  const char *p = *pp;
  size_t n = 0;
  for (; p < end && !is_sep(*p); p++) {
    if (*p == '"') return ferr(r, "unexpected '\"' inside a value: quote the whole value");
    if (n + 1 >= MAX_VALUE) return ferr(r, "value longer than %d bytes", MAX_VALUE - 1);
    tk->value[n++] = *p;
  }
  tk->value[n] = '\0';
  *pp = p;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t read_token(reader *r, const char **pp, const char *end, token *tk) {
  const char *s = *pp, *p = s;
  while (p < end && !is_sep(*p) && *p != '=' && *p != '"') p++;
  tk->key[0] = '\0';
  if (p < end && *p == '=') {
    size_t klen = (size_t)(p - s);
    if (klen == 0) return ferr(r, "expected a key before '='");
    if (klen >= MAX_KEY) return ferr(r, "key '%.*s...' is too long", 16, s);
    memcpy(tk->key, s, klen);
    tk->key[klen] = '\0';
    p++;
    P2PK_CHECK(p < end && *p == '"' ? read_quoted(r, &p, end, tk) : read_bare(r, &p, end, tk));
  } else {
    p = s;
    P2PK_CHECK(read_bare(r, &p, end, tk));
  }
  if (p < end && !is_sep(*p)) return ferr(r, "expected a space after the value of '%s'", tk->key);
  *pp = p;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t tokenize(reader *r, const char *p, const char *end) {
  r->ntok = 0;
  if (memchr(p, '\0', (size_t)(end - p))) return ferr(r, "unexpected NUL byte");
  for (;;) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\r')) p++;
    if (p >= end || *p == '#') return P2PKIT_SUCCESS;
    if (r->ntok == MAX_TOKENS) return ferr(r, "more than %d fields on one line", MAX_TOKENS);
    P2PK_CHECK(read_token(r, &p, end, &r->tok[r->ntok++]));
  }
}

/* --- values --- */

static int parse_ll(const char *v, long long *out) {
  const char *d = v[0] == '-' ? v + 1 : v;
  if (*d < '0' || *d > '9') return -1;
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || *end) return -1;
  *out = x;
  return 0;
}

static int parse_ull(const char *v, int base, unsigned long long *out) {
  if (*v < '0' || *v > '9') return -1;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, base);
  if (errno || *end) return -1;
  *out = x;
  return 0;
}

static int parse_cc(const char *v, int *major, int *minor) {
  long long a, b;
  const char *dot = strchr(v, '.');
  char head[8];
  if (!dot || dot == v || (size_t)(dot - v) >= sizeof head) return -1;
  memcpy(head, v, (size_t)(dot - v));
  head[dot - v] = '\0';
  if (head[0] == '-' || dot[1] == '-' || parse_ll(head, &a) || parse_ll(dot + 1, &b)) return -1;
  if (a > 99 || b > 99) return -1;
  *major = (int)a;
  *minor = (int)b;
  return 0;
}

static int parse_known(const char *v, unsigned *out) {
  unsigned bits = 0;
  if (strcmp(v, "none") == 0) {
    *out = 0;
    return 0;
  }
  for (const char *s = v;;) {
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    int b = 0;
    while (known_names[b] && !(strlen(known_names[b]) == n && memcmp(known_names[b], s, n) == 0)) b++;
    if (!known_names[b]) return -1;
    bits |= 1u << b;
    if (!e) break;
    s = e + 1;
  }
  *out = bits;
  return 0;
}

static void list_names(char *buf, size_t len, const char *const *names) {
  size_t o = 0;
  buf[0] = '\0';
  for (int i = 0; names[i] && o < len; i++)
    o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "", names[i]);
}

static p2pkit_status_t bad_value(const reader *r, const field *f, const char *v) {
  const char *kw = r->tok[0].value;
  char names[160];
  switch (f->type) {
    case F_INT:
      return ferr(r, "%s: expected an integer from %.0f to %.0f for '%s', found '%.40s'", kw, f->min, f->max,
                  f->key, v);
    case F_HEX:
      return ferr(r, "%s: expected a number from 0 to 0x%x for '%s', found '%.40s'", kw, (unsigned)f->max,
                  f->key, v);
    case F_U64:
      return ferr(r, "%s: expected a byte count for '%s', found '%.40s'", kw, f->key, v);
    case F_DOUBLE:
      return ferr(r, "%s: expected a number from %g to %g for '%s', found '%.40s'", kw, f->min, f->max,
                  f->key, v);
    case F_STR:
    case F_BUSID:
      return ferr(r, "%s: '%s' is longer than %zu characters", kw, f->key, f->aux - 1);
    case F_ENUM:
      list_names(names, sizeof names, f->names);
      return ferr(r, "%s: expected one of %s for '%s', found '%.40s'", kw, names, f->key, v);
    case F_CC:
      return ferr(r, "%s: expected major.minor (like 9.0) for '%s', found '%.40s'", kw, f->key, v);
    case F_KNOWN:
      list_names(names, sizeof names, known_names);
      return ferr(r, "%s: expected 'none' or a comma list of %s for '%s', found '%.40s'", kw, names, f->key,
                  v);
  }
  return ferr(r, "%s: bad value for '%s'", kw, f->key);
}

/* F_INT, F_HEX, F_U64, F_DOUBLE into p; -1 when malformed or out of range. */
static int parse_number(const field *f, const char *v, char *p) {
  long long ll;
  unsigned long long ull;
  char *end;
  if (f->type == F_INT) {
    if (parse_ll(v, &ll) || !in_range(f, (double)ll)) return -1;
    int i = (int)ll;
    memcpy(p, &i, sizeof i);
  } else if (f->type == F_HEX) {
    if (parse_ull(v, 0, &ull) || ull > f->max) return -1;
    unsigned u = (unsigned)ull;
    memcpy(p, &u, sizeof u);
  } else if (f->type == F_U64) {
    if (parse_ull(v, 10, &ull)) return -1;
    uint64_t u64 = ull;
    memcpy(p, &u64, sizeof u64);
  } else {
    errno = 0;
    double d = strtod(v, &end);
    if (!*v || *end || errno || !isfinite(d) || !in_range(f, d)) return -1;
    memcpy(p, &d, sizeof d);
  }
  return 0;
}

/* One value into the record; -1 when it is not one this field takes. */
static int parse_value(const field *f, const char *v, void *rec) {
  char *p = (char *)rec + f->off;
  int i = 0, minor;
  unsigned u;
  switch (f->type) {
    case F_STR:
    case F_BUSID:
      if (strlen(v) >= f->aux) return -1;
      if (f->type == F_STR || p2pk_busid_normalize(v, p) != 0) memcpy(p, v, strlen(v) + 1);
      return 0;
    case F_ENUM:
      while (f->names[i] && strcmp(f->names[i], v) != 0) i++;
      if (!f->names[i]) return -1;
      memcpy(p, &i, sizeof i);
      return 0;
    case F_CC:
      if (parse_cc(v, &i, &minor)) return -1;
      memcpy(p, &i, sizeof i);
      memcpy((char *)rec + f->aux, &minor, sizeof minor);
      return 0;
    case F_KNOWN:
      if (parse_known(v, &u)) return -1;
      memcpy(p, &u, sizeof u);
      return 0;
    default: return parse_number(f, v, p);
  }
}

/* The tokens after the keyword into `rec` (already holding the defaults). */
static p2pkit_status_t parse_fields(const reader *r, const field *fs, size_t nf, void *rec) {
  const char *kw = r->tok[0].value;
  unsigned seen = 0;
  for (int t = 1; t < r->ntok; t++) {
    const token *tk = &r->tok[t];
    if (!tk->key[0]) return ferr(r, "%s: expected key=value, found '%.40s'", kw, tk->value);
    size_t k = 0;
    while (k < nf && strcmp(fs[k].key, tk->key) != 0) k++;
    if (k == nf) {
      char keys[256];
      size_t o = 0;
      for (size_t j = 0; j < nf && o < sizeof keys; j++)
        o += (size_t)snprintf(keys + o, sizeof keys - o, "%s%s", j ? ", " : "", fs[j].key);
      return ferr(r, "%s: unknown key '%s' (expected %s)", kw, tk->key, keys);
    }
    if (seen & (1u << k)) return ferr(r, "%s: '%s' is given twice", kw, tk->key);
    seen |= 1u << k;
    if (parse_value(&fs[k], tk->value, rec) != 0) return bad_value(r, &fs[k], tk->value);
  }
  for (size_t k = 0; k < nf; k++)
    if ((fs[k].flags & REQUIRED) && !(seen & (1u << k)))
      return ferr(r, "%s: expected %s=... (it is required)", kw, fs[k].key);
  return P2PKIT_SUCCESS;
}

/* --- records --- */

static p2pkit_status_t rec_header(reader *r) {
  long long v;
  if (strcmp(r->tok[0].value, FILE_MAGIC) != 0)
    return ferr(r, "expected '%s %d' as the first line, found '%.40s'", FILE_MAGIC, FILE_VERSION,
                r->tok[0].value);
  if (r->ntok != 2 || r->tok[1].key[0] || parse_ll(r->tok[1].value, &v))
    return ferr(r, "expected '%s %d': the magic word and a version number", FILE_MAGIC, FILE_VERSION);
  if (v < 1 || v > FILE_VERSION)
    return ferr(r, "unsupported %s version %lld (this p2pkit reads versions 1 to %d)", FILE_MAGIC, v,
                FILE_VERSION);
  r->have_header = 1;
  r->version = (int)v;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_machine(reader *r) {
  struct p2pkit_topo *t = r->t;
  machine_rec m;
  memset(&m, 0, sizeof m);
  if (r->have_machine) return ferr(r, "machine: only one machine record is allowed");
  P2PK_CHECK(parse_fields(r, machine_fields, NFIELDS(machine_fields), &m));
  snprintf(t->hostname, sizeof t->hostname, "%s", m.hostname);
  snprintf(t->driver, sizeof t->driver, "%s", m.driver);
  snprintf(t->nvml_version, sizeof t->nvml_version, "%s", m.nvml_version);
  t->cuda_driver = m.cuda_driver;
  t->cuda_runtime = m.cuda_runtime;
  t->known = m.known;
  r->have_machine = 1;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_note(reader *r) {
  note_rec n;
  memset(&n, 0, sizeof n);
  if (r->t->nnotes >= P2PK_MAX_NOTES) return ferr(r, "note: more than %d notes", P2PK_MAX_NOTES);
  P2PK_CHECK(parse_fields(r, note_fields, NFIELDS(note_fields), &n));
  memcpy(r->t->notes[r->t->nnotes++], n.text, sizeof n.text);
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_numa(reader *r) {
  struct p2pkit_topo *t = r->t;
  p2pk_numa_node n = {0};
  if (t->nnuma >= P2PK_MAX_NUMA) return ferr(r, "numa: more than %d NUMA nodes", P2PK_MAX_NUMA);
  P2PK_CHECK(parse_fields(r, numa_fields, NFIELDS(numa_fields), &n));
  if (strspn(n.cpus, "0123456789,-") != strlen(n.cpus))
    return ferr(r, "numa: expected a CPU list like 0-31,64-95 for 'cpus', found '%.40s'", n.cpus);
  for (int i = 0; i < t->nnuma; i++)
    if (t->numa[i].os_index == n.os_index)
      return ferr(r, "numa: os=%d is defined twice (first on line %d)", n.os_index, r->numa_line[i]);
  r->numa_line[t->nnuma] = r->line;
  t->numa[t->nnuma++] = n;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_pci(reader *r) {
  struct p2pkit_topo *t = r->t;
  pci_rec p;
  pci_default(&p);
  if (t->npci >= P2PK_MAX_PCI) return ferr(r, "pci: more than %d PCI nodes", P2PK_MAX_PCI);
  P2PK_CHECK(parse_fields(r, pci_fields, NFIELDS(pci_fields), &p));
  if (p.id < t->npci)
    return ferr(r, "pci: id=%d is defined twice (first on line %d)", p.id, r->pci_line[p.id]);
  if (p.id != t->npci)
    return ferr(r, "pci: expected id=%d (pci ids count up from 0 in file order), found id=%d", t->npci, p.id);
  r->pci_line[t->npci] = r->line;
  t->pci[t->npci++] = p.n;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_gpu(reader *r) {
  struct p2pkit_topo *t = r->t;
  gpu_rec g;
  gpu_default(&g);
  if (t->ngpus >= P2PK_MAX_GPUS) return ferr(r, "gpu: more than %d GPUs", P2PK_MAX_GPUS);
  P2PK_CHECK(parse_fields(r, gpu_fields, NFIELDS(gpu_fields), &g));
  if (g.index < t->ngpus)
    return ferr(r, "gpu: index=%d is defined twice (first on line %d)", g.index, r->gpu_line[g.index]);
  if (g.index != t->ngpus)
    return ferr(r, "gpu: expected index=%d (GPUs count up from 0 in file order), found index=%d", t->ngpus,
                g.index);
  r->gpu_line[t->ngpus] = r->line;
  t->gpus[t->ngpus++] = g.g;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_nvlink(reader *r) {
  struct p2pkit_topo *t = r->t;
  nvl_rec l = {0};
  P2PK_CHECK(parse_fields(r, nvl_fields, NFIELDS(nvl_fields), &l));
  if (l.gpu >= t->ngpus)
    return ferr(r, "nvlink: gpu=%d is not defined yet (its gpu record must come first)", l.gpu);
  p2pk_gpu *g = &t->gpus[l.gpu];
  if (g->ngroups >= P2PK_MAX_NVL_GROUPS)
    return ferr(r, "nvlink: GPU %d has more than %d NVLink groups", l.gpu, P2PK_MAX_NVL_GROUPS);
  g->groups[g->ngroups++] = l.grp;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_nic(reader *r) {
  struct p2pkit_topo *t = r->t;
  nic_rec n;
  nic_default(&n);
  if (t->nnics >= P2PK_MAX_NICS) return ferr(r, "nic: more than %d NICs", P2PK_MAX_NICS);
  P2PK_CHECK(parse_fields(r, nic_fields, NFIELDS(nic_fields), &n));
  if (n.index < t->nnics)
    return ferr(r, "nic: index=%d is defined twice (first on line %d)", n.index, r->nic_line[n.index]);
  if (n.index != t->nnics)
    return ferr(r, "nic: expected index=%d (NICs count up from 0 in file order), found index=%d", t->nnics,
                n.index);
  r->nic_line[t->nnics] = r->line;
  t->nics[t->nnics++] = n.n;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_end(reader *r) {
  if (r->ntok > 1)
    return ferr(r, "end: expected nothing after 'end', found '%s%s%.40s'", r->tok[1].key,
                r->tok[1].key[0] ? "=" : "", r->tok[1].value);
  r->have_end = 1;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t rec_p2p(reader *r) {
  struct p2pkit_topo *t = r->t;
  p2p_rec p;
  p2p_default(&p);
  P2PK_CHECK(parse_fields(r, p2p_fields, NFIELDS(p2p_fields), &p));
  if (p.src >= t->ngpus || p.dst >= t->ngpus)
    return ferr(r, "p2p: GPU %d is not defined yet (gpu records must come first)",
                p.src >= t->ngpus ? p.src : p.dst);
  if (r->p2p_line[p.src][p.dst])
    return ferr(r, "p2p: src=%d dst=%d is given twice (first on line %d)", p.src, p.dst,
                r->p2p_line[p.src][p.dst]);
  r->p2p_line[p.src][p.dst] = r->line;
  t->p2p[p.src][p.dst] = p.p;
  return P2PKIT_SUCCESS;
}

static const struct {
  const char *keyword;
  p2pkit_status_t (*parse)(reader *);
} records[] = {{"machine", rec_machine}, {"note", rec_note},     {"numa", rec_numa}, {"pci", rec_pci},
               {"gpu", rec_gpu},         {"nvlink", rec_nvlink}, {"nic", rec_nic},   {"p2p", rec_p2p},
               {"end", rec_end}};

static p2pkit_status_t read_line(reader *r, const char *p, const char *end) {
  P2PK_CHECK(tokenize(r, p, end));
  if (r->ntok == 0) return P2PKIT_SUCCESS;
  if (r->tok[0].key[0]) return ferr(r, "expected a record keyword, found '%s='", r->tok[0].key);
  if (!r->have_header) return rec_header(r);
  if (r->have_end)
    return ferr(r, "'%.40s' after the end record (the end record closes the file)", r->tok[0].value);
  for (size_t i = 0; i < sizeof records / sizeof records[0]; i++)
    if (strcmp(r->tok[0].value, records[i].keyword) == 0) return records[i].parse(r);
  return ferr(r, "unknown record '%.40s' (expected machine, note, numa, pci, gpu, nvlink, nic, p2p or end)",
              r->tok[0].value);
}

static p2pkit_status_t read_all(reader *r, const char *text, size_t len) {
  const char *p = text, *end = text + len;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    r->line++;
    P2PK_CHECK(read_line(r, p, nl ? nl : end));
    p = nl ? nl + 1 : end;
  }
  if (!r->have_header) {
    r->line = 1;
    return ferr(r, "empty file: expected '%s %d'", FILE_MAGIC, FILE_VERSION);
  }
  if (r->version >= FILE_VERSION_END && !r->have_end)
    return ferr(r, "the file ends without its 'end' record: it is cut short (an interrupted copy or "
                "save?); record the machine again with p2pkit topo --save");
  P2PK_CHECK(check_pci(r->t, r->file, r->pci_line));
  P2PK_CHECK(check_gpus(r->t, r->file, r->gpu_line));
  P2PK_CHECK(check_gpu_nodes(r->t, r->file, r->pci_line));
  P2PK_CHECK(check_nics(r->t, r->file, r->nic_line));
  P2PK_CHECK(check_numa(r->t, r->file, r->numa_line));
  return p2pk_topo_validate(r->t);
}

p2pkit_status_t p2pk_topo_read_file(const char *name, const char *text, size_t len,
                                    struct p2pkit_topo **t_p) {
  if (!t_p || (!text && len)) return p2pk_fail(P2PKIT_ERR_INVALID_ARGUMENT, "text or output is NULL");
  reader *r = calloc(1, sizeof *r);
  struct p2pkit_topo *t = p2pk_topo_new("p2pkit", name);
  if (!r || !t) {
    free(r);
    free(t);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory reading %s", name ? name : "a topology");
  }
  r->file = name ? name : "(topology)";
  r->t = t;
  p2pkit_status_t st = read_all(r, text ? text : "", len);
  free(r);
  if (st != P2PKIT_SUCCESS) {
    p2pkit_topo_destroy(t);
    return st;
  }
  *t_p = t;
  return P2PKIT_SUCCESS;
}
