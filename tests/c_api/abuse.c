/*
 * abuse: calls every entry point of the C API wrongly (NULLs, zero and huge sizes,
 * misaligned buffers, invalid UTF-8, prompts past the context window, closed and made-up
 * handles, double close, reentry from a token callback) and prints one line per call:
 *
 *   NAME STATUS LAST_ERROR
 *
 * It judges nothing: tests/c_api.rs compares the lines with the statuses expected. It
 * exits 0 once every call has returned (a crash is the failure it guards against).
 *
 *   usage: abuse ARTIFACT
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "oxrelax.h"

/* Prints a call's name, its status and this thread's last error. */
static void report(const char *name, oxrelax_status status) {
    printf("%s %d %s\n", name, (int)status, oxrelax_last_error());
}

/* Prints a size query's name, its value and the last error (0 must come with one). */
static void report_size(const char *name, size_t value) {
    printf("%s %zu %s\n", name, value, oxrelax_last_error());
}

/* A token callback that calls back into the API on its model (user_data): refused. */
static int reenter(uint32_t id, const char *piece, void *user_data) {
    (void)id;
    (void)piece;
    report("callback_reset_same_handle", oxrelax_reset((oxrelax_model *)user_data));
    return 1;
}

static void abuse_open(const char *artifact) {
    oxrelax_model *model = (oxrelax_model *)(uintptr_t)0xdead;
    report("open_null_dir", oxrelax_open(NULL, &model));
    report("open_null_out", oxrelax_open(artifact, NULL));
    report("open_invalid_utf8", oxrelax_open("\xff\xfe", &model));
    report("open_missing_dir", oxrelax_open("/nonexistent/oxrelax", &model));
    report("open_npu_null_backend", oxrelax_open_npu(artifact, NULL, NULL, &model));
    report("open_npu_unknown_backend", oxrelax_open_npu(artifact, "gpu", NULL, &model));
    report("open_npu_without_npu_graphs", oxrelax_open_npu(artifact, "sim", NULL, &model));
    report("open_failure_nulls_out", model == NULL ? OXRELAX_OK : OXRELAX_ERROR_INTERNAL);
}

static void abuse_encode(oxrelax_model *model) {
    uint32_t ids[64];
    size_t n_ids = 0;
    uint32_t *misaligned = (uint32_t *)((char *)ids + 1);
    report("encode_null_model", oxrelax_encode(NULL, "hi", 1, ids, 64, &n_ids));
    report("encode_null_text", oxrelax_encode(model, NULL, 1, ids, 64, &n_ids));
    report("encode_invalid_utf8", oxrelax_encode(model, "a\xc3(", 1, ids, 64, &n_ids));
    report("encode_null_n_ids", oxrelax_encode(model, "hi", 1, ids, 64, NULL));
    report("encode_null_ids_capacity_8", oxrelax_encode(model, "hi", 1, NULL, 8, &n_ids));
    report("encode_huge_capacity", oxrelax_encode(model, "hi", 1, ids, SIZE_MAX, &n_ids));
    report("encode_misaligned_ids", oxrelax_encode(model, "hi", 1, misaligned, 8, &n_ids));
    report("encode_size_query", oxrelax_encode(model, "hi", 1, NULL, 0, &n_ids));
    size_t queried = n_ids;
    report("encode_ok", oxrelax_encode(model, "hi", 1, ids, 64, &n_ids));
    report_size("encode_size_query_n_ids_match", queried > 0 && queried == n_ids);
}

static void abuse_generate(oxrelax_model *model) {
    uint32_t prompt[2] = {1, 2}, out[8];
    size_t n_out = 0, window = oxrelax_context_window(model);
    uint32_t *long_prompt = calloc(window + 1, sizeof *long_prompt);
    uint32_t out_of_vocab = UINT32_MAX;
    oxrelax_generate_options options = oxrelax_default_generate_options();
    options.max_new_tokens = 2;
    options.ignore_eos = 1;
    oxrelax_generate_options bad = options;
    bad.temperature = -1.0f;
#define GENERATE(name, m, p, n, o, buffer, capacity, n_out_ptr)                                \
    report(name, oxrelax_generate(m, p, n, o, NULL, NULL, buffer, capacity, n_out_ptr))
    GENERATE("generate_null_model", NULL, prompt, 2, &options, out, 8, &n_out);
    GENERATE("generate_null_prompt_n_2", model, NULL, 2, &options, out, 8, &n_out);
    GENERATE("generate_n_prompt_size_max", model, prompt, SIZE_MAX, &options, out, 8, &n_out);
    GENERATE("generate_prompt_past_window", model, long_prompt, window + 1, &options, out, 8,
             &n_out);
    GENERATE("generate_empty_prompt", model, prompt, 0, &options, out, 8, &n_out);
    GENERATE("generate_id_out_of_vocab", model, &out_of_vocab, 1, &options, out, 8, &n_out);
    GENERATE("generate_invalid_options", model, prompt, 2, &bad, out, 8, &n_out);
    GENERATE("generate_null_out_capacity_8", model, prompt, 2, &options, NULL, 8, &n_out);
    GENERATE("generate_huge_capacity", model, prompt, 2, &options, out, SIZE_MAX, &n_out);
    GENERATE("generate_null_n_out", model, prompt, 2, &options, out, 8, NULL);
    report_size("cached_after_refusals", oxrelax_cached_tokens(model));
    report("generate_reentrant_callback",
           oxrelax_generate(model, prompt, 2, &options, reenter, model, out, 8, &n_out));
    GENERATE("generate_ok", model, prompt, 2, &options, out, 8, &n_out);
    report_size("generate_ok_n_out", n_out);
    GENERATE("generate_n_prompt_size_max_with_cache", model, prompt, SIZE_MAX, &options, out,
             8, &n_out);
#undef GENERATE
    free(long_prompt);
}

static void abuse_closed(oxrelax_model *model) {
    uint32_t ids[8], prompt[1] = {1};
    size_t n = 0;
    report("close", oxrelax_close(model));
    report("close_again", oxrelax_close(model));
    report("encode_closed", oxrelax_encode(model, "hi", 1, ids, 8, &n));
    report("generate_closed",
           oxrelax_generate(model, prompt, 1, NULL, NULL, NULL, ids, 8, &n));
    report("reset_closed", oxrelax_reset(model));
    report_size("context_window_closed", oxrelax_context_window(model));
    report_size("cached_tokens_closed", oxrelax_cached_tokens(model));
    report("close_made_up_handle", oxrelax_close((oxrelax_model *)(uintptr_t)0x1234));
    report("close_null", oxrelax_close(NULL));
    report("reset_null", oxrelax_reset(NULL));
    report_size("context_window_null", oxrelax_context_window(NULL));
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s ARTIFACT\n", argv[0]);
        return 2;
    }
    abuse_open(argv[1]);
    oxrelax_model *model = NULL;
    report("open", oxrelax_open(argv[1], &model));
    if (model == NULL) return 1;
    abuse_encode(model);
    abuse_generate(model);
    report("reset", oxrelax_reset(model));
    abuse_closed(model);
    return 0;
}
