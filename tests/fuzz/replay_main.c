/* SPDX-License-Identifier: MIT */
/*
 * A harness without libFuzzer: feed every file named on the command line,
 * or found in a directory named there, to LLVMFuzzerTestOneInput once. The
 * default test run replays the committed corpora and regression inputs
 * through the harness code this way (a crash or abort fails the test).
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path, unsigned *count)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf != NULL && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *bigger = realloc(buf, cap * 2);
            if (bigger == NULL) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf == NULL)
        return -1;
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    (*count)++;
    return 0;
}

static int replay(const char *path, unsigned *count)
{
    struct stat st;
    if (stat(path, &st) < 0) {
        perror(path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        return replay_file(path, count);
    DIR *d = opendir(path);
    if (d == NULL) {
        perror(path);
        return -1;
    }
    int ret = 0;
    for (struct dirent *de; ret == 0 && (de = readdir(d)) != NULL;) {
        if (de->d_name[0] == '.' || strcmp(de->d_name, "README.md") == 0)
            continue;
        char child[4096];
        snprintf(child, sizeof(child), "%s/%s", path, de->d_name);
        ret = replay(child, count);
    }
    closedir(d);
    return ret;
}

int main(int argc, char **argv)
{
    unsigned count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        /* A harness without regression inputs yet has no folder for them. */
        if (stat(argv[i], &st) < 0)
            continue;
        if (replay(argv[i], &count) < 0)
            return 1;
    }
    printf("replayed %u inputs\n", count);
    if (count == 0) {
        fprintf(stderr, "no inputs: the harness's corpus is missing\n");
        return 1;
    }
    return 0;
}
