/* SPDX-License-Identifier: MIT */
/*
 * The file behind a range of this process's memory, as /proc/self/maps
 * shows it: for npv_dma_wrap, to check a caller's fd and to find one.
 */
#ifndef NPV_VMA_FILE_H
#define NPV_VMA_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct npv_vma_file {
    uintptr_t vma_start, vma_end; /* the first mapping holding the range */
    uint64_t ino;                 /* 0: no file (anonymous) */
    uint64_t offset;              /* of the range's start in the file */
    bool shared;                  /* every mapping of the range is MAP_SHARED */
    bool writable;
    bool deleted; /* the path no longer names the file (a memfd, an unlinked file) */
    char path[PATH_MAX];
};

/*
 * Describe [va, va+len). 0 with *out filled when the whole range is mapped
 * by mappings of one file at contiguous offsets (or, ino 0, by anonymous
 * memory); -ENOENT when part of it is not mapped; -EXDEV when it spans
 * different files, or mappings of one file at offsets that do not follow
 * on; -errno when /proc/self/maps cannot be read.
 */
int npv_vma_file_of(uintptr_t va, size_t len, struct npv_vma_file *out);

/*
 * An fd (O_CLOEXEC) of the file f describes, opened for writing when write:
 * through /proc/self/map_files (exact, but needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE), else by its path, kept only when the inode is
 * the mapping's. -ENOENT when neither reaches it (a memfd or an unlinked
 * file without the capability), -errno otherwise.
 */
int npv_vma_file_open(const struct npv_vma_file *f, bool write);

/*
 * The page size the kernel maps va with (KernelPageSize in /proc/self/smaps:
 * a hugetlb page size for hugetlb memory, with or without a file), or 0 when
 * va is not mapped or smaps cannot be read.
 */
size_t npv_vma_page_size(uintptr_t va);

#endif
