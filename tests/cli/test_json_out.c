/* SPDX-License-Identifier: MIT */
/* The CLI's JSON writer: separators, nesting and string escaping. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "json_check.h"
#include "json_out.h"

static char *render(void (*fn)(struct json_out *j))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    struct json_out j;
    json_init(&j, f);
    fn(&j);
    json_finish(&j);
    fclose(f);
    return buf;
}

static void nested(struct json_out *j)
{
    json_begin_object(j);
    json_kv_string(j, "a", "x");
    json_key(j, "list");
    json_begin_array(j);
    json_int(j, -1);
    json_uint(j, 18446744073709551615ull);
    json_bool(j, true);
    json_null(j);
    json_begin_object(j);
    json_end_object(j);
    json_begin_array(j);
    json_end_array(j);
    json_end_array(j);
    json_kv_string(j, "n", NULL);
    json_end_object(j);
}

static void escapes(struct json_out *j)
{
    json_begin_array(j);
    json_string(j, "q\"b\\n\nt\tc\x01 d\x7f \xc3\xa9");
    json_end_array(j);
}

START_TEST(json_out_separates_and_nests)
{
    char *s = render(nested);
    ck_assert_str_eq(s, "{\"a\":\"x\",\"list\":[-1,18446744073709551615,true,null,{},[]],"
                        "\"n\":null}\n");
    ck_assert(json_valid_document(s));
    free(s);
}
END_TEST

START_TEST(json_out_escapes_strings)
{
    char *s = render(escapes);
    ck_assert_str_eq(s, "[\"q\\\"b\\\\n\\nt\\tc\\u0001 d\\u007f \xc3\xa9\"]\n");
    ck_assert(json_valid_document(s));
    free(s);
}
END_TEST

START_TEST(json_check_rejects_non_documents)
{
    ck_assert(!json_valid_document(""));
    ck_assert(!json_valid_document("{} {}"));
    ck_assert(!json_valid_document("{\"a\":}"));
    ck_assert(!json_valid_document("[1,]"));
    ck_assert(!json_valid_document("\"a\nb\""));
    ck_assert(json_valid_document(" {\"a\":[1.5e3,\"\\u00e9\"]}\n"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("json_out");
    TCase *t = tcase_create("writer");
    tcase_add_test(t, json_out_separates_and_nests);
    tcase_add_test(t, json_out_escapes_strings);
    tcase_add_test(t, json_check_rejects_non_documents);
    suite_add_tcase(s, t);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
