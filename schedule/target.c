#include "target.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const kinds[] = {"llvm", "c", "opencl", "cuda", "rocm", "vulkan", "metal"};

static tt_status set_field(char *dst, size_t cap, const char *v, size_t len, const char *opt,
                           tt_errbuf *err)
{
    if (len >= cap)
        return tt_err(err, TT_ERR_PARSE, "target option -%s: value longer than %zu bytes", opt,
                      cap - 1);
    memcpy(dst, v, len);
    dst[len] = 0;
    return TT_OK;
}

/* A positive integer option's value (at most 1000000), or TT_ERR_PARSE naming the option. */
static tt_status set_positive(int *dst, const char *v, size_t len, const char *opt, tt_errbuf *err)
{
    int n = 0;
    for (size_t i = 0; i < len; i++) {
        if (v[i] < '0' || v[i] > '9' || n > 1000000)
            return tt_err(err, TT_ERR_PARSE, "target: -%s needs a positive integer", opt);
        n = n * 10 + (v[i] - '0');
    }
    if (n <= 0)
        return tt_err(err, TT_ERR_PARSE, "target: -%s needs a positive integer", opt);
    *dst = n;
    return TT_OK;
}

/* TVM's target options that we accept and do not use (its target kinds' attributes and the
 * common ones of its target strings), so that a target copied from TVM parses as it is. */
static bool tvm_option(const char *name)
{
    static const char names[] =
        " libs opt-level link-params tag host system-lib runtime executor interface-api"
        " unpacked-api mabi mfloat-abi fast-math fast-math-nnan fast-math-ninf fast-math-nsz"
        " fast-math-arcp fast-math-contract fast-math-reassoc jit vector-width from_device arch"
        " max_threads_per_block texture_spatial_limit max_function_args registers_per_block"
        " max_local_memory_per_block supports_float16 supports_int8 supports_16bit_buffer"
        " supports_storage_buffer_storage_class supports_push_descriptor"
        " supports_dedicated_allocation code-model max_block_size_x max_block_size_y"
        " l2_cache_size_bytes ";
    size_t n = strlen(name);
    for (const char *p = n ? strstr(names, name) : NULL; p; p = strstr(p + 1, name))
        if (p[-1] == ' ' && p[n] == ' ')
            return true;
    return false;
}

static tt_status parse(const char *text, tt_target *t, bool strict, tt_errbuf *err);

tt_status tt_target_parse(const char *text, tt_target *t, tt_errbuf *err)
{
    return parse(text, t, false, err);
}

tt_status tt_target_parse_user(const char *text, tt_target *t, tt_errbuf *err)
{
    return parse(text, t, true, err);
}

static tt_status parse(const char *text, tt_target *t, bool strict, tt_errbuf *err)
{
    memset(t, 0, sizeof(*t));
    const char *s = text;
    while (*s == ' ')
        s++;
    size_t klen = strcspn(s, " ");
    if (klen == 0)
        return tt_err(err, TT_ERR_PARSE, "empty target");
    bool known = false;
    for (size_t i = 0; i < TT_ARRAY_LEN(kinds); i++)
        known |= strlen(kinds[i]) == klen && memcmp(kinds[i], s, klen) == 0;
    if (!known)
        return tt_err(err, TT_ERR_PARSE,
                      "unknown target kind '%.*s' (llvm, c, opencl, cuda, rocm, vulkan, metal)",
                      (int)klen, s);
    memcpy(t->kind, s, klen);
    s += klen;
    for (;;) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        size_t col = (size_t)(s - text) + 1;
        if (*s != '-')
            return tt_err(err, TT_ERR_PARSE, "target column %zu: expected an option '-name=value'",
                          col);
        s++;
        size_t len = strcspn(s, " ");
        const char *eq = memchr(s, '=', len);
        size_t nlen = eq ? (size_t)(eq - s) : len;
        const char *v = eq ? eq + 1 : "";
        size_t vlen = eq ? len - nlen - 1 : 0;
        char name[32];
        if (nlen == 0 || nlen >= sizeof(name))
            return tt_err(err, TT_ERR_PARSE, "target column %zu: bad option name", col);
        memcpy(name, s, nlen);
        name[nlen] = 0;
        tt_status st = TT_OK;
        if (!strcmp(name, "mtriple") || !strcmp(name, "target"))
            st = set_field(t->triple, sizeof(t->triple), v, vlen, name, err);
        else if (!strcmp(name, "mcpu"))
            st = set_field(t->cpu, sizeof(t->cpu), v, vlen, name, err);
        else if (!strcmp(name, "mattr"))
            st = set_field(t->attrs, sizeof(t->attrs), v, vlen, name, err);
        else if (!strcmp(name, "keys"))
            st = set_field(t->keys, sizeof(t->keys), v, vlen, name, err);
        else if (!strcmp(name, "model"))
            st = set_field(t->model, sizeof(t->model), v, vlen, name, err);
        else if (!strcmp(name, "device"))
            st = set_field(t->device, sizeof(t->device), v, vlen, name, err);
        else if (!strcmp(name, "num-cores"))
            st = set_positive(&t->num_cores, v, vlen, name, err);
        else if (!strcmp(name, "max_num_threads"))
            st = set_positive(&t->max_num_threads, v, vlen, name, err);
        else if (!strcmp(name, "thread_warp_size"))
            st = set_positive(&t->thread_warp_size, v, vlen, name, err);
        else if (!strcmp(name, "max_shared_memory_per_block"))
            st = set_positive(&t->max_shared_memory_per_block, v, vlen, name, err);
        else if (strict && !tvm_option(name))
            st = tt_err(err, TT_ERR_PARSE,
                        "target column %zu: unknown option '-%s' (ours: -mtriple, -mcpu, -mattr, "
                        "-num-cores, -keys, -model, -device, -max_num_threads, -thread_warp_size, "
                        "-max_shared_memory_per_block; TVM's others are accepted and ignored)",
                        col, name);
        if (st)
            return st;
        s += len;
    }
    return TT_OK;
}

void tt_target_family(const tt_target *t, char *out, size_t n)
{
    if (!strcmp(t->kind, "llvm") || !strcmp(t->kind, "c")) {
        char arch[64] = "host";
        if (t->triple[0]) {
            size_t a = strcspn(t->triple, "-");
            snprintf(arch, sizeof(arch), "%.*s", (int)a, t->triple);
        }
        snprintf(out, n, "%s:%s", t->kind, arch);
        return;
    }
    snprintf(out, n, "%s:%s", t->kind, t->device[0] ? t->device : "gpu");
}

bool tt_target_fast_local_memory(const tt_target *t)
{
    return strcmp(t->device, "mali") != 0;
}

/* Applies a feature list ("+a,-b,...") to the flags it names; later entries win. */
static void apply_features(const char *list, bool *avx512, bool *avx2, bool *avx, bool *fma)
{
    static const char *const names[] = {"avx512f", "avx2", "avx", "fma"};
    bool *flags[] = {avx512, avx2, avx, fma};
    const char *s = list;
    while (s && *s) {
        size_t len = strcspn(s, ",");
        if (len > 1 && (s[0] == '+' || s[0] == '-'))
            for (size_t i = 0; i < TT_ARRAY_LEN(names); i++)
                if (strlen(names[i]) == len - 1 && !memcmp(names[i], s + 1, len - 1))
                    *flags[i] = s[0] == '+';
        s += len + (s[len] == ',');
    }
}

static void set_isa(tt_vector_isa *o, const char *name, int bytes, int regs, bool fma)
{
    snprintf(o->name, sizeof(o->name), "%s", name);
    o->vector_bytes = bytes;
    o->vector_regs = regs;
    o->fma = fma;
}

void tt_target_vector_isa(const tt_target *t, const char *host_features, tt_vector_isa *out)
{
    const char *triple = t->triple;
    bool host = !triple[0];
    if (!host && (!strncmp(triple, "aarch64", 7) || !strncmp(triple, "arm64", 5))) {
        set_isa(out, "neon", 16, 32, true);
        return;
    }
    if (!host && strncmp(triple, "x86_64", 6)) {
        set_isa(out, "scalar", 4, 16, false); /* other architectures: no vector model yet */
        return;
    }
    bool avx512 = false, avx2 = false, avx = false, fma = false;
    if (host) {
        apply_features(host_features, &avx512, &avx2, &avx, &fma);
    } else if (t->cpu[0]) {
        /* x86 CPUs by name: the AVX-512 families, then the AVX2 ones. */
        static const char *const with512[] = {"avx512",     "cascadelake", "cooperlake",
                                              "icelake",    "tigerlake",   "sapphirerapids",
                                              "rocketlake", "znver4",      "x86-64-v4"};
        static const char *const with2[] = {"haswell", "broadwell", "skylake",   "alderlake",
                                            "znver",   "x86-64-v3", "raptorlake"};
        for (size_t i = 0; i < TT_ARRAY_LEN(with512); i++)
            avx512 |= strstr(t->cpu, with512[i]) != NULL;
        for (size_t i = 0; i < TT_ARRAY_LEN(with2); i++)
            avx2 |= strstr(t->cpu, with2[i]) != NULL;
        avx2 |= avx512;
        fma = avx = avx2;
    }
    apply_features(t->attrs, &avx512, &avx2, &avx, &fma);
    if (avx512)
        set_isa(out, "avx512", 64, 32, true);
    else if (avx2)
        set_isa(out, "avx2", 32, 16, fma);
    else if (avx)
        set_isa(out, "avx", 32, 16, fma);
    else
        set_isa(out, "sse", 16, 16, fma);
}

void tt_cpu_caches_typical(tt_cpu_caches *out)
{
    out->l1d_bytes = 32 << 10;
    out->l2_bytes = 1 << 20;
}

/* The size of cache `level` ("Data" or "Unified" type) of cpu0 from sysfs ("48K"), 0 if absent. */
static int64_t sysfs_cache(int level)
{
    for (int i = 0; i < 8; i++) {
        char path[96], text[32];
        int64_t got = 0;
        bool match = false;
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            return 0;
        match = fscanf(f, "%31s", text) == 1 && atoi(text) == level;
        fclose(f);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if (match && (f = fopen(path, "r"))) {
            match = fscanf(f, "%31s", text) == 1 && strcmp(text, "Instruction") != 0;
            fclose(f);
        }
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (match && (f = fopen(path, "r"))) {
            char unit = 0;
            long long v = 0;
            int n = fscanf(f, "%lld%c", &v, &unit);
            fclose(f);
            got = n >= 1 ? v << (unit == 'K' ? 10 : unit == 'M' ? 20 : 0) : 0;
        }
        if (got > 0)
            return got;
    }
    return 0;
}

void tt_cpu_caches_host(tt_cpu_caches *out)
{
    tt_cpu_caches_typical(out);
    int64_t l1 = 0, l2 = 0;
#if defined(_SC_LEVEL1_DCACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE);
    l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    if (l1 <= 0)
        l1 = sysfs_cache(1);
    if (l2 <= 0)
        l2 = sysfs_cache(2);
    /* Implausible readings (a hypervisor's zeros or garbage) keep the typical size. */
    if (l1 >= (4 << 10) && l1 <= (4 << 20))
        out->l1d_bytes = l1;
    if (l2 >= (64 << 10) && l2 <= (256 << 20))
        out->l2_bytes = l2;
}
