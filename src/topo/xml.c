/* SPDX-License-Identifier: BSD-3-Clause */
/* A small, non-validating XML reader (see xml.h). It never reads past `end`,
 * bounds depth, node count, names and values, and frees everything it built
 * when it fails. */
#include "topo/xml.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/check.h"

typedef struct {
  const char *file;
  const char *p, *end;
  int line;
  int nodes;
} cursor;

__attribute__((format(printf, 2, 3))) static p2pkit_status_t xml_error(const cursor *c, const char *fmt,
                                                                       ...) {
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: %s", c->file, c->line, what);
}
#ifdef __clang_analyzer__ /* as p2pk_fail in core/check.h: a failure returns its status */
#define xml_error(c, ...) ((void)xml_error(c, __VA_ARGS__), P2PKIT_ERR_PARSE)
#endif

static int at_end(const cursor *c) { return c->p >= c->end; }

static int starts(const cursor *c, const char *s) {
  size_t n = strlen(s);
  return (size_t)(c->end - c->p) >= n && memcmp(c->p, s, n) == 0;
}

static void advance(cursor *c, size_t n) {
  for (size_t i = 0; i < n && c->p < c->end; i++, c->p++)
    if (*c->p == '\n') c->line++;
}

static int is_space(char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }

static void skip_space(cursor *c) {
  while (!at_end(c) && is_space(*c->p)) advance(c, 1);
}

static int name_start(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == ':' || ch >= 0x80;
}

static int name_char(unsigned char ch) {
  return name_start(ch) || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.';
}

/* Skip to just past `stop`; `what` names the construct when it never ends. */
static p2pkit_status_t skip_past(cursor *c, const char *stop, const char *what) {
  int line = c->line;
  while (!at_end(c) && !starts(c, stop)) advance(c, 1);
  if (at_end(c)) {
    c->line = line;
    return xml_error(c, "%s is not closed (expected '%s')", what, stop);
  }
  advance(c, strlen(stop));
  return P2PKIT_SUCCESS;
}

/* <!DOCTYPE ...>, with an internal subset in [...] and quoted strings. */
static p2pkit_status_t skip_decl(cursor *c) {
  int line = c->line, bracket = 0;
  char quote = 0;
  advance(c, 2);
  for (; !at_end(c); advance(c, 1)) {
    char ch = *c->p;
    if (quote) {
      if (ch == quote) quote = 0;
    } else if (ch == '"' || ch == '\'') {
      quote = ch;
    } else if (ch == '[') {
      bracket++;
    } else if (ch == ']' && bracket > 0) {
      bracket--;
    } else if (ch == '>' && bracket == 0) {
      advance(c, 1);
      return P2PKIT_SUCCESS;
    }
  }
  c->line = line;
  return xml_error(c, "<!...> declaration is not closed (expected '>')");
}

static p2pkit_status_t read_name(cursor *c, char **out) {
  const char *s = c->p;
  if (at_end(c)) return xml_error(c, "expected a name, found the end of the file");
  if (!name_start((unsigned char)*c->p))
    return xml_error(c, "expected a name, found '%c'", *c->p > ' ' && *c->p < 0x7f ? *c->p : '?');
  while (!at_end(c) && name_char((unsigned char)*c->p)) advance(c, 1);
  size_t n = (size_t)(c->p - s);
  if (n > P2PK_XML_MAX_NAME) return xml_error(c, "name longer than %d characters", P2PK_XML_MAX_NAME);
  char *name = malloc(n + 1);
  if (!name) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory parsing %s", c->file);
  memcpy(name, s, n);
  name[n] = '\0';
  *out = name;
  return P2PKIT_SUCCESS;
}

static size_t put_utf8(char *o, unsigned long cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xc0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (char)(0xe0 | (cp >> 12));
    o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | (cp >> 18));
  o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* &#NN; or &#xHH; (s points past "&#", n bytes up to the ';'). */
static int char_ref(const char *s, size_t n, unsigned long *cp) {
  int hex = n > 0 && s[0] == 'x';
  size_t i = hex ? 1 : 0;
  unsigned long v = 0;
  if (i >= n || n - i > 7) return -1;
  for (; i < n; i++) {
    char ch = s[i];
    int d = ch >= '0' && ch <= '9'          ? ch - '0'
            : hex && ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
            : hex && ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                            : -1;
    if (d < 0) return -1;
    v = v * (hex ? 16 : 10) + (unsigned long)d;
  }
  if (v == 0 || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return -1;
  *cp = v;
  return 0;
}

/* Decode the entity at s (just past '&'), at most `avail` bytes; writes the
 * text to o. Returns bytes consumed after '&', 0 when it is not one we know. */
static size_t entity(const char *s, size_t avail, char *o, size_t *olen) {
  static const struct {
    const char *name;
    char ch;
  } known[] = {{"lt;", '<'}, {"gt;", '>'}, {"amp;", '&'}, {"quot;", '"'}, {"apos;", '\''}};
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    size_t n = strlen(known[i].name);
    if (avail >= n && memcmp(s, known[i].name, n) == 0) {
      o[0] = known[i].ch;
      *olen = 1;
      return n;
    }
  }
  const char *semi = avail > 1 && s[0] == '#' ? memchr(s, ';', avail < 12 ? avail : 12) : NULL;
  unsigned long cp;
  if (!semi || char_ref(s + 1, (size_t)(semi - s - 1), &cp) != 0) return 0;
  *olen = put_utf8(o, cp);
  return (size_t)(semi - s) + 1;
}

static p2pkit_status_t read_value(cursor *c, char **out) {
  char quote = *c->p;
  advance(c, 1);
  const char *s = c->p;
  const char *q = memchr(s, quote, (size_t)(c->end - s));
  if (!q) return xml_error(c, "attribute value is not closed (expected %c)", quote);
  if ((size_t)(q - s) > P2PK_XML_MAX_VALUE)
    return xml_error(c, "attribute value longer than %d bytes", P2PK_XML_MAX_VALUE);
  /* Decoded text is never longer than the raw text. */
  char *v = malloc((size_t)(q - s) + 1);
  if (!v) return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory parsing %s", c->file);
  size_t o = 0;
  while (c->p < q) {
    char ch = *c->p;
    if (ch == '<' || ch == '\0') {
      free(v);
      return xml_error(c, "'%s' is not allowed in an attribute value", ch ? "<" : "NUL");
    }
    if (ch != '&') {
      v[o++] = ch;
      advance(c, 1);
      continue;
    }
    size_t olen = 0, used = entity(c->p + 1, (size_t)(q - c->p - 1), v + o, &olen);
    if (!used) {
      free(v);
      return xml_error(c, "unknown entity: expected &lt; &gt; &amp; &quot; &apos; or &#N;");
    }
    o += olen;
    advance(c, used + 1);
  }
  v[o] = '\0';
  advance(c, 1); /* the closing quote */
  *out = v;
  return P2PKIT_SUCCESS;
}

static p2pkit_status_t add_attr(cursor *c, p2pk_xml_node *n, char *name, char *value) {
  for (int i = 0; i < n->nattrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) {
      p2pkit_status_t st = xml_error(c, "attribute '%s' given twice in <%s>", name, n->name);
      free(name);
      free(value);
      return st;
    }
  if (n->nattrs >= P2PK_XML_MAX_ATTRS) {
    free(name);
    free(value);
    return xml_error(c, "<%s> has more than %d attributes", n->name, P2PK_XML_MAX_ATTRS);
  }
  if (!n->attrs) {
    n->attrs = calloc(P2PK_XML_MAX_ATTRS, sizeof *n->attrs);
    if (!n->attrs) {
      free(name);
      free(value);
      return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory parsing %s", c->file);
    }
  }
  n->attrs[n->nattrs++] = (p2pk_xml_attr){name, value};
  return P2PKIT_SUCCESS;
}

/* Attributes up to '>' or '/>'; *closed set for the self-closing form. */
static p2pkit_status_t read_attrs(cursor *c, p2pk_xml_node *n, int *closed) {
  for (;;) {
    int had_space = !at_end(c) && is_space(*c->p);
    skip_space(c);
    if (at_end(c) || (*c->p == '/' && c->p + 1 == c->end))
      return xml_error(c, "<%s> is cut off (expected '>')", n->name);
    if (*c->p == '>' || starts(c, "/>")) {
      *closed = *c->p == '/';
      advance(c, *closed ? 2 : 1);
      return P2PKIT_SUCCESS;
    }
    if (!had_space) return xml_error(c, "expected a space, '>' or '/>' in <%s>", n->name);
    char *name = NULL, *value = NULL;
    P2PK_CHECK(read_name(c, &name));
    skip_space(c);
    if (at_end(c) || *c->p != '=') {
      free(name);
      return xml_error(c, "expected '=' after attribute name in <%s>", n->name);
    }
    advance(c, 1);
    skip_space(c);
    if (at_end(c) || (*c->p != '"' && *c->p != '\'')) {
      free(name);
      return xml_error(c, "expected a quoted attribute value in <%s>", n->name);
    }
    p2pkit_status_t st = read_value(c, &value);
    if (st != P2PKIT_SUCCESS) {
      free(name);
      return st;
    }
    P2PK_CHECK(add_attr(c, n, name, value));
  }
}

static void link_child(p2pk_xml_node *parent, p2pk_xml_node *n) {
  n->parent = parent;
  if (!parent) return;
  if (parent->last_child)
    parent->last_child->next = n;
  else
    parent->first_child = n;
  parent->last_child = n;
}

/* A start tag at c->p ('<' name ...). The new node is linked under `parent`
 * (or returned as the root) before its attributes are read, so one free of
 * the root releases it on every error path. */
static p2pkit_status_t start_tag(cursor *c, p2pk_xml_node *parent, p2pk_xml_node **node_p, int *closed) {
  if (++c->nodes > P2PK_XML_MAX_NODES) return xml_error(c, "more than %d elements", P2PK_XML_MAX_NODES);
  int line = c->line;
  advance(c, 1);
  char *name = NULL;
  P2PK_CHECK(read_name(c, &name));
  p2pk_xml_node *n = calloc(1, sizeof *n);
  if (!n) {
    free(name);
    return p2pk_fail(P2PKIT_ERR_NO_MEMORY, "out of memory parsing %s", c->file);
  }
  n->name = name;
  n->line = line;
  link_child(parent, n);
  *node_p = n;
  return read_attrs(c, n, closed);
}

static p2pkit_status_t end_tag(cursor *c, const p2pk_xml_node *open) {
  char *name = NULL;
  advance(c, 2);
  P2PK_CHECK(read_name(c, &name));
  skip_space(c);
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!open)
    st = xml_error(c, "</%s> closes nothing", name);
  else if (strcmp(name, open->name) != 0)
    st = xml_error(c, "expected </%s> (opened at line %d), found </%s>", open->name, open->line, name);
  else if (at_end(c) || *c->p != '>')
    st = xml_error(c, "expected '>' to end </%s>", name);
  else
    advance(c, 1);
  free(name);
  return st;
}

/* Text between tags is skipped; outside the root only white space may be. */
static p2pkit_status_t skip_text(cursor *c, const p2pk_xml_node *open) {
  while (!at_end(c) && *c->p != '<') {
    if (*c->p == '\0') return xml_error(c, "unexpected NUL byte");
    if (!open && !is_space(*c->p)) return xml_error(c, "text outside the root element");
    advance(c, 1);
  }
  return P2PKIT_SUCCESS;
}

typedef struct {
  p2pk_xml_node *root, *open;
  int depth, done;
} tree_state;

static p2pkit_status_t markup(cursor *c, tree_state *s) {
  if (starts(c, "<!--")) return skip_past(c, "-->", "comment");
  if (starts(c, "<?")) return skip_past(c, "?>", "<?...?> instruction");
  if (starts(c, "<![CDATA[")) {
    if (!s->open) return xml_error(c, "CDATA outside the root element");
    return skip_past(c, "]]>", "CDATA section");
  }
  if (starts(c, "<!")) {
    if (s->root) return xml_error(c, "<!...> declaration inside the document");
    return skip_decl(c);
  }
  if (starts(c, "</")) {
    P2PK_CHECK(end_tag(c, s->open));
    s->open = s->open->parent;
    s->depth--;
    s->done = s->open == NULL;
    return P2PKIT_SUCCESS;
  }
  if (s->done) return xml_error(c, "a second root element (the document already ended)");
  if (s->depth >= P2PK_XML_MAX_DEPTH)
    return xml_error(c, "elements nested deeper than %d", P2PK_XML_MAX_DEPTH);
  p2pk_xml_node *n = NULL;
  int closed = 0;
  p2pkit_status_t st = start_tag(c, s->open, &n, &closed);
  if (n && !s->root) s->root = n;
  if (st != P2PKIT_SUCCESS) return st;
  if (closed) {
    s->done = s->open == NULL;
  } else {
    s->open = n;
    s->depth++;
  }
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_xml_parse(const char *name, const char *text, size_t len, p2pk_xml_node **root_p) {
  cursor c = {name ? name : "(xml)", text, text + len, 1, 0};
  if (starts(&c, "\xef\xbb\xbf")) advance(&c, 3); /* a UTF-8 byte order mark */
  tree_state s = {0};
  p2pkit_status_t st = P2PKIT_SUCCESS;
  for (;;) {
    st = skip_text(&c, s.open);
    if (st != P2PKIT_SUCCESS || at_end(&c)) break;
    st = markup(&c, &s);
    if (st != P2PKIT_SUCCESS) break;
  }
  if (st == P2PKIT_SUCCESS && s.open)
    st = xml_error(&c, "<%s> opened at line %d is not closed", s.open->name, s.open->line);
  if (st == P2PKIT_SUCCESS && !s.root) st = xml_error(&c, "no XML element found");
  if (st != P2PKIT_SUCCESS) {
    p2pk_xml_free(s.root);
    return st;
  }
  *root_p = s.root;
  return P2PKIT_SUCCESS;
}

void p2pk_xml_free(p2pk_xml_node *n) {
  while (n) {
    p2pk_xml_node *next = n->next;
    p2pk_xml_free(n->first_child);
    for (int i = 0; i < n->nattrs; i++) {
      free(n->attrs[i].name);
      free(n->attrs[i].value);
    }
    free(n->attrs);
    free(n->name);
    free(n);
    n = next;
  }
}

const char *p2pk_xml_attr_get(const p2pk_xml_node *n, const char *name) {
  for (int i = 0; i < n->nattrs; i++)
    if (strcmp(n->attrs[i].name, name) == 0) return n->attrs[i].value;
  return NULL;
}

/* --- hwloc XML pre-check ------------------------------------------------------ */

static int ends_with(const char *s, const char *tail) {
  size_t n = strlen(s), m = strlen(tail);
  return n >= m && strcmp(s + n - m, tail) == 0;
}

static int is_blank(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

static int is_hex(char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

/* One 32-bit word as hwloc_bitmap_sscanf reads it (strtoul, base 16): empty
 * (a zero word: hwloc writes "0x00000303,,0x00000001"), or blanks, a sign,
 * "0x" and hex digits, the digits required. */
static int bitmap_word_ok(const char *s, size_t n) {
  size_t i = 0, digits = 0;
  if (n == 0) return 1;
  while (i < n && is_blank(s[i])) i++;
  if (i < n && (s[i] == '+' || s[i] == '-')) i++;
  if (i + 2 < n && s[i] == '0' && (s[i + 1] == 'x' || s[i + 1] == 'X') && is_hex(s[i + 2])) i += 2;
  for (; i < n && is_hex(s[i]); i++) digits++;
  return digits > 0 && i == n;
}

/* Every bitmap hwloc_bitmap_sscanf takes: "0xf...f" alone (full) or first
 * (infinite), then comma-separated words. Except two it takes badly: the
 * empty string (hwloc 2.x reads past its end) and a leading comma (an
 * assert). */
static int hwloc_bitmap_ok(const char *v) {
  if (!*v || *v == ',') return 0;
  if (strncmp(v, "0xf...f", 7) == 0) {
    v += 7;
    if (!*v) return 1;
    if (*v++ != ',') return 0;
  }
  for (;;) {
    size_t n = strcspn(v, ",");
    if (!bitmap_word_ok(v, n)) return 0;
    if (!v[n]) return 1;
    v += n + 1;
  }
}

static p2pkit_status_t check_bitmaps(const char *name, const p2pk_xml_node *n) {
  for (; n; n = n->next) {
    for (int i = 0; i < n->nattrs; i++) {
      const p2pk_xml_attr *a = &n->attrs[i];
      if ((ends_with(a->name, "cpuset") || ends_with(a->name, "nodeset")) && !hwloc_bitmap_ok(a->value))
        return p2pk_fail(P2PKIT_ERR_PARSE,
                         "%s:%d: <%s %s=\"%.40s\">: expected an hwloc bitmap like 0x0000ffff,,0x000000ff",
                         name, n->line, n->name, a->name, a->value);
    }
    /* hwloc's exporter writes both sets of a pair; its importer crashes
     * (hwloc_bitmap_compare_first) when the complete one is missing. */
    if (strcmp(n->name, "object") == 0)
      for (int k = 0; k < 2; k++) {
        const char *set = k ? "nodeset" : "cpuset", *full = k ? "complete_nodeset" : "complete_cpuset";
        if (p2pk_xml_attr_get(n, set) && !p2pk_xml_attr_get(n, full))
          return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: <object %s=...>: expected %s as well", name, n->line,
                           set, full);
      }
    P2PK_CHECK(check_bitmaps(name, n->first_child));
  }
  return P2PKIT_SUCCESS;
}

/* Digits, at most 4 of them, as an int; -1 when there are none or more. */
static int small_number(const char *s, size_t n) {
  if (n == 0 || n > 4 || strspn(s, "0123456789") < n) return -1;
  int v = 0;
  for (size_t i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
  return v;
}

/* <topology version="M.m">; hwloc 1.x wrote no version. */
static p2pkit_status_t hwloc_version(const char *name, const p2pk_xml_node *root, int *major, int *minor) {
  const char *v = p2pk_xml_attr_get(root, "version");
  int a = 1, b = 0;
  if (v) {
    const char *dot = strchr(v, '.');
    a = dot ? small_number(v, (size_t)(dot - v)) : -1;
    b = dot ? small_number(dot + 1, strlen(dot + 1)) : -1;
    if (a < 0 || b < 0)
      return p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: <topology version=\"%.40s\">: expected a version like 2.0",
                       name, root->line, v);
  }
  if (major) *major = a;
  if (minor) *minor = b;
  return P2PKIT_SUCCESS;
}

p2pkit_status_t p2pk_xml_check_hwloc(const char *name, const char *text, size_t len, int *major,
                                     int *minor) {
  p2pk_xml_node *root = NULL;
  P2PK_CHECK(p2pk_xml_parse(name, text, len, &root));
  p2pkit_status_t st = P2PKIT_SUCCESS;
  if (!name) name = "(xml)";
  if (strcmp(root->name, "topology") != 0)
    st = p2pk_fail(P2PKIT_ERR_PARSE, "%s:%d: expected <topology> as the root element, found <%s>", name,
                   root->line, root->name);
  else
    st = hwloc_version(name, root, major, minor);
  if (st == P2PKIT_SUCCESS) st = check_bitmaps(name, root);
  p2pk_xml_free(root);
  return st;
}
