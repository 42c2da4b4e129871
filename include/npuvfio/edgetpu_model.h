/* SPDX-License-Identifier: MIT */
/*
 * Edge TPU compiled models: a `*_edgetpu.tflite` file from Google's
 * edgetpu_compiler, loaded and linked without any device I/O, and run on a
 * chip opened with npv_edgetpu_open (npv_edgetpu_model_bind, _invoke).
 *
 * The file is a TensorFlow Lite flatbuffer whose one `edgetpu-custom-op`
 * operator carries, in its custom options (a FlexBuffers map, key "4"), a
 * DarwiNN package (flatbuffer "DWN1": Package -> MultiExecutable ->
 * Executables; libedgetpu's executable/executable.fbs). Load reads it with a
 * verifying reader (every offset, length and vtable checked: files are
 * untrusted) and refuses what the driver does not run: multi-chip packages,
 * parameters in TPU DRAM, more than one Edge TPU operator, executables for
 * several chips in one operator.
 *
 * An executable has instruction chunks (bitstreams) with field offsets: 32-bit
 * immediates at a bit offset that receive the lower or upper half of a device
 * address (an input or output activation of a layer and batch element, the
 * parameters, the scratch). npv_edgetpu_model_link() copies a chunk and
 * patches every field, as libedgetpu's ExecutableUtil::Link*Address do.
 *
 * Thread-safety: a loaded model is immutable; every call but unload may run
 * in any thread at the same time as others on the same model. Unload must not
 * overlap any other use of the model or of what its accessors returned.
 */
#ifndef NPUVFIO_EDGETPU_MODEL_H
#define NPUVFIO_EDGETPU_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <npuvfio/common.h>
#include <npuvfio/edgetpu.h>

#ifdef __cplusplus
extern "C" {
#endif

struct npv_ctx;
struct npv_edgetpu_model;
struct npv_edgetpu_model_exe;
struct npv_edgetpu_bound;

/* executable.fbs ExecutableType. */
enum npv_edgetpu_exe_type {
    NPV_EDGETPU_EXE_STAND_ALONE = 0,
    NPV_EDGETPU_EXE_PARAMETER_CACHING = 1,
    NPV_EDGETPU_EXE_EXECUTION_ONLY = 2,
};

/* executable.fbs DataType (values as there). */
enum npv_edgetpu_dtype {
    NPV_EDGETPU_FIXED_POINT8 = 0,
    NPV_EDGETPU_FIXED_POINT16 = 1,
    NPV_EDGETPU_SIGNED_FIXED_POINT32 = 2,
    NPV_EDGETPU_BFLOAT = 3,
    NPV_EDGETPU_HALF = 4,
    NPV_EDGETPU_SINGLE = 5,
    NPV_EDGETPU_SIGNED_FIXED_POINT8 = 8,
    NPV_EDGETPU_SIGNED_FIXED_POINT16 = 9,
};

#define NPV_EDGETPU_MAX_DIMS 6

/* One input or output layer of an executable. */
struct npv_edgetpu_layer {
    const char *name;    /* the layer's (TFLite tensor's) name */
    uint32_t size_bytes; /* bytes per batch element, padding included */
    uint32_t y_dim, x_dim, z_dim;
    uint32_t nr_dims; /* 0 when the package has no shape */
    uint32_t dims[NPV_EDGETPU_MAX_DIMS];
    int32_t zero_point;
    float scale;              /* dequantization_factor */
    uint32_t data_type;       /* enum npv_edgetpu_dtype */
    uint32_t execution_count; /* times the layer runs per inference (>= 1) */
};

/* One field of a chunk: bits [offset_bit, +32) receive half of an address. */
struct npv_edgetpu_model_field {
    uint32_t offset_bit;
    uint8_t base;   /* enum npv_edgetpu_base */
    uint8_t half;   /* enum npv_edgetpu_half */
    uint16_t layer; /* the input (base INPUT) or output (base OUTPUT) layer's index; else 0 */
    uint32_t batch; /* the batch element (< batch_size); 0 for parameters and scratch */
};

/* One instruction chunk as compiled. */
struct npv_edgetpu_chunk {
    const uint8_t *bitstream;
    size_t size;
    const struct npv_edgetpu_model_field *fields;
    uint32_t nr_fields;
};

struct npv_edgetpu_exe_info {
    uint32_t type;             /* enum npv_edgetpu_exe_type */
    const char *name;          /* "" when the package names none */
    const char *chip;          /* "" when the package names none */
    uint32_t batch_size;       /* >= 1 */
    uint64_t scratch_size;     /* bytes per batch element; 0: no scratch */
    const uint8_t *parameters; /* NULL when parameters_size is 0 */
    size_t parameters_size;
    uint64_t caching_token; /* parameter_caching_token; 0: none */
    uint32_t nr_chunks, nr_inputs, nr_outputs;
};

/* Device addresses for npv_edgetpu_model_link. */
struct npv_edgetpu_link {
    const uint64_t *inputs; /* [nr_inputs * batch_size]: input i, batch b at [i * batch_size + b] */
    const uint64_t *outputs; /* [nr_outputs * batch_size], the same way */
    uint64_t parameters;     /* the device address of the executable's parameters */
    uint64_t scratch;        /* the device address of its scratch */
};

/*
 * Load a compiled model from a file / from memory (copied: data may be freed
 * after the call). ctx (may be NULL) supplies the allocation failpoints
 * (npuvfio/failpoint.h). why (may be NULL) receives a message naming the
 * reason of a failure. 0 and *out, or -EINVAL (a NULL argument), -ENOMEM,
 * -EFBIG (over 1 GiB), the errno of opening or reading the file, -EBADMSG (a
 * structure that does not fit the file, a wrong identifier, an inconsistent
 * package), -E2BIG (vectors aliasing beyond the file's size), -ENOENT (no
 * edgetpu-custom-op, no executable), -ENOTSUP (multi-chip, DRAM parameters,
 * several Edge TPU operators or chips, an unknown executable type or mix).
 */
NPV_API int npv_edgetpu_model_load(struct npv_ctx *ctx, const char *path,
                                   struct npv_edgetpu_model **out, char *why, size_t why_len);
NPV_API int npv_edgetpu_model_load_mem(struct npv_ctx *ctx, const void *data, size_t size,
                                       struct npv_edgetpu_model **out, char *why, size_t why_len);
/* NULL is a no-op. */
NPV_API void npv_edgetpu_model_unload(struct npv_edgetpu_model *m);

/* The executable an inference runs: STAND_ALONE or EXECUTION_ONLY. Never NULL. */
NPV_API const struct npv_edgetpu_model_exe *
npv_edgetpu_model_main(const struct npv_edgetpu_model *m);
/* The PARAMETER_CACHING executable, or NULL for a stand-alone model. */
NPV_API const struct npv_edgetpu_model_exe *
npv_edgetpu_model_caching(const struct npv_edgetpu_model *m);
/* The caching executable's token, 0 for a stand-alone model. */
NPV_API uint64_t npv_edgetpu_model_caching_token(const struct npv_edgetpu_model *m);
/*
 * Whether a and b may keep their parameters cached on the chip together
 * (co-compiled: both have a caching executable with the same non-zero token).
 */
NPV_API bool npv_edgetpu_model_same_cache(const struct npv_edgetpu_model *a,
                                          const struct npv_edgetpu_model *b);

NPV_API void npv_edgetpu_model_exe_info(const struct npv_edgetpu_model_exe *exe,
                                        struct npv_edgetpu_exe_info *info);
/* Chunk i; -ERANGE past the last. */
NPV_API int npv_edgetpu_model_chunk(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                                    struct npv_edgetpu_chunk *chunk);
/* Input / output layer i; -ERANGE past the last. */
NPV_API int npv_edgetpu_model_input(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                                    struct npv_edgetpu_layer *layer);
NPV_API int npv_edgetpu_model_output(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                                     struct npv_edgetpu_layer *layer);

/*
 * Copy chunk i into dst (dst_len >= its size) with every field patched from
 * addrs. -EINVAL for a NULL argument or a field whose addresses addrs lacks
 * (inputs or outputs NULL), -ENOSPC when dst is too small, -ERANGE for a chunk
 * past the last.
 */
NPV_API int npv_edgetpu_model_link(const struct npv_edgetpu_model_exe *exe, uint32_t i,
                                   const struct npv_edgetpu_link *addrs, void *dst, size_t dst_len);

/*
 * Real values of n elements of layer's data type at src (src_len bytes):
 * (q - zero_point) * scale for the fixed-point types (signed fixed point:
 * q * scale), the value itself for SINGLE, HALF and BFLOAT. Returns the
 * number of values written (n), -EINVAL for a NULL argument or src_len < n
 * elements, -ENOTSUP for a data type it does not know.
 */
NPV_API int npv_edgetpu_dequantize(const struct npv_edgetpu_layer *layer, const void *src,
                                   size_t src_len, float *dst, size_t n);

/*
 * Running a compiled model on the chip (or its model), as libedgetpu's PCIe
 * driver does. Thread-safety: a binding belongs to its npv_edgetpu; bind,
 * unbind, invoke and the buffer accessors follow npv_edgetpu's rule (one
 * thread at a time per chip). The model must outlive its bindings.
 *
 * Bind: every buffer the chip reaches is copied or allocated in DMA memory
 * and mapped through the chip's page table (device VAs, extended space): the
 * instruction chunk of each executable, its parameters (read-only to the
 * chip), its scratch, and one driver-owned buffer per input (read-only to the
 * chip) and output (write-only) layer, size_bytes x batch_size each. 0, or
 * -EINVAL, -ENOMEM, -ENOSPC (page table full), -ENOTSUP (an executable of
 * more than one chunk: none of the compiler outputs we have).
 */
NPV_API int npv_edgetpu_model_bind(struct npv_edgetpu *tpu, const struct npv_edgetpu_model *m,
                                   struct npv_edgetpu_bound **out);
/* Unmap and free what bind took. NULL is a no-op. Nothing of it may be in flight. */
NPV_API void npv_edgetpu_model_unbind(struct npv_edgetpu_bound *b);
/*
 * The driver's buffer of input / output layer i (batch elements one after the
 * other), with its device VA and length when not NULL; NULL past the last.
 */
NPV_API void *npv_edgetpu_bound_input(struct npv_edgetpu_bound *b, uint32_t i, uint64_t *device_va,
                                      size_t *len);
NPV_API void *npv_edgetpu_bound_output(struct npv_edgetpu_bound *b, uint32_t i, uint64_t *device_va,
                                       size_t *len);
/*
 * One inference. First, when the chip does not hold this model's parameters
 * (its caching token is not the current one, it has not cached under the
 * current token since, or the chip was reset since: libedgetpu driver.cc),
 * the parameter-caching executable runs; changing the token drops every
 * other model's cached parameters. Then the inference executable: its chunk
 * linked with the device VAs of the inputs and outputs (input_va / output_va:
 * [nr * batch_size] as in npv_edgetpu_link, from npv_edgetpu_map of the
 * caller's memory, e.g. an npv_dma_wrap buffer; NULL: the driver's buffers),
 * its parameters and scratch, put on the queue and finished on the chip's two
 * signals (npv_edgetpu_run). The driver syncs its own buffers for a
 * non-coherent host; the caller syncs its own (edgetpu.h). Returns 1 when the
 * parameters were cached first, 0 when they were already on the chip; or
 * -EBUSY (requests of npv_edgetpu_submit in flight), -EINVAL, -ENOMEM, or
 * npv_edgetpu_run's failure (-EIO, -ETIMEDOUT after a reset, -NPV_EDEVFAULT,
 * -ENODEV). After a failure the chip was reset: the next invoke caches again.
 */
NPV_API int npv_edgetpu_model_invoke(struct npv_edgetpu_bound *b, const uint64_t *input_va,
                                     const uint64_t *output_va);

#ifdef __cplusplus
}
#endif

#endif
