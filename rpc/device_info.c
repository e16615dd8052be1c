#include "device_info.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH "x86_64"
#elif defined(__aarch64__)
#define ARCH "aarch64"
#elif defined(__arm__)
#define ARCH "arm"
#elif defined(__riscv) && __riscv_xlen == 64
#define ARCH "riscv64"
#else
#define ARCH "unknown"
#endif

static void value_of(const char *line, char *out, size_t n)
{
    const char *c = strchr(line, ':');
    if (!c)
        return;
    c++;
    while (*c == ' ' || *c == '\t')
        c++;
    snprintf(out, n, "%s", c);
    out[strcspn(out, "\n")] = 0;
}

void tt_device_probe(tt_device_info *d)
{
    memset(d, 0, sizeof(*d));
    d->opencl_selected = -1;
    snprintf(d->arch, sizeof(d->arch), "%s", ARCH);
    snprintf(d->triple, sizeof(d->triple), "%s-unknown-linux-gnu", ARCH);
    snprintf(d->model, sizeof(d->model), "unknown-cpu");
    char part[64] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    bool have_model = false, have_flags = false;
    while (f && fgets(line, sizeof(line), f)) {
        if (!have_model && (!strncmp(line, "model name", 10) || !strncmp(line, "Model\t", 6))) {
            value_of(line, d->model, sizeof(d->model));
            have_model = true;
        } else if (!part[0] && !strncmp(line, "CPU part", 8)) {
            value_of(line, part, sizeof(part));
        } else if (!have_flags && (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8))) {
            value_of(line, d->flags, sizeof(d->flags));
            have_flags = true;
        }
    }
    if (f)
        fclose(f);
    if (!have_model && part[0])
        snprintf(d->model, sizeof(d->model), "%s CPU part %s", d->arch, part);
    tt_hash64_hex(tt_hash64_str(d->flags), d->flags_hash);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d->cores = cores > 0 ? (int)cores : 1;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    d->memory = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    snprintf(d->fingerprint, sizeof(d->fingerprint), "%s|%dc|%.0fG|%s|%.8s", d->model, d->cores,
             (double)d->memory / (1 << 30), d->arch, d->flags_hash);
}

void tt_cl_fingerprint(const tt_cl_device_info *c, char *out, size_t n)
{
    snprintf(out, n, "%s|%s|%s|%dcu|%.0fG", c->name, c->vendor, c->driver, c->compute_units,
             (double)c->global_mem / (1 << 30));
}

tt_status tt_device_probe_opencl(tt_device_info *d, const char *spec, tt_errbuf *err)
{
    tt_cl_device_info all[TT_CL_MAX_DEVICES];
    int n = 0;
    d->nopencl = 0;
    d->opencl_selected = -1;
    d->opencl_fingerprint[0] = 0;
    tt_status s = tt_cl_probe(all, TT_CL_MAX_DEVICES, &n, err);
    if (s)
        return s;
    if (n == 0 && (!spec || !spec[0]))
        return TT_OK;
    int k = tt_cl_select(all, n, spec, err);
    if (k < 0)
        return TT_ERR_NOT_FOUND;
    /* Keep the selected device and the first others. */
    d->opencl[d->nopencl++] = all[k];
    d->opencl_selected = 0;
    for (int i = 0; i < n && d->nopencl < TT_DEVICE_MAX_OPENCL; i++)
        if (i != k)
            d->opencl[d->nopencl++] = all[i];
    tt_cl_fingerprint(&all[k], d->opencl_fingerprint, sizeof(d->opencl_fingerprint));
    return TT_OK;
}

json_t *tt_device_info_json(const tt_device_info *d)
{
    json_t *j = json_pack("{s:s, s:s, s:s, s:i, s:I, s:s, s:s}", "arch", d->arch, "triple",
                          d->triple, "model", d->model, "cores", d->cores, "memory",
                          (json_int_t)d->memory, "flags", d->flags, "fingerprint", d->fingerprint);
    if (!j || d->nopencl == 0)
        return j;
    json_t *arr = json_array();
    for (int i = 0; i < d->nopencl; i++) {
        const tt_cl_device_info *c = &d->opencl[i];
        json_array_append_new(
            arr,
            json_pack("{s:i, s:i, s:s, s:s, s:s, s:s, s:s, s:i, s:I, s:[I,I,I], s:I, s:I, "
                      "s:b, s:i, s:b}",
                      "platform", c->platform, "device", c->device, "name", c->name, "vendor",
                      c->vendor, "version", c->version, "driver", c->driver, "type", c->type,
                      "compute_units", c->compute_units, "max_work_group",
                      (json_int_t)c->max_work_group, "max_work_item", (json_int_t)c->max_item[0],
                      (json_int_t)c->max_item[1], (json_int_t)c->max_item[2], "local_mem",
                      (json_int_t)c->local_mem, "global_mem", (json_int_t)c->global_mem, "fp64",
                      c->fp64, "warp", c->warp, "selected", i == d->opencl_selected));
    }
    json_object_set_new(j, "opencl", arr);
    json_object_set_new(j, "opencl_fingerprint", json_string(d->opencl_fingerprint));
    return j;
}

static void copy_str(const json_t *o, const char *key, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (s)
        snprintf(out, n, "%s", s);
}

static int64_t get_int(const json_t *o, const char *key)
{
    return (int64_t)json_integer_value(json_object_get(o, key));
}

void tt_device_info_from_json(const json_t *j, tt_device_info *d)
{
    memset(d, 0, sizeof(*d));
    d->opencl_selected = -1;
    if (!json_is_object(j))
        return;
    copy_str(j, "arch", d->arch, sizeof(d->arch));
    copy_str(j, "triple", d->triple, sizeof(d->triple));
    copy_str(j, "model", d->model, sizeof(d->model));
    copy_str(j, "fingerprint", d->fingerprint, sizeof(d->fingerprint));
    copy_str(j, "flags", d->flags, sizeof(d->flags));
    copy_str(j, "opencl_fingerprint", d->opencl_fingerprint, sizeof(d->opencl_fingerprint));
    d->cores = (int)get_int(j, "cores");
    d->memory = get_int(j, "memory");
    const json_t *arr = json_object_get(j, "opencl");
    for (size_t i = 0;
         json_is_array(arr) && i < json_array_size(arr) && d->nopencl < TT_DEVICE_MAX_OPENCL; i++) {
        const json_t *o = json_array_get(arr, i);
        if (!json_is_object(o))
            continue;
        tt_cl_device_info *c = &d->opencl[d->nopencl];
        memset(c, 0, sizeof(*c));
        c->platform = (int)get_int(o, "platform");
        c->device = (int)get_int(o, "device");
        copy_str(o, "name", c->name, sizeof(c->name));
        copy_str(o, "vendor", c->vendor, sizeof(c->vendor));
        copy_str(o, "version", c->version, sizeof(c->version));
        copy_str(o, "driver", c->driver, sizeof(c->driver));
        copy_str(o, "type", c->type, sizeof(c->type));
        c->compute_units = (int)get_int(o, "compute_units");
        c->max_work_group = get_int(o, "max_work_group");
        const json_t *mi = json_object_get(o, "max_work_item");
        for (size_t k = 0; k < 3; k++)
            c->max_item[k] = (int64_t)json_integer_value(json_array_get(mi, k));
        c->local_mem = get_int(o, "local_mem");
        c->global_mem = get_int(o, "global_mem");
        c->fp64 = json_is_true(json_object_get(o, "fp64"));
        int64_t warp = get_int(o, "warp"); /* absent from older servers: 0 */
        c->warp = warp > 0 && warp <= 1024 ? (int)warp : 0;
        if (json_is_true(json_object_get(o, "selected")))
            d->opencl_selected = d->nopencl;
        d->nopencl++;
    }
}

void tt_triple_arch(const char *triple, char *out, size_t n)
{
    size_t len = strcspn(triple ? triple : "", "-");
    snprintf(out, n, "%.*s", (int)len, triple ? triple : "");
    if (!strcmp(out, "arm64"))
        snprintf(out, n, "aarch64");
    else if (!strcmp(out, "amd64"))
        snprintf(out, n, "x86_64");
}
