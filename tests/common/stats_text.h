/* SPDX-License-Identifier: MIT */
/*
 * Small strict readers of what the stats socket serves (npuvfio/stats.h),
 * for tests: a number at a path of keys in the JSON reply, and samples of
 * the Prometheus text exposition (every line checked against the format:
 * `# HELP`, `# TYPE name counter|gauge|histogram`, `name{label="v",...} value`).
 * Failures are Check assertions.
 */
#ifndef NPV_TEST_STATS_TEXT_H
#define NPV_TEST_STATS_TEXT_H

#include <stdint.h>

/* The value of key in the JSON object at p, or NULL. */
const char *json_member(const char *p, const char *key);
/* The unsigned number at the NULL-terminated path of object keys. */
uint64_t json_num(const char *doc, const char *const *path);
/* The sum over every device of the stats JSON of its total's key ("requests", "ok", ...). */
uint64_t json_sum_devices(const char *doc, const char *key);
/*
 * Check every line of text against the format and return the value of the
 * one sample named name whose labels include want (e.g. `queue="ring0"`;
 * NULL: any); fails unless exactly one matches.
 */
double prom_value(const char *text, const char *name, const char *want);
/* The same check; the sum of every sample named name (at least one). */
double prom_sum(const char *text, const char *name);

#endif
