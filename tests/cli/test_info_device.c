/* SPDX-License-Identifier: MIT */
/*
 * The device part of `npuvfio info --open` (tools/info_device.c) against the
 * models over vfio-user: each device's identity and version registers read
 * by the peek are the values the model (strict like hardware: a wrong-width
 * access is refused) holds, the RKNPU's three cores are found in the
 * stand-in's BAR0, the composed version is the drivers' formula, and the
 * device's driver still opens after the peek (it touched nothing).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <check.h>
#include <npuvfio/ctx.h>
#include <npuvfio/domain.h>

#include "aicore/regs.h"
#include "child_server.h"
#include "info_device.h"
#include "json_check.h"
#include "npv_test.h"
#include "registry.h"
#include "rknpu/regs.h"
#include "testdev/regs.h"

struct peeked {
    struct vu_server srv;
    struct npv_ctx *ctx;
    struct npv_domain *dom;
    struct npv_dev *dev;
    const struct npv_device_entry *e;
    struct info_device id;
};

static void serve(const char *path, void *arg)
{
    const struct npv_device_entry *e = arg;
    int r = npv_device_serve(e, path, false);
    fprintf(stderr, "model %s: %s\n", e->name, npv_strerror(r));
    _exit(1);
}

/* The model of name, opened over vfio-user, identified by the ids its config space presents. */
static void peek(struct peeked *p, const char *name)
{
    memset(p, 0, sizeof(*p));
    p->e = npv_device_find(name);
    ck_assert_ptr_nonnull(p->e);
    vu_server_start(&p->srv, serve, (void *)p->e);
    ck_assert_int_eq(npv_ctx_new(&p->ctx), 0);
    ck_assert_int_eq(npv_domain_new(p->ctx, NULL, &p->dom), 0);
    ck_assert_int_eq(npv_dev_open_vfio_user(p->ctx, p->srv.path, p->dom, NULL, &p->dev), 0);
    uint16_t ids[2];
    ck_assert_int_eq(npv_dev_config_read(p->dev, 0x00, ids, sizeof(ids)), 0);
    ck_assert_uint_eq(ids[0], p->e->model_id.vendor);
    ck_assert_uint_eq(ids[1], p->e->model_id.device);
    info_device_init_pci(&p->id, ids[0], ids[1]);
    info_device_peek(&p->id, p->dev);
}

/* The driver opens on the device the peek read: nothing was left half-done. */
static void driver_still_opens(struct peeked *p)
{
    void *drv = NULL;
    ck_assert_int_eq(p->e->driver_open(p->dev, &drv), 0);
    p->e->driver_close(drv);
}

static void done(struct peeked *p)
{
    npv_dev_close(p->dev);
    npv_domain_put(p->dom);
    npv_ctx_free(p->ctx);
    vu_server_kill(&p->srv);
}

static char *json_of(const struct info_device *id)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ck_assert_ptr_nonnull(f);
    struct json_out j;
    json_init(&j, f);
    info_device_json(&j, id);
    json_finish(&j);
    fclose(f);
    ck_assert_msg(json_valid_document(buf), "%s", buf);
    return buf;
}

static const struct info_reg *reg(const struct info_device *id, const char *name)
{
    for (size_t i = 0; i < id->nregs; i++)
        if (strcmp(id->regs[i].name, name) == 0)
            return &id->regs[i];
    ck_abort_msg("no register %s", name);
    return NULL;
}

START_TEST(rknpu_version_registers_of_three_cores_and_the_drivers_version)
{
    struct peeked p;
    peek(&p, "rknpu");
    ck_assert_str_eq(p.id.kind, "rknpu");
    ck_assert(p.id.peeked);
    ck_assert_uint_eq(p.id.nregs, 6);
    for (unsigned c = 0; c < 3; c++) {
        char n[32];
        snprintf(n, sizeof(n), "core%u.PC_VERSION", c);
        const struct info_reg *r = reg(&p.id, n);
        ck_assert_int_eq(r->err, 0);
        ck_assert_uint_eq(r->value, RKNPU_VERSION_VALUE);
        ck_assert_uint_eq(r->offset, RKNPU_CORE_BASE(c) + RKNPU_PC_VERSION);
        snprintf(n, sizeof(n), "core%u.PC_VERSION_NUM", c);
        ck_assert_uint_eq(reg(&p.id, n)->value, RKNPU_VERSION_NUM_VALUE);
    }
    ck_assert_str_eq(p.id.version, "0x46495245 0x46495245 0x46495245");
    ck_assert_int_ge(p.id.revision, 0);
    char *js = json_of(&p.id);
    ck_assert_msg(strstr(js, "\"kind\":\"rknpu\",\"read\":true,") &&
                      strstr(js, "\"version\":\"0x46495245 0x46495245 0x46495245\"") &&
                      strstr(js, "{\"name\":\"core2.PC_VERSION\",\"region\":0,\"offset\":"
                                 "\"0x20000\",\"width\":4,\"value\":\"0x46495245\"}") &&
                      strstr(js, "rknpu_get_hw_version"),
                  "%s", js);
    free(js);
    driver_still_opens(&p);
    done(&p);
}
END_TEST

START_TEST(aicore_stand_in_id_and_version_are_read_64_bit_and_marked_as_the_model_s)
{
    struct peeked p;
    peek(&p, "aicore");
    ck_assert_str_eq(p.id.kind, "aicore");
    ck_assert_uint_eq(p.id.nregs, 2);
    /* The stand-in takes only 8-byte accesses to BAR0: a 4-byte peek would be refused. */
    ck_assert_int_eq(reg(&p.id, "ID")->err, 0);
    ck_assert_uint_eq(reg(&p.id, "ID")->value, AICORE_ID_VALUE);
    ck_assert_uint_eq(reg(&p.id, "VERSION")->value, AICORE_VERSION_VALUE);
    ck_assert_str_eq(p.id.version, "1.0");
    ck_assert_msg(strstr(p.id.source, "stand-in") && strstr(p.id.source, "not an Ascend"), "%s",
                  p.id.source);
    driver_still_opens(&p);
    done(&p);
    /* A real Ascend part: no register read, said so. */
    struct info_device id;
    info_device_init_pci(&id, 0x19e5, 0xd801);
    ck_assert_str_eq(id.kind, "aicore");
    ck_assert_uint_eq(id.nregs, 0);
    ck_assert_msg(id.note && strstr(id.note, "PCI revision ID only"), "%s", id.note);
}
END_TEST

START_TEST(testdev_id_register_and_pci_revision)
{
    struct peeked p;
    peek(&p, "testdev");
    ck_assert_str_eq(p.id.kind, "testdev");
    ck_assert_uint_eq(reg(&p.id, "ID")->value, TESTDEV_ID_VALUE);
    uint8_t rev;
    ck_assert_int_eq(npv_dev_config_read(p.dev, 0x08, &rev, 1), 0);
    ck_assert_int_eq(p.id.revision, rev);
    ck_assert_str_eq(p.id.version, "");
    char *js = json_of(&p.id);
    char want[64];
    snprintf(want, sizeof(want), "\"pci_revision\":\"0x%02x\",\"version\":null", rev);
    ck_assert_msg(strstr(js, want), "%s", js);
    free(js);
    driver_still_opens(&p);
    done(&p);
}
END_TEST

START_TEST(edgetpu_has_no_version_register_and_the_revision_stands_for_it)
{
    struct peeked p;
    peek(&p, "edgetpu");
    ck_assert_str_eq(p.id.kind, "edgetpu");
    ck_assert_uint_eq(p.id.nregs, 0);
    ck_assert_int_ge(p.id.revision, 0);
    ck_assert_msg(p.id.note && strstr(p.id.note, "PCI revision ID stands for the version"), "%s",
                  p.id.note);
    driver_still_opens(&p);
    done(&p);
}
END_TEST

START_TEST(edu_and_unknown_devices)
{
    struct info_device id;
    info_device_init_pci(&id, 0x1234, 0x11e8);
    ck_assert_str_eq(id.kind, "edu");
    ck_assert_uint_eq(id.nregs, 1);
    ck_assert_str_eq(id.regs[0].name, "identification");
    /* Not opened: the object says so and lists no value. */
    char *js = json_of(&id);
    ck_assert_msg(strstr(js, "{\"kind\":\"edu\",\"read\":false,\"pci_revision\":null,\"version\":"
                             "null,\"registers\":[],"),
                  "%s", js);
    free(js);
    info_device_init_pci(&id, 0x8086, 0x1533);
    ck_assert_ptr_null(id.kind);
    js = json_of(&id);
    ck_assert_msg(strstr(js, "\"kind\":null"), "%s", js);
    free(js);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cli_info_device");
    TCase *tc = tcase_create("peek");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, rknpu_version_registers_of_three_cores_and_the_drivers_version);
    tcase_add_test(tc, aicore_stand_in_id_and_version_are_read_64_bit_and_marked_as_the_model_s);
    tcase_add_test(tc, testdev_id_register_and_pci_revision);
    tcase_add_test(tc, edgetpu_has_no_version_register_and_the_revision_stands_for_it);
    tcase_add_test(tc, edu_and_unknown_devices);
    suite_add_tcase(s, tc);
    return npv_test_run(s);
}
