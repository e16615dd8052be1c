/* OpenCL program binaries cached by content (cl_cache_int.h). */
#define _GNU_SOURCE
#include "cl_cache_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/hash.h"
#include "../base/io.h"

static const char MAGIC[8] = {'T', 'T', 'C', 'L', 'B', 'I', 'N', '1'};

typedef struct {
    char magic[8];
    uint64_t srclen, binlen;
} entry_header;

/* mkdir -p; true when the folder exists at the end. */
static bool make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        mkdir(path, 0700);
        *p = '/';
    }
    struct stat st;
    return (mkdir(path, 0700) == 0 || errno == EEXIST) && stat(path, &st) == 0 &&
           S_ISDIR(st.st_mode);
}

static bool cache_dir(const tt_cl_device_info *dev, char *out, size_t n)
{
    const char *env = getenv("TT_CL_CACHE");
    if (env && (!strcmp(env, "off") || !strcmp(env, "0")))
        return false;
    /* A CPU device's driver (pocl) caches its builds by source already, and handing out a binary
     * makes pocl compile every kernel once more: 4.5 s more per candidate on 2 cores. */
    if (!(env && env[0]) && !strcmp(dev->type, "cpu"))
        return false;
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int w;
    if (env && env[0])
        w = snprintf(out, n, "%s", env);
    else if (xdg && xdg[0] == '/')
        w = snprintf(out, n, "%s/tvm-tune/opencl", xdg);
    else if (home && home[0] == '/')
        w = snprintf(out, n, "%s/.cache/tvm-tune/opencl", home);
    else
        return false;
    return w > 0 && (size_t)w < n && make_dirs(out);
}

bool tt__cl_cache_open(tt__cl_cache *c, const tt_cl_device_info *dev, const char *options,
                       const char *src, size_t len)
{
    memset(c, 0, sizeof(*c));
    if (!cache_dir(dev, c->dir, sizeof(c->dir)))
        return false;
    /* Each string with its terminator, so that no two different keys run together. */
    const char *parts[] = {dev->platform_name, dev->name,   dev->vendor,
                           dev->version,       dev->driver, options};
    uint64_t h = TT_FNV64_OFFSET;
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        h = tt_hash64_update(h, parts[i], strlen(parts[i]) + 1);
    h = tt_hash64_update(h, src, len);
    char hex[17];
    tt_hash64_hex(h, hex);
    snprintf(c->file, sizeof(c->file), "%s/%s.bin", c->dir, hex);
    c->on = true;
    return true;
}

unsigned char *tt__cl_cache_get(const tt__cl_cache *c, const char *src, size_t len, size_t *n)
{
    if (!c->on)
        return NULL;
    int fd = open(c->file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    entry_header h;
    unsigned char *bin = NULL;
    char *stored = NULL;
    if (tt_read_all(fd, &h, sizeof(h)) && !memcmp(h.magic, MAGIC, sizeof(MAGIC)) &&
        h.srclen == len && h.binlen > 0 && h.binlen < (1ull << 31) &&
        (stored = malloc(len ? len : 1)) && tt_read_all(fd, stored, len) &&
        !memcmp(stored, src, len) && (bin = malloc(h.binlen)) && tt_read_all(fd, bin, h.binlen)) {
        *n = h.binlen;
        futimens(fd, NULL); /* recently used: the last to be trimmed */
    } else {
        free(bin);
        bin = NULL;
    }
    free(stored);
    close(fd);
    return bin;
}

typedef struct {
    char name[64];
    time_t mtime;
    off_t size;
} cached_file;

static int by_age(const void *a, const void *b)
{
    const cached_file *x = a, *y = b;
    return (x->mtime > y->mtime) - (x->mtime < y->mtime);
}

/* Removes the least recently used entries until the folder holds 3/4 of the limit. */
static void trim(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    cached_file *files = NULL;
    size_t nfiles = 0, cap = 0;
    long long total = 0;
    struct dirent *e;
    time_t now = time(NULL);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        struct stat old;
        /* a writer that died between open and rename */
        if (l > 4 && !strcmp(e->d_name + l - 4, ".tmp") &&
            fstatat(dirfd(d), e->d_name, &old, 0) == 0 && old.st_mtime < now - 3600)
            unlinkat(dirfd(d), e->d_name, 0);
        if (l < 5 || l >= sizeof(files[0].name) || strcmp(e->d_name + l - 4, ".bin"))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, 0))
            continue;
        if (nfiles == cap) {
            cap = cap ? 2 * cap : 256;
            cached_file *nf = realloc(files, cap * sizeof(*files));
            if (!nf)
                break;
            files = nf;
        }
        memcpy(files[nfiles].name, e->d_name, l + 1);
        files[nfiles].mtime = st.st_mtime;
        files[nfiles].size = st.st_size;
        total += st.st_size;
        nfiles++;
    }
    if (total > TT__CL_CACHE_MAX_BYTES) {
        qsort(files, nfiles, sizeof(*files), by_age);
        for (size_t i = 0; i < nfiles && total > TT__CL_CACHE_MAX_BYTES / 4 * 3; i++)
            if (unlinkat(dirfd(d), files[i].name, 0) == 0)
                total -= files[i].size;
    }
    free(files);
    closedir(d);
}

void tt__cl_cache_put(const tt__cl_cache *c, const char *src, size_t len, const unsigned char *bin,
                      size_t n)
{
    if (!c->on || n == 0)
        return;
    char tmp[sizeof(c->file) + 32];
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", c->file, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return;
    entry_header h;
    memcpy(h.magic, MAGIC, sizeof(MAGIC));
    h.srclen = len;
    h.binlen = n;
    bool ok =
        tt_write_all(fd, &h, sizeof(h)) && tt_write_all(fd, src, len) && tt_write_all(fd, bin, n);
    if (close(fd) || !ok || rename(tmp, c->file)) {
        unlink(tmp);
        return;
    }
    /* One writer in 64 looks at the folder's size: a tuning run adds hundreds of entries. */
    if ((tt_hash64(c->file, strlen(c->file)) & 63) == 0)
        trim(c->dir);
}
