/* options.c — the one options table (HAK_OPTIONS in hakmem_internal.h):
 * each option is read once from HAKMEM_<NAME> at init. A malformed value gets
 * one warning and the default; a number out of range is clamped with a
 * warning; an unknown HAKMEM_ variable gets a warning. Reading the
 * environment never allocates. */
#include "hakmem_internal.h"

#include <unistd.h>

struct option_desc {
  const char *name;
  long def, lo, hi;
  const char *doc;
};

static const struct option_desc options[HAK_OPT_COUNT] = {
#define HAK_OPT_DESC(name, def, lo, hi, doc) { #name, def, lo, hi, doc },
  HAK_OPTIONS(HAK_OPT_DESC)
#undef HAK_OPT_DESC
};

static long values[HAK_OPT_COUNT];
static const char *texts[HAK_OPT_COUNT];

/* Words some options take instead of a number. */
static bool parse_word(enum hak_option_id id, const char *s, long *out) {
  if (id == HAK_OPT_INVALID_FREE) {
    if (!strcmp(s, "abort")) { *out = 0; return true; }
    if (!strcmp(s, "ignore")) { *out = 1; return true; }
  }
  if (id == HAK_OPT_STATS && !strncmp(s, "json:", 5) && s[5]) { *out = 2; return true; }
  if (id == HAK_OPT_L2_RING_CAPS || id == HAK_OPT_L25_RING_CAPS) {   /* a list: read by front.c */
    for (const char *c = s; *c; c++)
      if (!(*c == ',' || (*c >= '0' && *c <= '9'))) return false;
    *out = 1;
    return true;
  }
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

static void set_option(enum hak_option_id id, const char *text) {
  const struct option_desc *o = &options[id];
  long v;
  texts[id] = text;
  if (parse_word(id, text, &v)) { values[id] = v; return; }
  if (!parse_number(text, &v)) {
    _hak_guard_write("hakmem: HAKMEM_%s=%s is not valid (a number in %ld..%ld); using %ld\n",
                     o->name, text, o->lo, o->hi, o->def);
    values[id] = o->def;
    texts[id] = NULL;
    return;
  }
  if (v < o->lo || v > o->hi) {
    long clamped = v < o->lo ? o->lo : o->hi;
    _hak_guard_write("hakmem: HAKMEM_%s=%s is outside %ld..%ld; using %ld\n",
                     o->name, text, o->lo, o->hi, clamped);
    v = clamped;
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

const char *_hak_options_text(enum hak_option_id id) { return texts[id]; }

void _hak_options_print(void) {
  _hak_guard_write("%-28s %8s %8s %12s  %s\n", "option", "default", "value", "range", "meaning");
  for (unsigned i = 0; i < HAK_OPT_COUNT; i++) {
    const struct option_desc *o = &options[i];
    char range[32];
    snprintf(range, sizeof range, "%ld..%ld", o->lo, o->hi);
    _hak_guard_write("HAKMEM_%-21s %8ld %8ld %12s  %s\n", o->name, o->def, values[i],
                     range, o->doc);
  }
}
