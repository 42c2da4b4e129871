/* SPDX-License-Identifier: MIT */
/* Recursive-descent JSON validation (no values kept). */
#include <ctype.h>
#include <string.h>

#include "json_check.h"

static const char *value(const char *p, int depth);

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

static const char *string(const char *p)
{
    if (*p++ != '"')
        return NULL;
    while (*p != '"') {
        if ((unsigned char)*p < 0x20)
            return NULL;
        if (*p == '\\') {
            p++;
            if (*p == 'u') {
                for (int i = 1; i <= 4; i++)
                    if (!isxdigit((unsigned char)p[i]))
                        return NULL;
                p += 4;
            } else if (!strchr("\"\\/bfnrt", *p) || *p == '\0') {
                return NULL;
            }
        }
        p++;
    }
    return p + 1;
}

static const char *number(const char *p)
{
    if (*p == '-')
        p++;
    if (*p == '0')
        p++;
    else if (isdigit((unsigned char)*p))
        while (isdigit((unsigned char)*p))
            p++;
    else
        return NULL;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return NULL;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-')
            p++;
        if (!isdigit((unsigned char)*p))
            return NULL;
        while (isdigit((unsigned char)*p))
            p++;
    }
    return p;
}

static const char *container(const char *p, int depth, char close, bool object)
{
    p = ws(p + 1);
    if (*p == close)
        return p + 1;
    for (;;) {
        if (object) {
            p = string(ws(p));
            if (p == NULL)
                return NULL;
            p = ws(p);
            if (*p++ != ':')
                return NULL;
        }
        p = value(p, depth + 1);
        if (p == NULL)
            return NULL;
        p = ws(p);
        if (*p == close)
            return p + 1;
        if (*p++ != ',')
            return NULL;
    }
}

static const char *value(const char *p, int depth)
{
    if (depth > 64)
        return NULL;
    p = ws(p);
    switch (*p) {
    case '{':
        return container(p, depth, '}', true);
    case '[':
        return container(p, depth, ']', false);
    case '"':
        return string(p);
    case 't':
        return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
        return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
        return number(p);
    }
}

bool json_valid_document(const char *s)
{
    const char *p = value(s, 0);
    return p != NULL && *ws(p) == '\0';
}
