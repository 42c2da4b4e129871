/* SPDX-License-Identifier: MIT */
/*
 * The model's register behaviour as regs.h specifies it, from a client
 * without a driver: identity, PC registers, interrupt mask/clear/status and
 * the vector, the operation-enable edge, DMA that leaves the client's
 * mappings, and programs the model refuses (config errors). Model only: on
 * a real NPU (NPUVFIO_TEST_RKNPU) the suite is SKIPPED.
 */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "npv_test.h"
#include "rknpu_harness.h"

/* An IOVA below 4 GiB that the harness's domain never hands out this early. */
#define UNMAPPED_IOVA 0xfff00000u

static struct rknpu_t t;

static void setup(void)
{
    rknpu_open(&t);
}

static void teardown(void)
{
    rknpu_close(&t);
}

static uint32_t port_core(unsigned core, uint32_t reg)
{
    return rknpu_port_rd(&t, RKNPU_TP_CORE(core) + reg);
}

/* Poll RAW_STATUS until any of bits shows (a run's end without an unmasked vector). */
static uint32_t poll_raw(unsigned core, uint32_t bits)
{
    int64_t deadline = rknpu_now_ns() + (int64_t)RKNPU_GENEROUS_NS;
    uint32_t raw;
    while (!((raw = rknpu_rd(&t, core, RKNPU_PC_INTERRUPT_RAW_STATUS)) & bits))
        ck_assert_msg(rknpu_now_ns() < deadline, "core %u: RAW_STATUS never showed %#x", core,
                      bits);
    return raw;
}

/* Wait until the core's run has ended in a stall or config error (the test port says so). */
static void poll_state(unsigned core, uint32_t state)
{
    int64_t deadline = rknpu_now_ns() + (int64_t)RKNPU_GENEROUS_NS;
    while (port_core(core, RKNPU_TP_STATE) != state)
        ck_assert_msg(rknpu_now_ns() < deadline, "core %u never reached state %u", core, state);
}

START_TEST(identity_is_the_documented_pci_stand_in)
{
    uint16_t ids[2];
    uint8_t class_code[3];
    ck_assert_int_eq(npv_dev_config_read(t.dev, 0, ids, sizeof(ids)), 0);
    ck_assert_uint_eq(ids[0], RKNPU_PCI_VENDOR);
    ck_assert_uint_eq(ids[1], RKNPU_PCI_DEVICE);
    ck_assert_int_eq(npv_dev_config_read(t.dev, 9, class_code, sizeof(class_code)), 0);
    ck_assert_uint_eq((uint32_t)class_code[2] << 16 | (uint32_t)class_code[1] << 8 | class_code[0],
                      RKNPU_PCI_CLASS);
    for (unsigned c = 0; c < RKNPU_NUM_CORES; c++)
        ck_assert_uint_eq(rknpu_rd(&t, c, RKNPU_PC_VERSION), RKNPU_VERSION_VALUE);
    ck_assert_uint_eq(rknpu_port_rd(&t, RKNPU_TP_ID), RKNPU_TP_ID_VALUE);
    ck_assert_uint_eq(npv_irq_count(t.irq), RKNPU_MSIX_VECTORS);
}
END_TEST

START_TEST(pc_registers_read_back_and_read_only_ones_ignore_writes)
{
    rknpu_wr(&t, 2, RKNPU_PC_INTERRUPT_MASK, 0xffffffffu);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_INTERRUPT_MASK), RKNPU_INT_VALID_MASK);
    rknpu_wr(&t, 2, RKNPU_PC_TASK_CON, 0x7001);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_TASK_CON), 0x7001);
    rknpu_wr(&t, 2, RKNPU_PC_VERSION, 0);
    rknpu_wr(&t, 2, RKNPU_PC_INTERRUPT_RAW_STATUS, 0xffff);
    rknpu_wr(&t, 2, RKNPU_PC_TASK_STATUS, 0xfff);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_VERSION), RKNPU_VERSION_VALUE);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_TASK_STATUS), 0);
    /* The cores are separate: core 1 did not see core 2's writes. */
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_TASK_CON), 0);
    /* A sub-64-bit register is 32 bits: narrower or wider accesses are refused. */
    uint64_t v;
    ck_assert_int_ne(npv_bar_read(t.regs, RKNPU_PC_VERSION, 2, &v), 0);
    ck_assert_int_ne(npv_bar_read(t.regs, RKNPU_PC_VERSION, 8, &v), 0);
}
END_TEST

START_TEST(status_is_raw_and_mask_and_unmasking_a_pending_bit_fires_the_vector)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 3);
    rknpu_mm_program(&t, &mm, 1);
    rknpu_run(&t, 0, &mm.prog, mm.prog_words, 1, 0);
    ck_assert_uint_eq(poll_raw(0, RKNPU_INT_DPU_DONE), RKNPU_INT_DPU_0);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_INTERRUPT_STATUS), 0);
    ck_assert_int_eq(npv_irq_wait(t.irq, 0, RKNPU_QUIET_NS), -ETIMEDOUT);
    rknpu_wr(&t, 0, RKNPU_PC_INTERRUPT_MASK, RKNPU_INT_DPU_DONE);
    ck_assert_int_ge(npv_irq_wait(t.irq, 0, RKNPU_GENEROUS_NS), 1);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_INTERRUPT_STATUS), RKNPU_INT_DPU_0);
    /* Clearing another bit leaves it; clearing it lowers RAW and STATUS. */
    rknpu_wr(&t, 0, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_DPU_1);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_INTERRUPT_RAW_STATUS), RKNPU_INT_DPU_0);
    rknpu_wr(&t, 0, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_DPU_0);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_INTERRUPT_STATUS), 0);
    ck_assert(rknpu_mm_check(&mm));
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(a_run_starts_only_on_a_rising_operation_enable)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 4);
    rknpu_mm_program(&t, &mm, 1);
    rknpu_run(&t, 1, &mm.prog, mm.prog_words, 1, RKNPU_INT_DPU_DONE);
    ck_assert_uint_ne(rknpu_wait(&t, 1, RKNPU_GENEROUS_NS), 0);
    rknpu_wr(&t, 1, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    /*
     * The trailer's PC writes land in the PC's own registers: the last one
     * (mtx512's) wrote REGISTER_AMOUNTS 0 and left BASE_ADDRESS alone.
     */
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_REGISTER_AMOUNTS), 0);
    ck_assert_uint_eq(rknpu_rd(&t, 1, RKNPU_PC_BASE_ADDRESS), mm.prog.iova);
    /* With BASE_ADDRESS 0 a pulse starts nothing. */
    rknpu_wr(&t, 1, RKNPU_PC_BASE_ADDRESS, 0);
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, 0);
    ck_assert_uint_eq(port_core(1, RKNPU_TP_RUNS), 1);
    /* Programmed again, and the pulse left it low: the next rise starts a second run. */
    rknpu_wr(&t, 1, RKNPU_PC_BASE_ADDRESS, mm.prog.iova);
    rknpu_wr(&t, 1, RKNPU_PC_REGISTER_AMOUNTS, rknpu_regcmd_amount(mm.prog_words));
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    ck_assert_uint_ne(rknpu_wait(&t, 1, RKNPU_GENEROUS_NS), 0);
    rknpu_wr(&t, 1, RKNPU_PC_INTERRUPT_CLEAR, RKNPU_INT_CLEAR_ALL);
    ck_assert_uint_eq(port_core(1, RKNPU_TP_RUNS), 2);
    /* Level high without a fall: no third run. */
    rknpu_wr(&t, 1, RKNPU_PC_BASE_ADDRESS, mm.prog.iova);
    rknpu_wr(&t, 1, RKNPU_PC_REGISTER_AMOUNTS, rknpu_regcmd_amount(mm.prog_words));
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    ck_assert_int_eq(npv_irq_wait(t.irq, 1, RKNPU_QUIET_NS), -ETIMEDOUT);
    ck_assert_uint_eq(port_core(1, RKNPU_TP_RUNS), 2);
    rknpu_finish(&t, 1);
    /* Slave mode (PC_SEL) fetches nothing. */
    rknpu_wr(&t, 1, RKNPU_PC_BASE_ADDRESS, RKNPU_PC_SEL);
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, RKNPU_PC_OP_EN);
    rknpu_wr(&t, 1, RKNPU_PC_OPERATION_ENABLE, 0);
    ck_assert_uint_eq(port_core(1, RKNPU_TP_RUNS), 2);
    ck_assert(rknpu_mm_check(&mm));
    rknpu_mm_free(&mm);
}
END_TEST

/* Run mm on core 0 expecting a DMA error: the bit, no DPU done, the address on the test port. */
static void expect_dma_error(struct rknpu_mm *mm, uint32_t bit, uint32_t iova)
{
    uint32_t before = port_core(0, RKNPU_TP_DMA_FAULTS);
    rknpu_run(&t, 0, &mm->prog, mm->prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    uint32_t st = rknpu_wait(&t, 0, RKNPU_GENEROUS_NS);
    ck_assert_uint_eq(st, bit);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_DMA_FAULTS), before + 1);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_FAULT_IOVA), iova);
    ck_assert_uint_eq(rknpu_rd(&t, 0, RKNPU_PC_TASK_STATUS), 0);
    rknpu_finish(&t, 0);
}

START_TEST(output_to_an_unmapped_iova_sets_dma_write_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 5);
    mm.desc.c = UNMAPPED_IOVA;
    rknpu_mm_program(&t, &mm, 1);
    expect_dma_error(&mm, RKNPU_INT_DMA_WRITE_ERROR, UNMAPPED_IOVA);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(operand_the_client_unmapped_sets_dma_read_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 6);
    rknpu_mm_program(&t, &mm, 1);
    /* The device sees only what its domain maps now: B was mapped when the program was built. */
    ck_assert_int_eq(npv_dma_unmap(mm.b.dma, t.dom), 0);
    expect_dma_error(&mm, RKNPU_INT_DMA_READ_ERROR, mm.desc.b);
    /* Mapped again (at whatever IOVA) and named again, the same core computes. */
    npv_iova_t iova;
    ck_assert_int_eq(npv_dma_map(mm.b.dma, t.dom, NPV_DMA_RW, &iova), 0);
    mm.desc.b = (uint32_t)iova;
    rknpu_mm_program(&t, &mm, 1);
    rknpu_run(&t, 0, &mm.prog, mm.prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    ck_assert_uint_eq(rknpu_wait(&t, 0, RKNPU_GENEROUS_NS), RKNPU_INT_DPU_0);
    rknpu_finish(&t, 0);
    ck_assert(rknpu_mm_check(&mm));
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(a_program_at_an_unmapped_iova_sets_dma_read_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 7);
    rknpu_mm_program(&t, &mm, 1);
    struct rknpu_buf wild = mm.prog;
    wild.iova = UNMAPPED_IOVA;
    uint32_t before = port_core(0, RKNPU_TP_DMA_FAULTS);
    rknpu_run(&t, 0, &wild, mm.prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    ck_assert_uint_eq(rknpu_wait(&t, 0, RKNPU_GENEROUS_NS), RKNPU_INT_DMA_READ_ERROR);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_DMA_FAULTS), before + 1);
    ck_assert_uint_eq(port_core(0, RKNPU_TP_FAULT_IOVA), UNMAPPED_IOVA);
    rknpu_finish(&t, 0);
    rknpu_mm_free(&mm);
}
END_TEST

/* A program the model refuses: no status, the core stalls, the word is on the test port. */
static void expect_config_error(struct rknpu_mm *mm, uint64_t bad_word)
{
    rknpu_run(&t, 2, &mm->prog, mm->prog_words, 1, RKNPU_INT_DPU_DONE | RKNPU_INT_DMA_ERROR);
    poll_state(2, RKNPU_CORE_STALLED);
    ck_assert_uint_eq(port_core(2, RKNPU_TP_CONFIG_ERRORS), 1);
    ck_assert_uint_eq((uint64_t)port_core(2, RKNPU_TP_BAD_WORD_HI) << 32 |
                          port_core(2, RKNPU_TP_BAD_WORD_LO),
                      bad_word);
    ck_assert_uint_eq(rknpu_rd(&t, 2, RKNPU_PC_INTERRUPT_RAW_STATUS), 0);
    ck_assert_int_eq(npv_irq_wait(t.irq, 2, RKNPU_QUIET_NS), -ETIMEDOUT);
    /* Only a reset restarts it. */
    ck_assert_uint_eq(rknpu_soft_reset(&t, 2), 0);
    ck_assert_uint_eq(port_core(2, RKNPU_TP_STATE), RKNPU_CORE_IDLE);
}

START_TEST(a_write_outside_its_target_block_is_a_config_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 8);
    rknpu_mm_program(&t, &mm, 1);
    /* CNA's target naming a DPU register. */
    uint64_t *w = mm.prog.va;
    w[1] = rknpu_regcmd_write(RKNPU_TGT_CNA, RKNPU_DPU_DST_BASE_ADDR, 0x1000);
    expect_config_error(&mm, w[1]);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(a_program_without_op_enable_is_a_config_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 9);
    rknpu_mm_program(&t, &mm, 1);
    uint64_t *w = mm.prog.va;
    w[mm.prog_words - 1] = 0;
    expect_config_error(&mm, 0);
    rknpu_mm_free(&mm);
}
END_TEST

START_TEST(a_matmul_shape_the_model_does_not_run_is_a_config_error)
{
    struct rknpu_mm mm;
    rknpu_mm_init(&t, &mm, RKNPU_PREC_INT8, 4, 32, 32, false, false, 10);
    mm.desc.k = 48; /* not a multiple of 32 */
    rknpu_mm_program(&t, &mm, 1);
    const uint64_t *w = mm.prog.va;
    expect_config_error(&mm, w[mm.prog_words - 1]);
    rknpu_mm_free(&mm);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("rknpu_model");
    TCase *tc = tcase_create("registers");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, identity_is_the_documented_pci_stand_in);
    tcase_add_test(tc, pc_registers_read_back_and_read_only_ones_ignore_writes);
    tcase_add_test(tc, status_is_raw_and_mask_and_unmasking_a_pending_bit_fires_the_vector);
    tcase_add_test(tc, a_run_starts_only_on_a_rising_operation_enable);
    tcase_add_test(tc, output_to_an_unmapped_iova_sets_dma_write_error);
    tcase_add_test(tc, operand_the_client_unmapped_sets_dma_read_error);
    tcase_add_test(tc, a_program_at_an_unmapped_iova_sets_dma_read_error);
    tcase_add_test(tc, a_write_outside_its_target_block_is_a_config_error);
    tcase_add_test(tc, a_program_without_op_enable_is_a_config_error);
    tcase_add_test(tc, a_matmul_shape_the_model_does_not_run_is_a_config_error);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    rknpu_require_model("register behaviour and the test port are the model's");
    return npv_test_run(suite());
}
