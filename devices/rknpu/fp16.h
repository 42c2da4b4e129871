/* SPDX-License-Identifier: MIT */
/*
 * IEEE 754 binary16 <-> binary32 in integer arithmetic (round to nearest
 * even), for the model, the sample and the tests: _Float16 is not available
 * on every compiler and target we build for.
 */
#ifndef NPV_RKNPU_FP16_H
#define NPV_RKNPU_FP16_H

#include <stdint.h>
#include <string.h>

static inline uint16_t rknpu_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t exp = (x >> 23) & 0xffu, mant = x & 0x7fffffu;
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) {
        if (e < -10)
            return sign;
        mant |= 0x800000u;
        unsigned shift = (unsigned)(14 - e);
        uint32_t half = mant >> shift, rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1u)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (half & 1u)))
        half++; /* may carry into the exponent, up to infinity: correct */
    return (uint16_t)(sign | half);
}

static inline float rknpu_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                mant <<= 1;
                e++;
            } while ((mant & 0x400u) == 0);
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

#endif
