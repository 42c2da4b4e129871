/* SPDX-License-Identifier: MIT */
/*
 * Register commands of a matmul as a 1x1 direct convolution: the list the
 * silicon-run mtx512/rk3588-npu example writes (regcmd.h, the one emitter),
 * the native layouts, and the trailer that ends and chains every task's list.
 */
#include <errno.h>
#include <string.h>

#include "driver_internal.h"
#include "regcmd.h"

/* Single-task limits the convolution buffer sets (mtx512 tests; RKNN-MM splits larger ones). */
#define MM_MAX_M 544u
#define MM_MAX_K 4096u
#define MM_MAX_N 4096u

/*
 * The last task's trailer: mtx512 gen_matmul_task ops[104..107] (a no-op,
 * PC REGISTER_AMOUNTS = 0, the barrier, the op-enable word); regcmd.h.
 */
void rknpu_regcmd_trailer(uint64_t *trailer, uint32_t enable_mask)
{
    rknpu_trailer_end(trailer, enable_mask);
}

/*
 * Chain to the next task: Mesa compile_operation patches the trailer's first
 * two words to PC BASE_ADDRESS and REGISTER_AMOUNTS. The amount is in the
 * PC register's own unit, (words + 1) / 2 - 1, as rocket_job_hw_submit and
 * the vendor's rknpu_job_subcore_commit_pc write it for the first task
 * (the caller passes rknpu_regcmd_amount). Mesa's embedded value
 * ALIGN((n - 4) / 2, 2) is not followed on silicon by anything public:
 * rocket starts every task alone (TASK_NUMBER 1, the next from its IRQ
 * thread), so the PC never walks Mesa's chain; unverified, README.
 */
void rknpu_regcmd_chain(uint64_t *trailer, npv_iova_t next, uint32_t next_amount)
{
    rknpu_trailer_link(trailer, (uint32_t)next, next_amount);
}

static uint32_t esize(enum npv_rknpu_dtype dt)
{
    return dt == NPV_RKNPU_INT8 ? 1u : 2u;
}

static bool shape_ok(const struct npv_rknpu_matmul *mm)
{
    if (mm->dtype != NPV_RKNPU_INT8 && mm->dtype != NPV_RKNPU_FP16)
        return false;
    uint32_t n_align = mm->dtype == NPV_RKNPU_INT8 ? RKNPU_MM_N_ALIGN_INT8 : RKNPU_MM_N_ALIGN_FP16;
    /* M >= 4: the surface stride is M - 4 (mtx512 gen_matmul_*, regcmd.h). */
    if (mm->m == 0 || mm->m % 4 != 0 || mm->m > MM_MAX_M)
        return false;
    if (mm->k == 0 || mm->k % RKNPU_MM_K_ALIGN != 0 || mm->k > MM_MAX_K)
        return false;
    if (mm->n == 0 || mm->n % n_align != 0 || mm->n > MM_MAX_N)
        return false;
    /* mtx512 gen_matmul_*: the feature map within 11 banks, one kernel within a bank. */
    uint64_t fd_bytes = (uint64_t)mm->m * mm->k * esize(mm->dtype);
    if ((fd_bytes + RKNPU_CBUF_BANK_SIZE - 1) / RKNPU_CBUF_BANK_SIZE > RKNPU_CBUF_BANKS - 1)
        return false;
    return (uint64_t)mm->k * esize(mm->dtype) <= RKNPU_CBUF_BANK_SIZE;
}

int npv_rknpu_matmul_sizes(const struct npv_rknpu_matmul *mm, struct npv_rknpu_matmul_sizes *out)
{
    if (mm == NULL || out == NULL || !shape_ok(mm))
        return -EINVAL;
    uint64_t e = esize(mm->dtype);
    out->a = (uint64_t)mm->m * mm->k * e;
    out->b = (uint64_t)mm->k * mm->n * e;
    out->c = (uint64_t)mm->m * mm->n * 4u;
    out->bias = (uint64_t)mm->n * 4u;
    return 0;
}

static bool addr_ok(npv_iova_t iova)
{
    return iova != 0 && iova <= UINT32_MAX && (iova & 0xf) == 0;
}

int npv_rknpu_matmul_task(const struct npv_rknpu_matmul *mm, uint64_t *regcmd, uint32_t max,
                          struct npv_rknpu_task *task)
{
    if (mm == NULL || (regcmd == NULL && max != 0) || !shape_ok(mm) || !addr_ok(mm->a) ||
        !addr_ok(mm->b) || !addr_ok(mm->c) || (mm->bias != 0 && !addr_ok(mm->bias)))
        return -EINVAL;
    const struct rknpu_matmul_desc d = {
        .prec = mm->dtype == NPV_RKNPU_INT8 ? RKNPU_PREC_INT8 : RKNPU_PREC_FP16,
        .m = mm->m,
        .k = mm->k,
        .n = mm->n,
        .a = (uint32_t)mm->a,
        .b = (uint32_t)mm->b,
        .c = (uint32_t)mm->c,
        .bias = (uint32_t)mm->bias,
        .relu = mm->relu,
    };
    uint64_t words[RKNPU_MATMUL_BODY_WORDS + RKNPU_MATMUL_BIAS_WORDS];
    uint32_t n = rknpu_matmul_body(&d, words);
    if (n > max)
        return -ENOSPC;
    memcpy(regcmd, words, (size_t)n * 8u);
    if (task != NULL)
        *task = (struct npv_rknpu_task){
            .regcmd = regcmd,
            .regcmd_count = n,
            .enable_mask = rknpu_matmul_enable(&d),
        };
    return (int)n;
}

uint64_t npv_rknpu_matmul_a_index(enum npv_rknpu_dtype dt, uint32_t m, uint32_t k, uint32_t row,
                                  uint32_t col)
{
    (void)k;
    return dt == NPV_RKNPU_INT8 ? rknpu_a_index_int8(row, col, m) : rknpu_a_index_fp16(row, col, m);
}

uint64_t npv_rknpu_matmul_b_index(enum npv_rknpu_dtype dt, uint32_t k, uint32_t n, uint32_t row,
                                  uint32_t col)
{
    (void)n;
    return dt == NPV_RKNPU_INT8 ? rknpu_b_index_int8(row, col, k) : rknpu_b_index_fp16(row, col, k);
}

uint64_t npv_rknpu_matmul_c_index(uint32_t m, uint32_t n, uint32_t row, uint32_t col)
{
    (void)n;
    return rknpu_c_index(row, col, m);
}

static_assert(RKNPU_MATMUL_BODY_WORDS + RKNPU_MATMUL_BIAS_WORDS <= NPV_RKNPU_MATMUL_MAX_WORDS,
              "NPV_RKNPU_MATMUL_MAX_WORDS holds the longest body");
