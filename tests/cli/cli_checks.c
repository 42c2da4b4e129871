/* SPDX-License-Identifier: MIT */
/* Checks the CLI suites share. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <check.h>

#include "cli_checks.h"

void check_one_line_error(const struct cli_result *r, const char *prefix)
{
    ck_assert_msg(r->status != 0, "exit status 0; stderr: %s", r->err);
    ck_assert_msg(count_lines(r->err) == 1, "expected one line on stderr, got: %s", r->err);
    ck_assert_msg(strncmp(r->err, prefix, strlen(prefix)) == 0, "stderr '%s' lacks prefix '%s'",
                  r->err, prefix);
}

const char *line_of(const char *text, const char *needle, char *buf, size_t len)
{
    const char *p = strstr(text, needle);
    if (p == NULL)
        return NULL;
    while (p > text && p[-1] != '\n')
        p--;
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n >= len)
        n = len - 1;
    memcpy(buf, p, n);
    buf[n] = '\0';
    return buf;
}

void state_file_of(const struct fake_sysfs *fs, const char *name, char *buf, size_t len)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/%s", fs->state_dir, name);
    FILE *f = fopen(p, "re");
    buf[0] = '\0';
    if (f == NULL) {
        snprintf(buf, len, "<missing>");
        return;
    }
    if (fgets(buf, (int)len, f) == NULL)
        buf[0] = '\0';
    fclose(f);
}
