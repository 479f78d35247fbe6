/* SPDX-License-Identifier: BSD-3-Clause */
/* The doctor's "settings" check: p2pkit's own settings in this process's
 * environment that keep it off its fast paths. A machine can be healthy and
 * still move data slowly because P2PKIT_P2P_DISABLE=1 was left in a job
 * script; the doctor should say so like NCCL_P2P_DISABLE (checks.c's NCCL
 * findings). Live only: a recorded machine's settings are not ours. */
#include <stdio.h>
#include <string.h>

#include "coll/select/select.h" /* the copy engines' hardware queues */
#include "core/check.h"
#include "core/param.h"
#include "doctor/doctor.h"
#include "topo/topo.h"
#include "xfer/xfer.h"

/* One finding listing every P2PKIT_* setting taken from the environment. */
static void list_settings(p2pk_findings *f) {
  char list[400] = "";
  size_t o = 0;
  int n = 0;
  for (size_t i = 0; i < p2pk_param_count(); i++) {
    const p2pk_param_def *d = p2pk_param_at(i);
    if (!p2pk_param_is_set(d->name)) continue;
    n++;
    const int w = snprintf(list + o, sizeof list - o, "%s%s=%s", o ? ", " : "", d->name,
                           p2pk_param_shown(d->name));
    if (w > 0 && (size_t)w < sizeof list - o) o += (size_t)w;
  }
  if (!n)
    p2pk_finding_add(f, P2PK_DOC_OK, "settings", "p2pkit", NULL,
                     "no P2PKIT_* setting in the environment: p2pkit's defaults are in force");
  else
    p2pk_finding_add(f, P2PK_DOC_OK, "settings", "p2pkit", "`p2pkit env` says what each does",
                     "%d P2PKIT_* setting%s from the environment: %s", n, n == 1 ? "" : "s", list);
}

/* Pairs whose hardware allows P2P but the settings do not. */
static void check_level(const struct p2pkit_topo *t, const p2pk_xfer_settings *s, p2pk_findings *f) {
  for (int a = 0; t && a < t->ngpus; a++)
    for (int b = a + 1; b < t->ngpus; b++) {
      p2pkit_pair_t pair;
      if (p2pkit_topo_pair((p2pkit_topo_t)t, a, b, &pair) != P2PKIT_SUCCESS || !pair.p2p) continue;
      char why[160] = "";
      if (p2pk_p2p_allowed(&pair, s, why, sizeof why)) continue;
      char subject[24];
      snprintf(subject, sizeof subject, "GPU%d-GPU%d", a, b);
      p2pk_finding_add(f, P2PK_DOC_WARN, "settings", subject,
                       s->p2p_disable ? "unset P2PKIT_P2P_DISABLE (it is meant for tests and "
                                        "comparisons)"
                                      : "unset P2PKIT_P2P_LEVEL, or raise it",
                       "P2P works on this pair (%s), but p2pkit will not use it: %s; its copies "
                       "and collectives go through host memory",
                       pair.label[0] ? pair.label : "?", why);
    }
}

void p2pk_doc_check_settings(const p2pk_doc_input *in, p2pk_findings *f) {
  if (!in->live) return;
  list_settings(f);
  char unknown[400];
  const int nu = p2pk_param_unknown(unknown, sizeof unknown);
  if (nu)
    p2pk_finding_add(f, P2PK_DOC_WARN, "settings", "names", "fix the name, or unset it",
                     "%d P2PKIT_* variable%s p2pkit does not know, so %s no effect: %s", nu,
                     nu == 1 ? "" : "s", nu == 1 ? "it has" : "they have", unknown);
  p2pk_xfer_settings s;
  if (p2pk_xfer_settings_read(&s) != P2PKIT_SUCCESS) {
    p2pk_finding_add(f, P2PK_DOC_FAIL, "settings", "values", "fix or unset that setting",
                     "p2pkit refuses its settings: %s", p2pkit_last_error());
    return;
  }
  check_level(in->topo, &s, f);
  if (p2pk_param_int("P2PKIT_PDL") == 0)
    p2pk_finding_add(f, P2PK_DOC_WARN, "settings", "P2PKIT_PDL", "unset P2PKIT_PDL",
                     "P2PKIT_PDL=0: collective kernels are plain launches, so each waits for the "
                     "one before it to end before it starts (small calls take longer)");
  if (p2pk_param_int("P2PKIT_SHARE_GPUS") != 0)
    p2pk_finding_add(f, P2PK_DOC_WARN, "settings", "P2PKIT_SHARE_GPUS", "unset P2PKIT_SHARE_GPUS",
                     "P2PKIT_SHARE_GPUS is on: ranks of a job may share a GPU, whose kernels then "
                     "take turns on it (a setting for checking results with more ranks than GPUs, "
                     "never for speed)");
  const int q = p2pk_ce_queues();
  if (q < P2PK_CE_QUEUES)
    p2pk_finding_add(f, P2PK_DOC_WARN, "settings", "hardware queues",
                     "unset CUDA_DEVICE_MAX_CONNECTIONS, or set it to 8 or more, where the job "
                     "allows",
                     "CUDA_DEVICE_MAX_CONNECTIONS=%d: with a process per GPU p2pkit's copy-engine "
                     "paths wait on the peers on several streams at once and need %d hardware "
                     "queues, so the kernels carry every size (large collectives and send/recv "
                     "lose the copy engines' edge)", q, P2PK_CE_QUEUES);
  if (p2pk_param_int("P2PKIT_CEP_TRACE") > 0)
    p2pk_finding_add(f, P2PK_DOC_WARN, "settings", "P2PKIT_CEP_TRACE", "unset P2PKIT_CEP_TRACE",
                     "P2PKIT_CEP_TRACE is on: a diagnostic that makes each copy-engine call "
                     "wait for the one before it to be logged");
}
