/* SPDX-License-Identifier: MIT */
/*
 * What every Check suite's main() shares: run the suite, and skip honestly.
 *
 * Check has no "skipped" verdict for a case: a case that returns early
 * passes. So a case that needs something the host may lack (a /dev node, a
 * kernel feature, root) goes in a case group of its own, and the binary,
 * asked to run that group, checks the precondition first and exits with
 * NPV_TEST_SKIP when it is missing. cmake/NpvTesting.cmake registers each
 * group as its own ctest test with SKIP_RETURN_CODE NPV_TEST_SKIP, so ctest
 * reports it as skipped, never as passed, while the other groups still run.
 */
#ifndef NPV_TEST_H
#define NPV_TEST_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ctest's SKIP_RETURN_CODE for every Check test (cmake/NpvTesting.cmake). */
#define NPV_TEST_SKIP 77

/* 1 in a build under ASan or TSan (gcc's macros, clang's __has_feature). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NPV_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NPV_TEST_SANITIZED 1
#endif
#endif
#ifndef NPV_TEST_SANITIZED
#define NPV_TEST_SANITIZED 0
#endif

/*
 * A volume test's default count in this build: the plain build runs the full
 * default; a sanitizer build (5-15 times slower) a tenth of it, since what it
 * looks for (a bad access, a race) shows in the first rounds of the same path
 * and the plain run keeps the count. Each suite's own variable still
 * overrides both.
 */
static inline unsigned long long npv_test_volume(unsigned long long dflt)
{
    return NPV_TEST_SANITIZED && dflt >= 10 ? dflt / 10 : dflt;
}

/* Say why on stderr (ctest --output-on-failure and the log show it) and return NPV_TEST_SKIP. */
__attribute__((format(printf, 2, 3))) static inline int npv_test_skip(const char *test,
                                                                      const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "SKIP %s: ", test);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return NPV_TEST_SKIP;
}

/*
 * A case that needs the model and is run against hardware exits
 * NPV_TEST_SKIP from its forked process (the harnesses' *_require_model);
 * Check reports that as an error with this message (check_run.c).
 */
#define NPV_TEST_EARLY_EXIT_SKIP "Early exit with return value 77"

/*
 * Run s (freed here) and turn its verdict into an exit code: a failure fails;
 * cases that exited NPV_TEST_SKIP are skipped, not failed (every case
 * skipped: NPV_TEST_SKIP, so ctest says skipped). The hardware runner reads
 * each case's verdict from Check's TAP log (CK_TAP_LOG_FILE_NAME).
 */
static inline int npv_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int run = srunner_ntests_run(sr), failed = 0, skipped = 0;
    TestResult **tr = srunner_results(sr);
    for (int i = 0; tr != NULL && i < run; i++) {
        if (tr_rtype(tr[i]) == CK_PASS)
            continue;
        if (tr_rtype(tr[i]) == CK_ERROR && strcmp(tr_msg(tr[i]), NPV_TEST_EARLY_EXIT_SKIP) == 0)
            skipped++;
        else
            failed++;
    }
    free(tr);
    srunner_free(sr);
    if (skipped > 0)
        fprintf(stderr, "%d of %d cases skipped (exit %d: they need the model)\n", skipped, run,
                NPV_TEST_SKIP);
    if (failed > 0)
        return EXIT_FAILURE;
    return run > 0 && skipped == run ? NPV_TEST_SKIP : EXIT_SUCCESS;
}

/*
 * One case group of a suite: its name (argv[1] of the binary; the default
 * group has the name NULL and runs without an argument), a precondition
 * that returns NULL when met or the reason it is not, and the cases.
 */
struct npv_test_group {
    const char *name;
    const char *(*missing)(void);
    void (*add_cases)(TCase *tc);
};

/*
 * main() of a suite with case groups: runs the group argv[1] names (the
 * default one without an argument) under fixture setup/teardown, or skips
 * it when its precondition is missing. An unknown group name fails.
 */
static inline int npv_test_main_groups(int argc, char **argv, const char *suite_name,
                                       const struct npv_test_group *groups, size_t n,
                                       void (*setup)(void), void (*teardown)(void))
{
    const char *want = argc > 1 ? argv[1] : NULL;
    for (size_t i = 0; i < n; i++) {
        const struct npv_test_group *g = &groups[i];
        if ((want == NULL) != (g->name == NULL) || (want != NULL && strcmp(want, g->name) != 0))
            continue;
        char label[128];
        snprintf(label, sizeof(label), "%s%s%s", suite_name, g->name ? "_" : "",
                 g->name ? g->name : "");
        const char *why = g->missing != NULL ? g->missing() : NULL;
        if (why != NULL)
            return npv_test_skip(label, "%s", why);
        Suite *s = suite_create(label);
        TCase *tc = tcase_create(g->name ? g->name : "default");
        if (setup != NULL || teardown != NULL)
            tcase_add_checked_fixture(tc, setup, teardown);
        g->add_cases(tc);
        suite_add_tcase(s, tc);
        return npv_test_run(s);
    }
    fprintf(stderr, "%s: no case group \"%s\"\n", suite_name, want ? want : "(default)");
    return EXIT_FAILURE;
}

#endif
