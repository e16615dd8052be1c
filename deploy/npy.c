/* .npy files (npy.h): the format is a magic, a version, a Python dict literal giving descr,
 * fortran_order and shape, padded to 64 bytes, then the raw elements. */
#define _GNU_SOURCE
#include "npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char MAGIC[] = "\x93NUMPY";

static const struct {
    const char *descr;
    tt_dtype dtype;
} DESCRS[] = {{"<f4", TT_DT_FLOAT32},
              {"<f8", TT_DT_FLOAT64},
              {"<i4", TT_DT_INT32},
              {"<i8", TT_DT_INT64},
              {"|b1", TT_DT_BOOL}};

int64_t tt_npy_numel(const tt_npy *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->rank; d++)
        n *= a->dims[d];
    return n;
}

void tt_npy_free(tt_npy *a)
{
    free(a->data);
    a->data = NULL;
}

/* The text after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    char quoted[32];
    for (int q = 0; q < 2; q++) {
        snprintf(quoted, sizeof(quoted), q ? "\"%s\"" : "'%s'", key);
        const char *p = strstr(h, quoted);
        if (!p)
            continue;
        p += strlen(quoted);
        while (*p == ' ')
            p++;
        if (*p != ':')
            return NULL;
        p++;
        while (*p == ' ')
            p++;
        return p;
    }
    return NULL;
}

static tt_status parse_header(const char *path, const char *h, tt_npy *out, tt_errbuf *err)
{
    const char *d = dict_value(h, "descr"), *f = dict_value(h, "fortran_order"),
               *s = dict_value(h, "shape");
    if (!d || !f || !s || (*d != '\'' && *d != '"'))
        return tt_err(err, TT_ERR_PARSE,
                      "%s: the header has no descr, fortran_order or shape: %.120s", path, h);
    char descr[16];
    size_t n = strcspn(d + 1, "'\"");
    snprintf(descr, sizeof(descr), "%.*s", (int)(n < 15 ? n : 15), d + 1);
    if (descr[0] == '=')
        descr[0] = '<'; /* native: this machine is little-endian */
    if (!strcmp(descr, "<b1") || !strcmp(descr, "=b1"))
        snprintf(descr, sizeof(descr), "|b1");
    size_t i = 0;
    while (i < sizeof(DESCRS) / sizeof(DESCRS[0]) && strcmp(DESCRS[i].descr, descr))
        i++;
    if (i == sizeof(DESCRS) / sizeof(DESCRS[0]))
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: element type '%s' (float32 '<f4', float64 '<f8', int32 '<i4', int64 "
                      "'<i8' and bool '|b1' are read; big-endian is not)",
                      path, descr);
    out->dtype = DESCRS[i].dtype;
    if (!strncmp(f, "True", 4))
        return tt_err(err, TT_ERR_UNSUPPORTED,
                      "%s: Fortran order (np.ascontiguousarray makes the C-order array tvm-net "
                      "reads)",
                      path);
    if (strncmp(f, "False", 5))
        return tt_err(err, TT_ERR_PARSE, "%s: fortran_order is neither True nor False", path);
    if (*s != '(')
        return tt_err(err, TT_ERR_PARSE, "%s: shape is not a tuple", path);
    s++;
    out->rank = 0;
    for (;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        char *end;
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (end == s || errno || v < 0)
            return tt_err(err, TT_ERR_PARSE, "%s: shape has a malformed dimension at '%.20s'", path,
                          s);
        if (out->rank == TT_NPY_MAX_RANK)
            return tt_err(err, TT_ERR_UNSUPPORTED, "%s: more than %d dimensions", path,
                          TT_NPY_MAX_RANK);
        out->dims[out->rank++] = v;
        s = end;
        while (*s == ' ' || *s == 'L')
            s++;
        if (*s != ',' && *s != ')')
            return tt_err(err, TT_ERR_PARSE, "%s: shape has a malformed dimension at '%.20s'", path,
                          s);
    }
    return TT_OK;
}

tt_status tt_npy_read(const char *path, int64_t max_bytes, tt_npy *out, tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    if (max_bytes <= 0)
        max_bytes = (int64_t)4 << 30;
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return tt_err(err, TT_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    unsigned char pre[12];
    tt_status s = TT_OK;
    char *h = NULL;
    size_t got = fread(pre, 1, 10, fp);
    if (got < 10 || memcmp(pre, MAGIC, 6))
        s = tt_err(err, TT_ERR_PARSE, "%s is not a .npy file (no \\x93NUMPY magic)", path);
    uint32_t hlen = 0;
    long data_at = 0;
    if (!s && pre[6] == 1) {
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
        data_at = 10;
    } else if (!s && (pre[6] == 2 || pre[6] == 3)) {
        if (fread(pre + 10, 1, 2, fp) != 2)
            s = tt_err(err, TT_ERR_PARSE, "%s: truncated in the header length", path);
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8 | (uint32_t)pre[10] << 16 |
               (uint32_t)pre[11] << 24;
        data_at = 12;
    } else if (!s)
        s = tt_err(err, TT_ERR_UNSUPPORTED, "%s: .npy format version %d.%d (1.0 to 3.0 are read)",
                   path, pre[6], pre[7]);
    if (!s && hlen > 65536)
        s = tt_err(err, TT_ERR_PARSE, "%s: a header of %u bytes (at most 65536)", path, hlen);
    if (!s && !(h = malloc(hlen + 1)))
        s = tt_err(err, TT_ERR_NOMEM, "out of memory");
    if (!s && fread(h, 1, hlen, fp) != hlen)
        s = tt_err(err, TT_ERR_PARSE, "%s: truncated in the header (%u bytes at offset %ld)", path,
                   hlen, data_at);
    if (!s) {
        h[hlen] = 0;
        s = parse_header(path, h, out, err);
    }
    if (!s) {
        int64_t n = tt_npy_numel(out), eb = tt_dtype_bytes(out->dtype);
        if (n > max_bytes / eb)
            s = tt_err(err, TT_ERR_LIMIT, "%s: %lld elements, more than the %lld bytes allowed",
                       path, (long long)n, (long long)max_bytes);
        else if (!(out->data = malloc((size_t)(n * eb) + 1)))
            s = tt_err(err, TT_ERR_NOMEM, "out of memory (%s: %lld bytes)", path,
                       (long long)(n * eb));
        else {
            size_t r = fread(out->data, 1, (size_t)(n * eb), fp);
            if (r != (size_t)(n * eb))
                s = tt_err(err, TT_ERR_PARSE,
                           "%s: truncated: the shape needs %lld bytes of data at offset %ld, "
                           "the file has %zu",
                           path, (long long)(n * eb), data_at + (long)hlen, r);
        }
    }
    free(h);
    fclose(fp);
    if (s)
        tt_npy_free(out);
    return s;
}

tt_status tt_npy_write(const char *path, tt_dtype dtype, int rank, const int64_t *dims,
                       const void *data, tt_errbuf *err)
{
    const char *descr = NULL;
    for (size_t i = 0; i < sizeof(DESCRS) / sizeof(DESCRS[0]); i++)
        if (DESCRS[i].dtype == dtype)
            descr = DESCRS[i].descr;
    if (!descr || rank < 0 || rank > TT_NPY_MAX_RANK)
        return tt_err(err, TT_ERR_INVALID_ARG, "%s: no .npy form for this array", path);
    char h[1024];
    int len = snprintf(h, sizeof(h), "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    int64_t n = 1;
    for (int d = 0; d < rank; d++) {
        len += snprintf(h + len, sizeof(h) - (size_t)len, "%lld,%s", (long long)dims[d],
                        d + 1 < rank ? " " : "");
        n *= dims[d];
    }
    if (rank > 1) /* (2, 3) is written without the trailing comma; (5,) keeps it */
        len--;
    len += snprintf(h + len, sizeof(h) - (size_t)len, "), }");
    /* pad with spaces so that magic + version + length + header is a multiple of 64 */
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    memset(h + len, ' ', (size_t)pad);
    len += pad;
    h[len++] = '\n';
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp-XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return tt_err(err, TT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    fchmod(fd, 0644);
    FILE *fp = fdopen(fd, "wb");
    unsigned char pre[10] = {0x93,
                             'N',
                             'U',
                             'M',
                             'P',
                             'Y',
                             1,
                             0,
                             (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    size_t bytes = (size_t)n * (size_t)tt_dtype_bytes(dtype);
    bool ok = fp && fwrite(pre, 1, 10, fp) == 10 && fwrite(h, 1, (size_t)len, fp) == (size_t)len &&
              (bytes == 0 || fwrite(data, 1, bytes, fp) == bytes);
    if (fp ? fclose(fp) : close(fd))
        ok = false;
    if (ok && rename(tmp, path))
        ok = false;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        return tt_err(err, TT_ERR_IO, "cannot write %s: %s", path, strerror(e));
    }
    return TT_OK;
}
