/* SPDX-License-Identifier: BSD-3-Clause */
/* A small, non-validating XML reader for the topology files p2pkit reads
 * (NCCL's topology dumps). Elements, attributes in either quote, self-closing
 * tags, comments, <?...?> and <!DOCTYPE>, the five predefined entities; text
 * content is skipped. The input need not be NUL terminated. Errors name the
 * file and the line. */
#ifndef P2PK_XML_H
#define P2PK_XML_H

#include <stddef.h>

#include "p2pkit.h"

#define P2PK_XML_MAX_DEPTH 64
#define P2PK_XML_MAX_NODES 100000
#define P2PK_XML_MAX_ATTRS 64
#define P2PK_XML_MAX_NAME 128
#define P2PK_XML_MAX_VALUE 65536

typedef struct {
  char *name;
  char *value; /* entities decoded */
} p2pk_xml_attr;

typedef struct p2pk_xml_node {
  char *name;
  int line; /* where the start tag begins */
  int nattrs;
  p2pk_xml_attr *attrs;
  struct p2pk_xml_node *parent, *first_child, *last_child, *next;
} p2pk_xml_node;

/* Parse `len` bytes into a tree with exactly one root element.
 * P2PKIT_ERR_PARSE "name:line: ..." on malformed input. */
p2pkit_status_t p2pk_xml_parse(const char *name, const char *text, size_t len, p2pk_xml_node **root_p);
void p2pk_xml_free(p2pk_xml_node *root);
/* Value of an attribute, NULL when absent. */
const char *p2pk_xml_attr_get(const p2pk_xml_node *n, const char *name);

/* hwloc XML, checked before it reaches hwloc: well-formed, and every
 * *cpuset / *nodeset attribute a bitmap hwloc_bitmap_sscanf reads
 * ("0x0000000f", "0xf...f,0x00000003", "0x00000303,,0x00000001"). hwloc 2.x
 * aborts on some malformed bitmaps (an assert in hwloc_bitmap_sscanf), so
 * this turns a crash into an error. *major / *minor (either may be NULL)
 * get the export's format version, <topology version="2.0"> (1.0 when
 * absent, as hwloc 1.x wrote it). */
p2pkit_status_t p2pk_xml_check_hwloc(const char *name, const char *text, size_t len, int *major,
                                     int *minor);

#endif
