/* SPDX-License-Identifier: MIT */
/* A strict RFC 8259 validator, so tests can say "exactly one JSON document". */
#ifndef NPV_TEST_JSON_CHECK_H
#define NPV_TEST_JSON_CHECK_H

#include <stdbool.h>

/* True when s is one JSON value with optional surrounding whitespace. */
bool json_valid_document(const char *s);

#endif
