/*
 * generate: greedy generation from a compiled artifact through the C API.
 *
 *   usage: generate ARTIFACT PROMPT_IDS N
 *
 * PROMPT_IDS is comma-separated token ids. The text of each token streams to stderr as it
 * is generated; the last line of stdout is the N generated ids, space-separated.
 * Build (from the repository's root, after `cargo build --release -p oxrelax-runtime`):
 *   cc -O2 -Wall -I runtime/include examples/generate.c -o dist/generate \
 *      -L target/release -Wl,-rpath,"$PWD/target/release" -loxrelax_runtime -lm
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "oxrelax.h"

static int print_piece(uint32_t id, const char *piece, void *user_data) {
    (void)id;
    (void)user_data;
    fputs(piece, stderr);
    return 0;
}

/* Parses comma-separated ids into ids (capacity values); returns their count or -1. */
static long parse_ids(const char *text, uint32_t *ids, size_t capacity) {
    size_t n = 0;
    while (*text) {
        char *end;
        errno = 0;
        unsigned long id = strtoul(text, &end, 10);
        if (end == text || errno || id > UINT32_MAX || n == capacity) return -1;
        ids[n++] = (uint32_t)id;
        text = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return (long)n;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s ARTIFACT PROMPT_IDS N\n", argv[0]);
        return 2;
    }
    uint32_t prompt[4096];
    long n_prompt = parse_ids(argv[2], prompt, sizeof prompt / sizeof prompt[0]);
    long n_new = strtol(argv[3], NULL, 10);
    if (n_prompt <= 0 || n_new <= 0) {
        fprintf(stderr, "PROMPT_IDS must be comma-separated ids and N a positive count\n");
        return 2;
    }
    oxrelax_model *model = NULL;
    if (oxrelax_open(argv[1], &model) != OXRELAX_OK) {
        fprintf(stderr, "error: %s\n", oxrelax_last_error());
        return 1;
    }
    oxrelax_generate_options options = oxrelax_default_generate_options();
    options.max_new_tokens = (uint32_t)n_new;
    options.ignore_eos = 1;
    uint32_t *ids = malloc((size_t)n_new * sizeof *ids);
    size_t n_out = 0;
    oxrelax_status status = ids ? oxrelax_generate(model, prompt, (size_t)n_prompt, &options,
                                                   print_piece, NULL, ids, (size_t)n_new, &n_out)
                                : OXRELAX_ERROR_INTERNAL;
    if (status != OXRELAX_OK) {
        fprintf(stderr, "error: %s\n", oxrelax_last_error());
        oxrelax_close(model);
        free(ids);
        return 1;
    }
    fputc('\n', stderr);
    for (size_t i = 0; i < n_out; i++) printf(i ? " %u" : "%u", ids[i]);
    printf("\n");
    oxrelax_close(model);
    free(ids);
    return 0;
}
