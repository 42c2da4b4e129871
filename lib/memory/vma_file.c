/* SPDX-License-Identifier: MIT */
/*
 * The file behind a range of memory, from /proc/self/maps. The kernel gives
 * a process no other way to ask which file (and offset) a virtual address
 * maps; map_files/ hands out the file itself but only to a checkpointing
 * privilege, so an unprivileged process reopens the path and checks that
 * the inode is the one the mapping holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "vma_file.h"

struct maps_line {
    uintptr_t start, end;
    char perms[5];
    uint64_t offset;
    uint64_t ino;
    const char *path; /* into the line buffer; "" when none */
};

static bool parse_line(char *line, struct maps_line *l)
{
    unsigned long long start, end, off, ino;
    unsigned major, minor;
    int path_at = 0;
    if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, l->perms, &off, &major,
               &minor, &ino, &path_at) < 7)
        return false;
    l->start = (uintptr_t)start;
    l->end = (uintptr_t)end;
    l->offset = off;
    l->ino = ino;
    char *path = line + path_at;
    path[strcspn(path, "\n")] = '\0';
    l->path = path;
    return true;
}

static const char deleted_suffix[] = " (deleted)";

static void set_path(struct npv_vma_file *out, const char *path)
{
    size_t n = strlen(path), sfx = sizeof(deleted_suffix) - 1;
    out->deleted = path[0] != '/' || (n >= sfx && strcmp(path + n - sfx, deleted_suffix) == 0);
    snprintf(out->path, sizeof(out->path), "%s", path);
}

int npv_vma_file_of(uintptr_t va, size_t len, struct npv_vma_file *out)
{
    if (len == 0 || va > UINTPTR_MAX - (len - 1))
        return -EINVAL;
    FILE *f = fopen("/proc/self/maps", "re");
    if (f == NULL)
        return -errno;
    char *line = NULL;
    size_t cap = 0;
    uintptr_t last = va + (len - 1), covered = va;
    uint64_t file_off_at_covered = 0;
    bool started = false;
    int ret = -ENOENT;
    struct maps_line l;
    while (getline(&line, &cap, f) > 0) {
        if (!parse_line(line, &l) || l.end <= covered)
            continue;
        if (!started) {
            if (l.start > va)
                break;
            memset(out, 0, sizeof(*out));
            out->vma_start = l.start;
            out->vma_end = l.end;
            out->ino = l.ino;
            out->offset = l.ino != 0 ? l.offset + (va - l.start) : 0;
            out->shared = l.perms[3] == 's';
            out->writable = l.perms[1] == 'w';
            set_path(out, l.path);
            started = true;
        } else {
            if (l.start != covered)
                break;
            /* A file's next mapping must hold the bytes that follow in the file. */
            if (l.ino != out->ino || (l.ino != 0 && l.offset != file_off_at_covered)) {
                ret = -EXDEV;
                break;
            }
            out->shared = out->shared && l.perms[3] == 's';
            out->writable = out->writable && l.perms[1] == 'w';
        }
        file_off_at_covered = l.ino != 0 ? l.offset + (l.end - l.start) : 0;
        covered = l.end;
        if (covered - 1 >= last) {
            ret = 0;
            break;
        }
    }
    free(line);
    fclose(f);
    return ret;
}

static int open_checked(const char *path, bool write, uint64_t ino)
{
    int fd = open(path, (write ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    /* The path may name another file by now (renamed, replaced): the inode decides. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_ino != ino) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

int npv_vma_file_open(const struct npv_vma_file *f, bool write)
{
    if (f->ino == 0)
        return -ENOENT;
    char link[64];
    snprintf(link, sizeof(link), "/proc/self/map_files/%" PRIxPTR "-%" PRIxPTR, f->vma_start,
             f->vma_end);
    int fd = open_checked(link, write, f->ino);
    if (fd >= 0 || f->deleted)
        return fd >= 0 ? fd : -ENOENT;
    return open_checked(f->path, write, f->ino);
}

size_t npv_vma_page_size(uintptr_t va)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (f == NULL)
        return 0;
    char *line = NULL;
    size_t cap = 0, page = 0;
    bool inside = false;
    while (getline(&line, &cap, f) > 0) {
        unsigned long long start, end, kib;
        char perms[5];
        /* A mapping's header starts with its lowercase hex range; its fields are capitalised. */
        if (sscanf(line, "%llx-%llx %4s", &start, &end, perms) == 3) {
            if (inside)
                break;
            inside = va >= start && va < end;
        } else if (inside && sscanf(line, "KernelPageSize: %llu kB", &kib) == 1) {
            page = (size_t)kib * 1024;
            break;
        }
    }
    free(line);
    fclose(f);
    return page;
}
