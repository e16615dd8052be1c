/* A job's parameters as the tracker checks and completes them (tt_jobs_check_params): what a
 * job leaves out of "measure" is what tvm-tune run uses on its target, and bad values are
 * refused with the field named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "tracker/jobs.h"

static json_t *checked(const char *params, tt_status want, const char *fragment)
{
    json_t *in = json_loads(params, 0, NULL), *out = NULL;
    assert_non_null(in);
    tt_errbuf err = {{0}};
    tt_status s = tt_jobs_check_params(in, &out, &err);
    json_decref(in);
    if (s != want)
        fail_msg("%s: expected %s, got %s (%s)", params, tt_status_name(want), tt_status_name(s),
                 err.msg);
    if (fragment && !strstr(err.msg, fragment))
        fail_msg("%s: '%s' lacks '%s'", params, err.msg, fragment);
    return out;
}

static double measure_field(const json_t *p, const char *k)
{
    const json_t *v = json_object_get(json_object_get(p, "measure"), k);
    assert_true(json_is_number(v));
    return json_number_value(v);
}

static void a_cpu_job_measures_single_calls_by_default(void **state)
{
    json_t *p =
        checked("{\"workloads\": [\"matmul:M=64,N=64,K=64\"], \"key\": \"cpu\"}", TT_OK, NULL);
    assert_true(measure_field(p, "number") == 1);
    assert_true(measure_field(p, "repeat") == 64);
    assert_true(measure_field(p, "min_repeat_ms") == 0.01);
    assert_true(measure_field(p, "repeat_budget_ms") == 100);
    json_decref(p);
}

static void an_opencl_job_keeps_samples_of_20_ms(void **state)
{
    json_t *p = checked("{\"workloads\": [\"matmul:M=64,N=64,K=64\"], \"key\": \"gpu\", "
                        "\"target\": \"opencl\"}",
                        TT_OK, NULL);
    assert_true(measure_field(p, "repeat") == 5);
    assert_true(measure_field(p, "min_repeat_ms") == 20);
    assert_true(measure_field(p, "repeat_budget_ms") == 0);
    json_decref(p);
}

static void given_measurement_values_are_kept_or_refused(void **state)
{
    json_t *p = checked("{\"workloads\": [\"matmul:M=64,N=64,K=64\"], \"key\": \"cpu\", "
                        "\"measure\": {\"repeat\": 5, \"min_repeat_ms\": 20, "
                        "\"repeat_budget_ms\": 0}}",
                        TT_OK, NULL);
    assert_true(measure_field(p, "repeat") == 5);
    assert_true(measure_field(p, "min_repeat_ms") == 20);
    assert_true(measure_field(p, "repeat_budget_ms") == 0);
    json_decref(p);
    assert_null(checked("{\"workloads\": [\"matmul:M=64,N=64,K=64\"], \"key\": \"cpu\", "
                        "\"measure\": {\"repeat_budget_ms\": -1}}",
                        TT_ERR_INVALID_ARG, "\"repeat_budget_ms\" is -1"));
    assert_null(checked("{\"workloads\": [\"matmul:M=64,N=64,K=64\"], \"key\": \"cpu\", "
                        "\"measure\": {\"repeat\": 65}}",
                        TT_ERR_INVALID_ARG, "\"repeat\" is 65"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_cpu_job_measures_single_calls_by_default),
        cmocka_unit_test(an_opencl_job_keeps_samples_of_20_ms),
        cmocka_unit_test(given_measurement_values_are_kept_or_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
