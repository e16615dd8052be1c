/* Fuzz target: step-list text, replayed on a small conv2d and lowered.  Parse errors, illegal
 * steps and unlowerable schedules are statuses; a lowered program must verify against the
 * definition, and printing a parsed list must parse back to the same text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static tt_workload *workload;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    if (!workload &&
        tt_workload_parse("conv2d_bn_relu:N=1,H=5,W=5,CI=2,CO=3,K=3,S=1,P=1", &workload, NULL))
        abort();
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    tt_step *steps = NULL;
    size_t n = 0;
    tt_errbuf err;
    if (tt_steps_from_json(text, &steps, &n, &err) == TT_OK) {
        char *back = tt_steps_to_json(steps, n);
        tt_step *again;
        size_t m;
        if (!back || tt_steps_from_json(back, &again, &m, &err) != TT_OK || m != n)
            abort();
        char *back2 = tt_steps_to_json(again, m);
        if (strcmp(back, back2) != 0)
            abort();
        free(back2);
        free(again);
        free(back);
        tt_state *st = NULL;
        if (n <= 64 && tt_state_replay(&workload->dag, steps, n, &st, &err) == TT_OK) {
            tt_program *prog = NULL;
            if (tt_lower(st, &prog, &err) == TT_OK) {
                if (tt_verify_program(&workload->dag, prog, 1, 1e-4, 1e-5, NULL, &err) != TT_OK)
                    abort();
                tt_program_free(prog);
            }
            tt_state_free(st);
        }
    }
    free(steps);
    free(text);
    return 0;
}
