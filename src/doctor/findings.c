/* SPDX-License-Identifier: BSD-3-Clause */
/* Findings: storing them, the exit code, and printing (text and JSON). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/text.h"
#include "doctor/doctor.h"

#define DOCTOR_JSON_SCHEMA_VERSION 1

void p2pk_findings_init(p2pk_findings *f) { memset(f, 0, sizeof *f); }

void p2pk_findings_free(p2pk_findings *f) {
  free(f->v);
  memset(f, 0, sizeof *f);
}

p2pk_finding *p2pk_finding_add(p2pk_findings *f, p2pk_doc_level level, const char *check,
                               const char *subject, const char *action, const char *fmt, ...) {
  if (f->n == f->cap) {
    int cap = f->cap ? f->cap * 2 : 32;
    p2pk_finding *v = realloc(f->v, (size_t)cap * sizeof *v);
    if (!v) {
      f->oom = 1;
      return NULL;
    }
    f->v = v;
    f->cap = cap;
  }
  p2pk_finding *x = &f->v[f->n++];
  memset(x, 0, sizeof *x);
  x->level = level;
  snprintf(x->check, sizeof x->check, "%s", check);
  snprintf(x->subject, sizeof x->subject, "%s", subject);
  snprintf(x->action, sizeof x->action, "%s", action ? action : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(x->reason, sizeof x->reason, fmt, ap);
  va_end(ap);
  /* Names, notes and NCCL's warnings come from files and logs: no terminal
   * escapes reach the screen. */
  p2pk_text_printable(x->reason);
  p2pk_text_printable(x->action);
  p2pk_text_printable(x->subject);
  x->value = x->expected = NAN;
  return x;
}

const char *p2pk_doc_level_name(p2pk_doc_level level) {
  switch (level) {
    case P2PK_DOC_OK: return "OK";
    case P2PK_DOC_WARN: return "WARN";
    case P2PK_DOC_FAIL: return "FAIL";
    case P2PK_DOC_SKIP: return "SKIP";
  }
  return "?";
}

int p2pk_doctor_exit_code(const p2pk_findings *f) {
  int rc = 0;
  for (int i = 0; i < f->n; i++) {
    if (f->v[i].level == P2PK_DOC_FAIL) rc = 2;
    else if (f->v[i].level == P2PK_DOC_WARN && rc < 1) rc = 1;
  }
  return rc;
}

int p2pk_findings_count(const p2pk_findings *f, p2pk_doc_level level) {
  int n = 0;
  for (int i = 0; i < f->n; i++) n += f->v[i].level == level;
  return n;
}

const p2pk_finding *p2pk_findings_find(const p2pk_findings *f, const char *check,
                                       const char *subject) {
  for (int i = 0; i < f->n; i++)
    if (strcmp(f->v[i].check, check) == 0 && (!subject || strcmp(f->v[i].subject, subject) == 0))
      return &f->v[i];
  return NULL;
}

/* The title names a recorded machine by its file and host: made printable. */
static void printable_title(const char *title, char *buf, size_t len) {
  snprintf(buf, len, "%s", title);
  p2pk_text_printable(buf);
}

void p2pk_doctor_print_text(const p2pk_findings *f, const char *title, FILE *out) {
  char t[512];
  printable_title(title, t, sizeof t);
  fprintf(out, "p2pkit doctor: %s\n\n", t);
  for (int i = 0; i < f->n; i++) {
    const p2pk_finding *x = &f->v[i];
    fprintf(out, "%-4s  %-10s %-10s %s\n", p2pk_doc_level_name(x->level), x->subject, x->check,
            x->reason);
    if (x->action[0] && x->level != P2PK_DOC_OK)
      fprintf(out, "%-4s  %-10s %-10s -> %s\n", "", "", "", x->action);
  }
  int rc = p2pk_doctor_exit_code(f);
  fprintf(out, "\n%d OK, %d WARN, %d FAIL, %d skipped: %s (exit %d)\n",
          p2pk_findings_count(f, P2PK_DOC_OK), p2pk_findings_count(f, P2PK_DOC_WARN),
          p2pk_findings_count(f, P2PK_DOC_FAIL), p2pk_findings_count(f, P2PK_DOC_SKIP),
          rc == 0 ? "no problem found"
          : rc == 1 ? "works, but not at full speed or not everywhere (see WARN)"
                    : "something is broken (see FAIL)",
          rc);
}

void p2pk_doctor_print_json(const p2pk_findings *f, const char *title, FILE *out) {
  p2pk_json j;
  char t[512];
  printable_title(title, t, sizeof t);
  p2pk_json_init(&j, out);
  p2pk_json_obj(&j, NULL);
  p2pk_json_int(&j, "schema_version", DOCTOR_JSON_SCHEMA_VERSION);
  p2pk_json_str(&j, "machine", t);
  p2pk_json_int(&j, "exit_code", p2pk_doctor_exit_code(f));
  p2pk_json_obj(&j, "summary");
  for (int l = P2PK_DOC_OK; l <= P2PK_DOC_SKIP; l++)
    p2pk_json_int(&j, p2pk_doc_level_name((p2pk_doc_level)l), p2pk_findings_count(f, (p2pk_doc_level)l));
  p2pk_json_obj_end(&j);
  p2pk_json_arr(&j, "findings");
  for (int i = 0; i < f->n; i++) {
    const p2pk_finding *x = &f->v[i];
    p2pk_json_obj(&j, NULL);
    p2pk_json_str(&j, "level", p2pk_doc_level_name(x->level));
    p2pk_json_str(&j, "check", x->check);
    p2pk_json_str(&j, "subject", x->subject);
    p2pk_json_str(&j, "reason", x->reason);
    if (x->action[0]) p2pk_json_str(&j, "action", x->action);
    else p2pk_json_null(&j, "action");
    if (!isnan(x->value)) p2pk_json_num(&j, "gbps", x->value);
    if (!isnan(x->expected)) p2pk_json_num(&j, "expected_gbps", x->expected);
    p2pk_json_obj_end(&j);
  }
  p2pk_json_arr_end(&j);
  p2pk_json_obj_end(&j);
  p2pk_json_finish(&j);
}
