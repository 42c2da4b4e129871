/* SPDX-License-Identifier: MIT */
/*
 * The model writes results into the client's memory by DMA, as hardware
 * would, and the client reads them; DMA the IOMMU would refuse (unmapped,
 * read-only, another domain's) is refused by the server and surfaces as a
 * device fault.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "vfio_user_client.h"

static struct vu_server srv;
static struct td t;

static void setup(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
    td_open(&t, srv.path);
}

static void teardown(void)
{
    td_close(&t);
    vu_server_kill(&srv);
}

/* The model serves one client at a time: tests that open their own device start only the server. */
static void setup_server(void)
{
    vu_server_start(&srv, vu_serve_testdev, NULL);
}

static void teardown_server(void)
{
    vu_server_kill(&srv);
}

static struct npv_dma *mapped_buffer(size_t size, unsigned prot, npv_iova_t *iova)
{
    struct npv_dma *b;
    ck_assert_int_eq(npv_dma_alloc(t.ctx, size, NULL, &b), 0);
    ck_assert_int_eq(npv_dma_map(b, t.dom, prot, iova), 0);
    return b;
}

START_TEST(model_copies_between_client_buffers)
{
    struct npv_cpl c;
    npv_iova_t src_iova, dst_iova;
    struct npv_dma *src = mapped_buffer(8192, NPV_DMA_READ, &src_iova);
    struct npv_dma *dst = mapped_buffer(8192, NPV_DMA_WRITE, &dst_iova);
    uint8_t *s = npv_dma_vaddr(src), *d = npv_dma_vaddr(dst);
    for (int i = 0; i < 8192; i++)
        s[i] = (uint8_t)(i * 7 + 3);
    memset(d, 0, 8192);
    td_enable(&t, false);
    struct npv_testdev_desc copy = {
        .opcode = NPV_TESTDEV_OP_COPY, .src = src_iova, .dst = dst_iova, .len = 8192};
    td_submit(&t, &copy);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_int_eq(memcmp(s, d, 8192), 0);
    npv_dma_free(src);
    npv_dma_free(dst);
}
END_TEST

START_TEST(model_fills_client_memory_descriptor_by_descriptor)
{
    struct npv_cpl c;
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4096 * 4, NPV_DMA_RW, &iova);
    uint8_t *p = npv_dma_vaddr(b);
    memset(p, 0, 4096 * 4);
    td_enable(&t, false);
    for (uint32_t i = 0; i < 4; i++) {
        struct npv_testdev_desc fill = {.opcode = NPV_TESTDEV_OP_FILL,
                                        .dst = iova + i * 4096,
                                        .len = 4096,
                                        .pattern = 0x10 + i};
        td_submit(&t, &fill);
    }
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    struct npv_ring_stats st;
    npv_ring_stats(t.ring, &st);
    ck_assert_uint_eq(st.completed, 4);
    for (uint32_t i = 0; i < 4; i++) {
        ck_assert_uint_eq(p[i * 4096], 0x10 + i);
        ck_assert_uint_eq(p[i * 4096 + 4095], 0x10 + i);
    }
    npv_dma_free(b);
}
END_TEST

START_TEST(dma_to_an_unmapped_iova_is_a_device_fault)
{
    struct npv_cpl c;
    const npv_iova_t wild = 0x7ead0000ull;
    td_enable(&t, false);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = wild, .len = 64, .pattern = 1};
    td_submit(&t, &fill);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(td_state(&t).fault_iova, wild);
    ck_assert(td_state(&t).fault);
    ck_assert(!td_state(&t).running);
}
END_TEST

START_TEST(injected_wild_dma_is_refused_by_the_server)
{
    struct npv_cpl c;
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4096, NPV_DMA_RW, &iova);
    memset(npv_dma_vaddr(b), 0, 4096);
    td_enable(&t, false);
    ck_assert_int_eq(npv_testdev_inject_fault(t.drv, NPV_TESTDEV_FAULT_DMA_UNMAPPED), 0);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = iova, .len = 64, .pattern = 9};
    td_submit(&t, &fill);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_ne(td_state(&t).fault_iova, iova);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(b))[0], 0);
    npv_dma_free(b);
}
END_TEST

START_TEST(device_write_to_a_read_only_mapping_is_refused)
{
    struct npv_cpl c;
    npv_iova_t iova;
    struct npv_dma *b = mapped_buffer(4096, NPV_DMA_READ, &iova);
    memset(npv_dma_vaddr(b), 0, 4096);
    td_enable(&t, false);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = iova, .len = 64, .pattern = 9};
    td_submit(&t, &fill);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(b))[0], 0);
    npv_dma_free(b);
}
END_TEST

/* ---- memory shared without an fd: the server's DMA_READ/DMA_WRITE messages ---- */

#define NOFD_IOVA 0x7000000000ull

START_TEST(model_reaches_memory_without_fd_through_dma_messages)
{
    struct npv_cpl c;
    /* npv_dma always has a memfd; the connection's sink takes a mapping without one. */
    struct vu_client *vc = t.dev->priv;
    uint8_t *mem = aligned_alloc(4096, 8192);
    ck_assert_ptr_nonnull(mem);
    memset(mem, 0, 8192);
    struct npv_mapping m = {
        .iova = NOFD_IOVA, .len = 8192, .vaddr = mem, .fd = -1, .prot = NPV_DMA_RW};
    ck_assert_int_eq(vc->sink.ops->map(&vc->sink, &m), 0);

    td_enable(&t, false);
    struct npv_testdev_desc fill = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = NOFD_IOVA, .len = 4096, .pattern = 0x42};
    struct npv_testdev_desc copy = {
        .opcode = NPV_TESTDEV_OP_COPY, .src = NOFD_IOVA, .dst = NOFD_IOVA + 4096, .len = 4096};
    td_submit(&t, &fill);
    td_submit(&t, &copy);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(mem[0], 0x42);
    ck_assert_uint_eq(mem[4095], 0x42);
    ck_assert_uint_eq(mem[4096], 0x42);
    ck_assert_uint_eq(mem[8191], 0x42);

    /* A DMA reaching past the mapping is refused, not copied. */
    struct npv_testdev_desc past = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = NOFD_IOVA + 4096, .len = 8192, .pattern = 0x99};
    td_submit(&t, &past);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(mem[4096], 0x42);

    ck_assert_int_eq(vc->sink.ops->unmap(&vc->sink, &m), 0);
    memset(mem, 0, 8192);
    td_enable(&t, false);
    td_submit(&t, &fill);
    ck_assert_int_eq(td_wait(&t, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(mem[0], 0);
    free(mem);
}
END_TEST

/* ---- moving the device between domains ---- */

#define A_IOVA 0x100000ull
#define B_IOVA 0x200000ull

START_TEST(domain_switch_leaves_only_the_new_domains_mappings)
{
    struct npv_cpl c;
    struct td d;
    td_open(&d, srv.path);
    td_enable(&d, false);
    struct npv_domain *a = d.dom, *b;
    ck_assert_int_eq(npv_domain_new(d.ctx, NULL, &b), 0);
    /* The driver's ring and status block live in both domains at the same IOVAs. */
    struct npv_dma *ring_mem = npv_testdev_ring_memory(d.drv);
    npv_iova_t ring_iova;
    ck_assert_int_eq(npv_dma_iova(ring_mem, a, &ring_iova), 0);
    ck_assert_int_eq(npv_dma_map_at(ring_mem, b, ring_iova, NPV_DMA_RW), 0);
    struct npv_dma *in_a, *in_b;
    ck_assert_int_eq(npv_dma_alloc(d.ctx, 4096, NULL, &in_a), 0);
    ck_assert_int_eq(npv_dma_alloc(d.ctx, 4096, NULL, &in_b), 0);
    ck_assert_int_eq(npv_dma_map_at(in_a, a, A_IOVA, NPV_DMA_RW), 0);
    ck_assert_int_eq(npv_dma_map_at(in_b, b, B_IOVA, NPV_DMA_RW), 0);
    memset(npv_dma_vaddr(in_a), 0, 4096);
    memset(npv_dma_vaddr(in_b), 0, 4096);

    ck_assert_int_eq(npv_dev_attach(d.dev, b), 0);
    ck_assert_ptr_eq(npv_dev_domain(d.dev), b);

    td_enable(&d, false);
    struct npv_testdev_desc fill_b = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = B_IOVA, .len = 64, .pattern = 0xb};
    td_submit(&d, &fill_b);
    ck_assert_int_eq(td_wait(&d, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(in_b))[0], 0xb);

    struct npv_testdev_desc fill_a = {
        .opcode = NPV_TESTDEV_OP_FILL, .dst = A_IOVA, .len = 64, .pattern = 0xa};
    td_submit(&d, &fill_a);
    ck_assert_int_eq(td_wait(&d, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, -EIO);
    ck_assert_uint_eq(c.dev_error, NPV_TESTDEV_ERR_DMA);
    ck_assert_uint_eq(td_state(&d).fault_iova, A_IOVA);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(in_a))[0], 0);

    /* And back: A's buffer is reachable again. */
    ck_assert_int_eq(npv_dev_attach(d.dev, a), 0);
    td_enable(&d, false);
    td_submit(&d, &fill_a);
    ck_assert_int_eq(td_wait(&d, GENEROUS_NS, &c), 0);
    ck_assert_int_eq(c.status, 0);
    ck_assert_uint_eq(((uint8_t *)npv_dma_vaddr(in_a))[0], 0xa);

    npv_dma_free(in_a);
    npv_dma_free(in_b);
    /* d holds a; the device's reference to b was dropped by the switch back. */
    npv_domain_put(b);
    td_close(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("vfio-user dma");
    TCase *tc = tcase_create("model dma");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, model_copies_between_client_buffers);
    tcase_add_test(tc, model_fills_client_memory_descriptor_by_descriptor);
    tcase_add_test(tc, dma_to_an_unmapped_iova_is_a_device_fault);
    tcase_add_test(tc, injected_wild_dma_is_refused_by_the_server);
    tcase_add_test(tc, device_write_to_a_read_only_mapping_is_refused);
    tcase_add_test(tc, model_reaches_memory_without_fd_through_dma_messages);
    suite_add_tcase(s, tc);
    tc = tcase_create("domains");
    tcase_add_checked_fixture(tc, setup_server, teardown_server);
    tcase_add_test(tc, domain_switch_leaves_only_the_new_domains_mappings);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
