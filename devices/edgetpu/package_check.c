/* SPDX-License-Identifier: MIT */
/* The model's checks of linked chunks and its data-path pattern (package_check.h). */
#include <errno.h>
#include <string.h>

#include "package_check.h"
#include "package_internal.h"

/* Whether the link patches field f of exe (package_check.h, after libedgetpu's
 * LinkInstructionBuffers). */
static bool linked(const struct npv_edgetpu_model_exe *exe, const struct npv_edgetpu_model_field *f)
{
    switch (f->base) {
    case NPV_EDGETPU_BASE_PARAMETER:
        return exe->info.parameters_size != 0;
    case NPV_EDGETPU_BASE_SCRATCH:
        return exe->info.scratch_size != 0;
    default:
        return true;
    }
}

static bool in_linked_field(const struct npv_edgetpu_model_exe *exe,
                            const struct npv_edgetpu_chunk *c, uint64_t bit)
{
    for (uint32_t k = 0; k < c->nr_fields; k++) {
        const struct npv_edgetpu_model_field *f = &c->fields[k];
        if (bit >= f->offset_bit && bit < (uint64_t)f->offset_bit + 32 && linked(exe, f))
            return true;
    }
    return false;
}

int edgetpu_pkg_check_chunk(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            const void *fetched, size_t len, uint64_t *bad_bit)
{
    if (exe == NULL || fetched == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_chunks)
        return -ERANGE;
    const struct npv_edgetpu_chunk *c = &exe->chunks[i];
    if (len != c->size)
        return -EMSGSIZE;
    const uint8_t *p = fetched;
    /* Byte by byte; only a differing byte looks at the fields (a few per chunk). */
    for (size_t b = 0; b < len; b++) {
        uint8_t diff = (uint8_t)(p[b] ^ c->bitstream[b]);
        for (unsigned bit = 0; diff != 0 && bit < 8; bit++) {
            if (!(diff & (1u << bit)))
                continue;
            uint64_t at = (uint64_t)b * 8 + bit;
            if (!in_linked_field(exe, c, at)) {
                if (bad_bit != NULL)
                    *bad_bit = at;
                return -EPROTO;
            }
        }
    }
    return 0;
}

static void put_half(uint64_t *addr, uint8_t half, uint32_t v)
{
    if (half == NPV_EDGETPU_UPPER_32BIT)
        *addr = (*addr & 0xffffffffull) | (uint64_t)v << 32;
    else
        *addr = (*addr & ~0xffffffffull) | v;
}

int edgetpu_pkg_chunk_addrs(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                            const void *fetched, size_t len, struct edgetpu_pkg_addrs *a)
{
    if (exe == NULL || fetched == NULL || a == NULL)
        return -EINVAL;
    if (i >= exe->info.nr_chunks)
        return -ERANGE;
    const struct npv_edgetpu_chunk *c = &exe->chunks[i];
    if (len != c->size)
        return -EMSGSIZE;
    uint32_t batch = exe->info.batch_size;
    size_t nin = (size_t)exe->info.nr_inputs * batch, nout = (size_t)exe->info.nr_outputs * batch;
    if ((nin != 0 && (a->inputs == NULL || a->input_seen == NULL)) ||
        (nout != 0 && (a->outputs == NULL || a->output_seen == NULL)))
        return -EINVAL;
    if (nin != 0) {
        memset(a->inputs, 0, nin * sizeof(*a->inputs));
        memset(a->input_seen, 0, nin * sizeof(*a->input_seen));
    }
    if (nout != 0) {
        memset(a->outputs, 0, nout * sizeof(*a->outputs));
        memset(a->output_seen, 0, nout * sizeof(*a->output_seen));
    }
    a->parameters = a->scratch = 0;
    a->parameters_seen = a->scratch_seen = false;
    for (uint32_t k = 0; k < c->nr_fields; k++) {
        const struct npv_edgetpu_model_field *f = &c->fields[k];
        if (!linked(exe, f))
            continue;
        uint32_t v = edgetpu_pkg_get32(fetched, f->offset_bit);
        size_t at = (size_t)f->layer * batch + f->batch;
        switch (f->base) {
        case NPV_EDGETPU_BASE_INPUT:
            put_half(&a->inputs[at], f->half, v);
            a->input_seen[at] = true;
            break;
        case NPV_EDGETPU_BASE_OUTPUT:
            put_half(&a->outputs[at], f->half, v);
            a->output_seen[at] = true;
            break;
        case NPV_EDGETPU_BASE_PARAMETER:
            put_half(&a->parameters, f->half, v);
            a->parameters_seen = true;
            break;
        default:
            put_half(&a->scratch, f->half, v);
            a->scratch_seen = true;
            break;
        }
    }
    return 0;
}

/* FNV-1a 64 (offset basis and prime of the published FNV definition). */
static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* splitmix64's output function (Steele, Lea, Flood 2014). */
static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

int edgetpu_pkg_pattern(const struct npv_edgetpu_model_exe *exe, uint32_t o,
                        const uint8_t *const *inputs, uint8_t *dst, size_t len)
{
    if (exe == NULL || (len != 0 && dst == NULL) || (exe->info.nr_inputs != 0 && inputs == NULL))
        return -EINVAL;
    if (o >= exe->info.nr_outputs)
        return -ERANGE;
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint32_t i = 0; i < exe->info.nr_inputs; i++) {
        if (inputs[i] == NULL)
            return -EINVAL;
        h = fnv1a(h, inputs[i], exe->inputs[i].size_bytes);
    }
    const char *name = exe->outputs[o].name;
    h = fnv1a(h, (const uint8_t *)name, strlen(name) + 1);
    for (size_t k = 0; k < len; k++)
        dst[k] = (uint8_t)(splitmix64(h + k / 8) >> (8 * (k % 8)));
    return 0;
}
