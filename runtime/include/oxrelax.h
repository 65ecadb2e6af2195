/*
 * oxrelax.h: the C API of the oxrelax runtime (liboxrelax_runtime.so / .a).
 *
 * Open a compiled artifact (a folder written by `oxrelax compile`), generate with a
 * token callback, reset the conversation, close. Every call that can fail returns an
 * oxrelax_status and leaves a message for oxrelax_last_error(). Strings are UTF-8 and
 * NUL-terminated.
 *
 * Handles: an oxrelax_model * is an opaque id in a process-wide table of open models
 * (guarded by a mutex), never an address: the library never reads through it. Ids are not
 * reused, so closing a handle twice, or using it after oxrelax_close, is refused with
 * OXRELAX_ERROR_INVALID_HANDLE. A handle serves one call at a time: a second call on it
 * while one runs (from another thread, or from a token callback) is refused with
 * OXRELAX_ERROR_INVALID_ARGUMENT; different handles may be used from different threads.
 *
 * Buffers: a pointer with a nonzero length or capacity must not be NULL and must be
 * aligned for its type, and the length must fit in memory; otherwise the call returns
 * OXRELAX_ERROR_INVALID_ARGUMENT before doing anything. The library can only check what
 * it is told: a buffer shorter than its stated capacity is still the caller's bug.
 */
#ifndef OXRELAX_H
#define OXRELAX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a call returns. */
typedef enum oxrelax_status {
    OXRELAX_OK = 0,
    OXRELAX_ERROR_INVALID_ARGUMENT = 1, /* null or misaligned pointer, non-UTF-8 string,
                                           bad value or size, handle busy with a call */
    OXRELAX_ERROR_ARTIFACT = 2,         /* the artifact failed a check or did not load */
    OXRELAX_ERROR_TOKENIZER = 3,
    OXRELAX_ERROR_GENERATION = 4,       /* prompt past the context window, id out of
                                           vocabulary, empty prompt */
    OXRELAX_ERROR_BUFFER_TOO_SMALL = 5, /* the needed size was still reported */
    OXRELAX_ERROR_INTERNAL = 6,         /* a bug in oxrelax, caught at the boundary */
    OXRELAX_ERROR_INVALID_HANDLE = 7    /* a handle closed already, or never opened */
} oxrelax_status;

/* An opened model: the artifact's engine (one KV cache) and tokenizer. Opaque: an id in
 * the table of open models (see Handles above). */
typedef struct oxrelax_model oxrelax_model;

/* How oxrelax_generate samples and when it stops. */
typedef struct oxrelax_generate_options {
    uint32_t max_new_tokens;  /* tokens to generate at most */
    float temperature;        /* 0: greedy */
    float top_p;              /* nucleus sampling mass (1: off) */
    uint32_t top_k;           /* keep this many most likely tokens (0: all) */
    float repetition_penalty; /* 1: off */
    uint64_t seed;            /* seed of the random generator */
    int ignore_eos;           /* nonzero: go on past EOS tokens */
} oxrelax_generate_options;

/* Called with each generated token: its id, its text (empty while a multi-byte
 * character is incomplete, or without a tokenizer; valid during the call only) and
 * user_data. Return nonzero to stop generating. */
typedef int (*oxrelax_token_callback)(uint32_t id, const char *piece, void *user_data);

/* Greedy decoding of at most 128 tokens, stopping at EOS. */
oxrelax_generate_options oxrelax_default_generate_options(void);

/* The message of the last failed call on this thread (empty after a success); valid
 * until the next call on this thread. */
const char *oxrelax_last_error(void);

/* Opens the artifact folder artifact_dir: checks its format, target triple and CPU
 * features, the SHA-256 of every file and each kernel's signature, then loads it.
 * The weights are copied out of the file (those of 2 MiB or more into transparent huge
 * pages where the OS has them), so a weights file changed while the model is open
 * changes nothing (kernels.so stays mapped: leave it as it is); OXRELAX_HUGE_PAGES=0
 * in the environment before the first open keeps the weights in the file mapping (a
 * faster open; the file must then stay as it is). *out is set to the new handle, or to
 * NULL when the open fails. */
oxrelax_status oxrelax_open(const char *artifact_dir, oxrelax_model **out);

/* oxrelax_open for an artifact compiled with --npu qnn, its NPU graphs run by npu:
 * "htp" (Qualcomm's libQnnHtp.so from the folder qnn_lib_dir, or from the folder
 * OXRELAX_QNN_LIB_DIR names when qnn_lib_dir is NULL, on the artifact's context
 * binary; designed to load the device's library on a phone, but only exercised with
 * the x86-64 simulation library so far), "sim" or "sim-integer" (the host reference
 * backend). Only in a runtime built with its npu feature (on by default). */
oxrelax_status oxrelax_open_npu(const char *artifact_dir, const char *npu, const char *qnn_lib_dir,
                                oxrelax_model **out);

/* Closes a handle: OXRELAX_OK, also for NULL (ignored); OXRELAX_ERROR_INVALID_HANDLE for
 * a handle that is not open (closed already). */
oxrelax_status oxrelax_close(oxrelax_model *model);

/* Positions the KV cache holds; tokens it holds now (the conversation so far). Both are 0
 * for NULL or a handle that is not open, with a message for oxrelax_last_error(). */
size_t oxrelax_context_window(const oxrelax_model *model);
size_t oxrelax_cached_tokens(const oxrelax_model *model);

/* Encodes text with the artifact's tokenizer into ids (capacity values); *n_ids is the
 * number of ids, also when the buffer is too small (ids NULL with capacity 0 asks for the
 * size: OXRELAX_ERROR_BUFFER_TOO_SMALL and *n_ids). */
oxrelax_status oxrelax_encode(oxrelax_model *model, const char *text, int add_special_tokens,
                              uint32_t *ids, size_t capacity, size_t *n_ids);

/* Appends prompt to the conversation in the KV cache and generates after it, calling
 * callback (may be NULL) with each token. The generated ids go to out_ids (capacity
 * values), their number to *n_out. options NULL: oxrelax_default_generate_options().
 * A prompt that does not fit in the context window with the tokens already cached is
 * refused (OXRELAX_ERROR_GENERATION) before anything is read or allocated; so are bad
 * arguments (OXRELAX_ERROR_INVALID_ARGUMENT), so a refused call leaves the cache as it
 * was. */
oxrelax_status oxrelax_generate(oxrelax_model *model, const uint32_t *prompt, size_t n_prompt,
                                const oxrelax_generate_options *options,
                                oxrelax_token_callback callback, void *user_data,
                                uint32_t *out_ids, size_t capacity, size_t *n_out);

/* Forgets the conversation (empties the KV cache). */
oxrelax_status oxrelax_reset(oxrelax_model *model);

#ifdef __cplusplus
}
#endif

#endif /* OXRELAX_H */
