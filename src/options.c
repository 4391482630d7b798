/* options.c — the one options table (HAK_OPTIONS in hakmem_internal.h):
 * each option is read once from HAKMEM_<NAME> at init and parsed by its
 * kind. A malformed value gets one warning and the default; a number out of
 * range is clamped with a warning; an unknown HAKMEM_ variable gets a
 * warning. The table prints values as users type them. Reading the
 * environment never allocates. */
#include "hakmem_internal.h"

#include <unistd.h>

struct option_desc {
  const char *name;
  enum hak_option_kind kind;
  long def, lo, hi;
  const char *words;                   /* ENUM: "word|word"; else NULL */
  const char *doc;
};

static const struct option_desc options[HAK_OPT_COUNT] = {
#define HAK_OPT_DESC(name, kind, def, lo, hi, words, doc) { #name, HAK_KIND_##kind, def, lo, hi, words, doc },
  HAK_OPTIONS(HAK_OPT_DESC)
#undef HAK_OPT_DESC
};

static long values[HAK_OPT_COUNT];
static const char *texts[HAK_OPT_COUNT];           /* as given, when valid */
static uint32_t lists[HAK_OPT_COUNT][HAK_OPT_LIST_MAX];

/* The index of word s (len bytes) in "a|b|c", or -1. */
static long word_index(const char *words, const char *s) {
  size_t len = strlen(s);
  for (long i = 0; words && *words; i++) {
    const char *end = strchr(words, '|');
    size_t n = end ? (size_t)(end - words) : strlen(words);
    if (n == len && !strncmp(words, s, n)) return i;
    words += n + (end != NULL);
  }
  return -1;
}

/* Comma-separated numbers, each item into lists[id] (an empty one is 0). */
static bool parse_list(enum hak_option_id id, const char *s) {
  for (const char *c = s; *c; c++)
    if (!(*c == ',' || (*c >= '0' && *c <= '9'))) return false;
  for (unsigned i = 0; *s && i < HAK_OPT_LIST_MAX; i++) {
    uint32_t v = 0;
    for (; *s >= '0' && *s <= '9'; s++) if (v < 100000) v = v * 10 + (uint32_t)(*s - '0');
    lists[id][i] = v;
    if (*s == ',') s++;
  }
  return true;
}

/* Words and lists, the forms that are not a number. */
static bool parse_word(enum hak_option_id id, const char *s, long *out) {
  const struct option_desc *o = &options[id];
  long w = word_index(o->words, s);
  if (o->kind == HAK_KIND_ENUM && w >= 0) { *out = w; return true; }
  if (o->kind == HAK_KIND_NUMBER && w >= 0) { *out = -1 - w; return true; }
  if (o->kind == HAK_KIND_REPORT && !strncmp(s, "json:", 5) && s[5]) { *out = 2; return true; }
  if (o->kind == HAK_KIND_LIST && parse_list(id, s)) { *out = 1; return true; }
  if (o->kind == HAK_KIND_PATH && *s) { *out = 1; return true; }
  return false;
}

static bool parse_number(const char *s, long *out) {
  long v = 0;
  if (!*s) return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9' || v > 100000000) return false;
    v = v * 10 + (*s - '0');
  }
  *out = v;
  return true;
}

/* How a value of o is typed: its words, its list, or its range. */
static const char *syntax(const struct option_desc *o, char *buf, size_t len) {
  switch (o->kind) {
  case HAK_KIND_ENUM:   return strncmp(o->words, "0|SIGHUP|", 9) ? o->words : "0|SIGNAME|1..31";
  case HAK_KIND_LIST:   return "N,N,...";
  case HAK_KIND_REPORT: return "0|1|json:PATH";
  case HAK_KIND_PATH:   return "PATH";
  case HAK_KIND_BOOL:   return "0|1";
  case HAK_KIND_NUMBER: break;
  }
  snprintf(buf, len, "%ld..%ld%s%s", o->lo, o->hi, o->words ? "|" : "", o->words ? o->words : "");
  return buf;
}

/* A value as a user types it: a word, a list, json:PATH, or the number. */
static const char *typed(const struct option_desc *o, long v, const char *text, char *buf, size_t len) {
  if (o->kind == HAK_KIND_LIST || o->kind == HAK_KIND_PATH) return text ? text : "-";
  if (o->kind == HAK_KIND_REPORT && v == 2 && text) return text;
  bool word = o->kind == HAK_KIND_ENUM || (o->kind == HAK_KIND_NUMBER && v < 0);
  if (o->kind == HAK_KIND_NUMBER && v < 0) v = -1 - v;   /* word -1 - v of a number */
  if (word) {
    const char *w = o->words;
    for (long i = 0; i < v && w; i++) w = strchr(w, '|') ? strchr(w, '|') + 1 : NULL;
    if (w) {
      size_t n = strchr(w, '|') ? (size_t)(strchr(w, '|') - w) : strlen(w);
      snprintf(buf, len, "%.*s", (int)n, w);
      return buf;
    }
  }
  snprintf(buf, len, "%ld", v);
  return buf;
}

static void set_option(enum hak_option_id id, const char *text) {
  const struct option_desc *o = &options[id];
  long v;
  char buf[48];
  texts[id] = text;
  if (parse_word(id, text, &v)) { values[id] = v; return; }
  if (o->kind == HAK_KIND_LIST || o->kind == HAK_KIND_PATH || !parse_number(text, &v)) {
    char def[32];
    _hak_guard_write("hakmem: HAKMEM_%s=%s is not valid (%s); %s%s\n", o->name, text,
                     syntax(o, buf, sizeof buf), o->kind == HAK_KIND_LIST || o->kind == HAK_KIND_PATH ? "ignored" : "using ",
                     o->kind == HAK_KIND_LIST || o->kind == HAK_KIND_PATH ? "" : typed(o, o->def, NULL, def, sizeof def));
    values[id] = o->def;
    texts[id] = NULL;
    return;
  }
  if (v < o->lo || v > o->hi) {
    long clamped = v < o->lo ? o->lo : o->hi;
    _hak_guard_write("hakmem: HAKMEM_%s=%s is outside %ld..%ld; using %ld\n",
                     o->name, text, o->lo, o->hi, clamped);
    v = clamped;
    texts[id] = NULL;
  }
  values[id] = v;
}

void _hak_options_init(void) {
  for (unsigned i = 0; i < HAK_OPT_COUNT; i++) values[i] = options[i].def;
  for (char **e = environ; e && *e; e++) {
    const char *kv = *e;
    if (strncmp(kv, "HAKMEM_", 7)) continue;
    const char *name = kv + 7, *eq = strchr(name, '=');
    if (!eq) continue;
    size_t len = (size_t)(eq - name);
    unsigned id = 0;
    while (id < HAK_OPT_COUNT && !(strlen(options[id].name) == len && !strncmp(options[id].name, name, len)))
      id++;
    if (id == HAK_OPT_COUNT) {
      _hak_guard_write("hakmem: unknown option %.*s ignored (see: hakmem options)\n",
                       (int)(len + 7), kv);
      continue;
    }
    set_option((enum hak_option_id)id, eq + 1);
  }
}

long _hak_options_get(enum hak_option_id id) { return values[id]; }

unsigned _hak_options_list(enum hak_option_id id, unsigned i) {
  return i < HAK_OPT_LIST_MAX ? lists[id][i] : 0;
}

const char *_hak_options_path(enum hak_option_id id) {
  if (options[id].kind == HAK_KIND_PATH) return values[id] ? texts[id] : NULL;
  return options[id].kind == HAK_KIND_REPORT && values[id] == 2 ? texts[id] + 5 : NULL;
}

void _hak_options_print(void) {
  _hak_guard_write("%-28s %8s %8s %12s  %s\n", "option", "default", "value", "range", "meaning");
  for (unsigned i = 0; i < HAK_OPT_COUNT; i++) {
    const struct option_desc *o = &options[i];
    char def[32], val[32], range[32];
    _hak_guard_write("HAKMEM_%-21s %8s %8s %12s  %s\n", o->name, typed(o, o->def, NULL, def, sizeof def),
                     typed(o, values[i], texts[i], val, sizeof val), syntax(o, range, sizeof range), o->doc);
  }
}
