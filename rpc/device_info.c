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

json_t *tt_device_info_json(const tt_device_info *d)
{
    return json_pack("{s:s, s:s, s:s, s:i, s:I, s:s, s:s}", "arch", d->arch, "triple", d->triple,
                     "model", d->model, "cores", d->cores, "memory", (json_int_t)d->memory, "flags",
                     d->flags, "fingerprint", d->fingerprint);
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
