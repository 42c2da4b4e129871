/* SPDX-License-Identifier: MIT */
/* Readers of the stats socket's JSON and Prometheus text for tests (stats_text.h). */
#include <check.h>
#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "stats_text.h"

/* ---- a small JSON reader: the number at a path of object keys ---- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
        p++;
    return p;
}

static const char *skip_value(const char *p);

static const char *skip_string(const char *p)
{
    ck_assert_int_eq(*p, '"');
    for (p++; *p != '"'; p++) {
        ck_assert_int_ne(*p, '\0');
        if (*p == '\\')
            p++;
    }
    return p + 1;
}

static const char *skip_value(const char *p)
{
    p = skip_ws(p);
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = skip_ws(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (close == '}') {
                p = skip_ws(skip_string(skip_ws(p)));
                ck_assert_int_eq(*p, ':');
                p++;
            }
            p = skip_ws(skip_value(p));
            if (*p == ',') {
                p++;
                continue;
            }
            ck_assert_int_eq(*p, close);
            return p + 1;
        }
    }
    while (*p != '\0' && *p != ',' && *p != '}' && *p != ']' && !isspace((unsigned char)*p))
        p++;
    return p;
}

/* The value of key in the object at p, or NULL. */
const char *json_member(const char *p, const char *key)
{
    p = skip_ws(p);
    ck_assert_int_eq(*p, '{');
    p = skip_ws(p + 1);
    size_t klen = strlen(key);
    while (*p == '"') {
        const char *k = p + 1;
        const char *end = skip_string(p);
        bool match = (size_t)(end - 1 - k) == klen && memcmp(k, key, klen) == 0;
        p = skip_ws(end);
        ck_assert_int_eq(*p, ':');
        p = skip_ws(p + 1);
        if (match)
            return p;
        p = skip_ws(skip_value(p));
        if (*p == ',')
            p = skip_ws(p + 1);
    }
    return NULL;
}

uint64_t json_num(const char *doc, const char *const *path)
{
    const char *p = doc;
    for (; *path != NULL; path++) {
        p = json_member(p, *path);
        ck_assert_msg(p != NULL, "no member %s", *path);
    }
    char *end;
    unsigned long long v = strtoull(p, &end, 10);
    ck_assert_ptr_ne(end, p);
    return v;
}

/* ---- a small Prometheus text exposition reader ---- */

static bool metric_name_ok(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!(isalpha((unsigned char)c) || c == '_' || c == ':' ||
              (i > 0 && isdigit((unsigned char)c))))
            return false;
    }
    return n > 0;
}

/*
 * Check every line of text against the format (comments HELP/TYPE, samples
 * name{label="value",...} value) and return the value of the sample named
 * name whose labels include want (e.g. `queue="ring0"`); fails if absent.
 */
static double prom_scan(const char *text, const char *name, const char *want, int *hits_out)
{
    double found = 0;
    int hits = 0;
    const char *line = text;
    while (*line != '\0') {
        const char *nl = strchr(line, '\n');
        ck_assert_msg(nl != NULL, "every line ends with a newline");
        if (line[0] == '#') {
            ck_assert(strncmp(line, "# HELP ", 7) == 0 || strncmp(line, "# TYPE ", 7) == 0);
            if (strncmp(line, "# TYPE ", 7) == 0) {
                const char *type = memchr(line + 7, ' ', (size_t)(nl - line - 7));
                ck_assert_ptr_nonnull(type);
                ck_assert(strncmp(type + 1, "counter\n", 8) == 0 ||
                          strncmp(type + 1, "gauge\n", 6) == 0 ||
                          strncmp(type + 1, "histogram\n", 10) == 0);
            }
            line = nl + 1;
            continue;
        }
        size_t nlen = strcspn(line, "{ ");
        ck_assert_msg(metric_name_ok(line, nlen), "bad metric name in %.*s", (int)(nl - line),
                      line);
        const char *p = line + nlen;
        const char *labels = p;
        if (*p == '{') {
            p++;
            while (*p != '}') {
                size_t ln = strcspn(p, "=");
                ck_assert(metric_name_ok(p, ln));
                p += ln;
                ck_assert_int_eq(p[0], '=');
                ck_assert_int_eq(p[1], '"');
                p = strchr(p + 2, '"');
                ck_assert_ptr_nonnull(p);
                p++;
                if (*p == ',')
                    p++;
            }
            p++;
        }
        ck_assert_int_eq(*p, ' ');
        char *end;
        double v = strtod(p + 1, &end);
        ck_assert_ptr_eq(end, nl);
        if (strlen(name) == nlen && strncmp(line, name, nlen) == 0 &&
            (want == NULL ||
             (labels < p && memmem(labels, (size_t)(p - labels), want, strlen(want)) != NULL))) {
            found += v;
            hits++;
        }
        line = nl + 1;
    }
    *hits_out = hits;
    return found;
}

double prom_value(const char *text, const char *name, const char *want)
{
    int hits;
    double v = prom_scan(text, name, want, &hits);
    ck_assert_msg(hits == 1, "%s{%s}: %d samples", name, want ? want : "", hits);
    return v;
}

double prom_sum(const char *text, const char *name)
{
    int hits;
    double v = prom_scan(text, name, NULL, &hits);
    ck_assert_msg(hits >= 1, "%s: no sample", name);
    return v;
}

uint64_t json_sum_devices(const char *doc, const char *key)
{
    const char *p = json_member(doc, "devices");
    ck_assert_msg(p != NULL, "no member devices");
    p = skip_ws(p);
    ck_assert_int_eq(*p, '{');
    p = skip_ws(p + 1);
    uint64_t sum = 0;
    while (*p == '"') {
        p = skip_ws(skip_string(p));
        ck_assert_int_eq(*p, ':');
        p = skip_ws(p + 1);
        const char *total = json_member(p, "total");
        ck_assert_msg(total != NULL, "a device without total");
        const char *v = json_member(total, key);
        ck_assert_msg(v != NULL, "no member %s", key);
        char *end;
        sum += strtoull(v, &end, 10);
        ck_assert_ptr_ne(end, v);
        p = skip_ws(skip_value(p));
        if (*p == ',')
            p = skip_ws(p + 1);
    }
    ck_assert_int_eq(*p, '}');
    return sum;
}
