/* Differential tests: for every operator of the library, random legal step sequences (seeded)
 * produce, through lowering and the interpreter, what the naive definition produces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>

#include "random_schedule.h"

#define SCHEDULES_PER_WORKLOAD 100

static void every_operator_matches_naive_definition_under_random_schedules(void **state)
{
    (void)state;
    int total = 0, lowered = 0;
    int kinds[TT_STEP_KIND_COUNT] = {0};
    const char *const *workloads = tt_test_workloads;
    for (size_t w = 0; w < tt_test_nworkloads; w++) {
        tt_workload *wl;
        tt_errbuf err = {{0}};
        tt_status s = tt_workload_parse(workloads[w], &wl, &err);
        if (s)
            fail_msg("%s: %s", workloads[w], err.msg);
        int ok_here = 0;
        for (int k = 0; k < SCHEDULES_PER_WORKLOAD; k++) {
            tt_rng rng;
            tt_rng_seed(&rng, 1000 * w + (uint64_t)k);
            tt_state *st;
            assert_int_equal(tt_state_create(&wl->dag, &st, &err), TT_OK);
            tt_test_random_steps(st, &rng, 2 + k % 10);
            /* The step list must replay to the same state. */
            tt_state *replayed;
            s = tt_state_replay(&wl->dag, st->steps.data, st->steps.len, &replayed, &err);
            if (s)
                fail_msg("%s seed %d: replay failed: %s", workloads[w], k, err.msg);
            char *a = tt_state_print(st), *b = tt_state_print(replayed);
            assert_string_equal(a, b);
            free(a);
            free(b);
            tt_state_free(replayed);
            total++;
            for (size_t i = 0; i < st->steps.len; i++)
                kinds[st->steps.data[i].kind]++;
            tt_program *prog;
            s = tt_lower(st, &prog, &err);
            if (s == TT_OK) {
                tt_verify_result vr;
                s = tt_verify_program(&wl->dag, prog, (uint64_t)k + 1, 1e-4, 1e-5, &vr, &err);
                if (s) {
                    char *steps = tt_steps_to_json(st->steps.data, st->steps.len);
                    char *ir = tt_program_print(prog);
                    fprintf(stderr, "steps: %s\n%s\n", steps, ir);
                    fail_msg("%s seed %d: %s", workloads[w], k, err.msg);
                }
                assert_true(vr.checked > 0);
                lowered++;
                ok_here++;
                tt_program_free(prog);
            } else {
                /* Only schedules whose bound inference is impossible may fail to lower. */
                if (s != TT_ERR_LOWER)
                    fail_msg("%s seed %d: unexpected %s: %s", workloads[w], k, tt_status_name(s),
                             err.msg);
            }
            tt_state_free(st);
        }
        /* Most random schedules of every operator must lower. */
        if (ok_here < SCHEDULES_PER_WORKLOAD / 2)
            fail_msg("%s: only %d of %d random schedules lowered", workloads[w], ok_here,
                     SCHEDULES_PER_WORKLOAD);
        tt_workload_free(wl);
    }
    printf("differential: %d random schedules, %d lowered and matched; steps:", total, lowered);
    for (int k = 0; k < TT_STEP_KIND_COUNT; k++) {
        printf(" %s=%d", tt_step_code((tt_step_kind)k), kinds[k]);
        /* Every kind of step must have been exercised, or the test proves less than it says. */
        assert_true(kinds[k] > 0);
    }
    printf("\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_operator_matches_naive_definition_under_random_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
