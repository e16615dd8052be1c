/* .npy files (deploy/npy.h): what tvm-net reads and writes.  Round trips of every element type
 * and rank, the header forms numpy writes (versions 1.0-3.0, Python 2 'L' suffixes, '=' byte
 * order), and bad files refused with the reason: truncation at every byte, a wrong magic,
 * Fortran order, big-endian, a shape past the size limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "deploy/npy.h"

static char dir[] = "/tmp/tt-npy-XXXXXX";

static const char *path_of(const char *name)
{
    static char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

/* A file with header text h (padded as numpy does) followed by `payload`. */
static size_t make_file(unsigned char *buf, int version, const char *h, const void *payload,
                        size_t n)
{
    size_t pre = version == 1 ? 10 : 12, hl = strlen(h);
    size_t total = (pre + hl + 1 + 63) / 64 * 64;
    size_t len = total - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)version;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        buf[8 + i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + pre, h, hl);
    memset(buf + pre + hl, ' ', len - hl - 1);
    buf[total - 1] = '\n';
    memcpy(buf + total, payload, n);
    return total + n;
}

static void every_type_and_rank_round_trips(void **state)
{
    (void)state;
    tt_errbuf err = {{0}};
    const tt_dtype types[] = {TT_DT_FLOAT32, TT_DT_FLOAT64, TT_DT_INT32, TT_DT_INT64, TT_DT_BOOL};
    const int64_t dims[3][3] = {{0}, {5}, {2, 3, 4}};
    const int ranks[3] = {0, 1, 3};
    unsigned char data[24 * 8];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (unsigned char)(i * 7 + 1) & 1; /* valid bools too */
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
        for (int r = 0; r < 3; r++) {
            const char *p = path_of("rt.npy");
            assert_int_equal(tt_npy_write(p, types[t], ranks[r], dims[r], data, &err), TT_OK);
            tt_npy a;
            if (tt_npy_read(p, 0, &a, &err))
                fail_msg("%s", err.msg);
            assert_int_equal(a.dtype, types[t]);
            assert_int_equal(a.rank, ranks[r]);
            for (int d = 0; d < a.rank; d++)
                assert_int_equal(a.dims[d], dims[r][d]);
            assert_memory_equal(a.data, data,
                                (size_t)tt_npy_numel(&a) * (size_t)tt_dtype_bytes(types[t]));
            tt_npy_free(&a);
        }
}

static void numpys_header_forms_are_read(void **state)
{
    (void)state;
    tt_errbuf err = {{0}};
    unsigned char buf[512];
    float v[6] = {1, 2, 3, 4, 5, 6};
    struct {
        int version;
        const char *h;
        int rank;
    } forms[] = {
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 2},
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 1},
        {3, "{'descr': '=f4', 'fortran_order': False, 'shape': (2L, 3L), }", 2},
        {1, "{\"shape\": (3, 2), \"fortran_order\": False, \"descr\": \"<f4\"}", 2},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        size_t n = make_file(buf, forms[i].version, forms[i].h, v, sizeof(v));
        write_bytes(path_of("f.npy"), buf, n);
        tt_npy a;
        if (tt_npy_read(path_of("f.npy"), 0, &a, &err))
            fail_msg("form %zu: %s", i, err.msg);
        assert_int_equal(a.dtype, TT_DT_FLOAT32);
        assert_int_equal(a.rank, forms[i].rank);
        assert_int_equal(tt_npy_numel(&a), 6);
        assert_memory_equal(a.data, v, sizeof(v));
        tt_npy_free(&a);
    }
}

static void expect_refused(const unsigned char *buf, size_t n, tt_status want, const char *says)
{
    tt_errbuf err = {{0}};
    write_bytes(path_of("bad.npy"), buf, n);
    tt_npy a;
    tt_status s = tt_npy_read(path_of("bad.npy"), 1 << 20, &a, &err);
    if (s != want || !strstr(err.msg, says) || !strstr(err.msg, "bad.npy"))
        fail_msg("got %d '%s', wanted %d with '%s'", s, err.msg, want, says);
    assert_null(a.data);
}

static void bad_files_are_refused_with_the_reason(void **state)
{
    (void)state;
    unsigned char buf[512];
    float v[6] = {0};
    size_t n = make_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
                         sizeof(v));
    /* truncated at every byte: the magic, the header or the data */
    for (size_t cut = 0; cut < n; cut++) {
        tt_errbuf err = {{0}};
        write_bytes(path_of("cut.npy"), buf, cut);
        tt_npy a;
        tt_status s = tt_npy_read(path_of("cut.npy"), 0, &a, &err);
        if (s != TT_ERR_PARSE)
            fail_msg("cut at %zu: %d %s", cut, s, err.msg);
    }
    unsigned char copy[512];
    memcpy(copy, buf, n);
    copy[1] = 'X';
    expect_refused(copy, n, TT_ERR_PARSE, "not a .npy file");
    static const struct {
        const char *header;
        tt_status want;
        const char *says;
    } bad[] = {
        {"{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", TT_ERR_UNSUPPORTED,
         "Fortran order"},
        {"{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", TT_ERR_UNSUPPORTED,
         "'>f4'"},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }", TT_ERR_UNSUPPORTED,
         "'<f2'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", TT_ERR_PARSE,
         "malformed dimension"},
        {"{'descr': '<f4', 'fortran_order': False}", TT_ERR_PARSE,
         "no descr, fortran_order or shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (100000, 100000), }", TT_ERR_LIMIT,
         "more than"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = make_file(buf, 1, bad[i].header, v, sizeof(v));
        expect_refused(buf, n, bad[i].want, bad[i].says);
    }
    n = make_file(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", v,
                  sizeof(v));
    buf[6] = 9;
    expect_refused(buf, n, TT_ERR_UNSUPPORTED, "version 9.0");
    tt_errbuf err = {{0}};
    tt_npy a;
    assert_int_equal(tt_npy_read(path_of("missing.npy"), 0, &a, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.npy"));
    /* a write that cannot happen leaves nothing */
    int64_t d = 2;
    assert_int_equal(tt_npy_write("/nonexistent-dir/x.npy", TT_DT_FLOAT32, 1, &d, v, &err),
                     TT_ERR_IO);
}

static int setup(void **state)
{
    (void)state;
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    const char *names[] = {"rt.npy", "f.npy", "bad.npy", "cut.npy"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        remove(path_of(names[i]));
    return rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_type_and_rank_round_trips),
        cmocka_unit_test(numpys_header_forms_are_read),
        cmocka_unit_test(bad_files_are_refused_with_the_reason),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
