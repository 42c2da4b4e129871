/* SPDX-License-Identifier: MIT */
/* Shared by the DMA suites: log capture and fd counting. */
#ifndef NPV_TEST_DMA_UTIL_H
#define NPV_TEST_DMA_UTIL_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/ctx.h>

struct log_capture {
    unsigned warns;
    unsigned errors;
    char last_warn[1024];
    char last_error[1024];
};

static inline void capture_log(void *user, enum npv_log_level level, const char *msg)
{
    struct log_capture *c = user;
    if (level == NPV_LOG_WARN) {
        c->warns++;
        snprintf(c->last_warn, sizeof(c->last_warn), "%s", msg);
    } else if (level == NPV_LOG_ERROR) {
        c->errors++;
        snprintf(c->last_error, sizeof(c->last_error), "%s", msg);
    }
}

/* Open descriptors of this process: an error path that leaks one shows here. */
static inline int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Free pages of the 2 MiB pool (host-wide), or -1. */
static inline long free_2m_hugepages(void)
{
    FILE *f = fopen("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "re");
    if (f == NULL)
        return -1;
    long n = -1;
    if (fscanf(f, "%ld", &n) != 1)
        n = -1;
    fclose(f);
    return n;
}

#endif
