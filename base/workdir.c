#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/workdir.h"

static const char *tmp_base(void)
{
    const char *base = getenv("TMPDIR");
    return base && base[0] ? base : "/tmp";
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void tt_workdir_remove(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The PID of an entry named NAME-PID-SUFFIX or NAME-PID, or 0 when the name is not of that form. */
static pid_t owner_of(const char *entry, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(entry, name, n) || entry[n] != '-')
        return 0;
    const char *p = entry + n + 1;
    long pid = 0;
    while (*p >= '0' && *p <= '9' && pid < (1L << 30))
        pid = pid * 10 + (*p++ - '0');
    return (*p == '-' || !*p) && p != entry + n + 1 ? (pid_t)pid : 0;
}

int tt_workdir_sweep(const char *name, double stale_s)
{
    const char *base = tmp_base();
    DIR *d = opendir(base);
    if (!d)
        return 0;
    int removed = 0;
    /* CLOCK_REALTIME, as the file times are written: time() reads the coarse clock, up to a tick
     * behind, so a directory stamped just after a second began could look a second younger than
     * it is (test_base's sweep with no age required found nothing, under ASan in CI) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    time_t now = ts.tv_sec;
    struct dirent *e;
    while ((e = readdir(d))) {
        pid_t pid = owner_of(e->d_name, name);
        if (pid <= 0 || pid == getpid())
            continue;
        char path[4096];
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", base, e->d_name);
        if (lstat(path, &sb) || !S_ISDIR(sb.st_mode) || sb.st_uid != getuid() ||
            difftime(now, sb.st_mtime) < stale_s)
            continue;
        if (kill(pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to signal: kept */
        tt_workdir_remove(path);
        removed++;
    }
    closedir(d);
    return removed;
}

tt_status tt_workdir_create(const char *name, char *dir, size_t size, tt_errbuf *err)
{
    tt_workdir_sweep(name, TT_WORKDIR_STALE_S);
    int n = snprintf(dir, size, "%s/%s-%d-XXXXXX", tmp_base(), name, (int)getpid());
    if (n < 0 || (size_t)n >= size) {
        if (size)
            dir[0] = 0;
        return tt_err(err, TT_ERR_INVALID_ARG, "the temporary directory's path is too long: %s",
                      tmp_base());
    }
    if (!mkdtemp(dir)) {
        int e = errno;
        dir[0] = 0;
        return tt_err(err, TT_ERR_IO, "cannot create a work directory in %s: %s", tmp_base(),
                      strerror(e));
    }
    return TT_OK;
}
