/* SPDX-License-Identifier: MIT */
/* PCI function addresses: "DDDD:BB:DD.F" as sysfs names functions. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <npuvfio/pci.h>

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Exactly min..max hex digits ending at stop; the position after them in *p. */
static int parse_hex(const char **p, int min, int max, char stop, uint32_t *out)
{
    uint32_t v = 0;
    int n = 0;
    const char *s = *p;
    while (hex_digit(*s) >= 0) {
        if (++n > max)
            return -EINVAL;
        v = v << 4 | (uint32_t)hex_digit(*s);
        s++;
    }
    if (n < min || *s != stop)
        return -EINVAL;
    *p = s;
    *out = v;
    return 0;
}

/*
 * The domain is 4 hex digits as sysfs prints it, or up to 7 for the
 * synthetic domains of VMD (0x10000 and up): NPV_PCI_ADDR_LEN leaves room for
 * 7, and no platform numbers domains beyond that.
 */
int npv_pci_addr_parse(const char *text, struct npv_pci_addr *addr)
{
    if (text == NULL || addr == NULL)
        return -EINVAL;
    const char *p = text;
    uint32_t domain = 0, bus, dev, fn;
    /* "BB:DD.F" has its second ':' missing; count them to tell the forms apart. */
    const char *c1 = strchr(p, ':');
    bool has_domain = c1 != NULL && strchr(c1 + 1, ':') != NULL;
    if (has_domain) {
        if (parse_hex(&p, 4, 7, ':', &domain) < 0)
            return -EINVAL;
        p++;
    }
    if (parse_hex(&p, 2, 2, ':', &bus) < 0)
        return -EINVAL;
    p++;
    if (parse_hex(&p, 2, 2, '.', &dev) < 0 || dev > 0x1f)
        return -EINVAL;
    p++;
    if (p[0] < '0' || p[0] > '7' || p[1] != '\0')
        return -EINVAL;
    fn = (uint32_t)(p[0] - '0');
    addr->domain = domain;
    addr->bus = (uint8_t)bus;
    addr->dev = (uint8_t)dev;
    addr->fn = (uint8_t)fn;
    return 0;
}

void npv_pci_addr_format(const struct npv_pci_addr *addr, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    snprintf(buf, len, "%04x:%02x:%02x.%x", addr->domain, addr->bus, addr->dev, addr->fn);
}
