#define _GNU_SOURCE /* dladdr */
/* Object file -> shared object with LLVM's linker (ld.lld), which links for every architecture
 * LLVM targets: no cross toolchain needed.  Undefined symbols (libm, libgomp) are resolved when
 * the shared object is loaded. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdbool.h>

#include "codegen.h"

extern char **environ;

tt_status tt__codegen_link(const char *obj, const char *so, bool host, tt_errbuf *err);

/* Paths of this machine's libgomp and libm, so host kernels name them as dependencies (DT_NEEDED)
 * and load into any process.  Found through the dynamic loader, not guessed. */
static char gomp_path[4096], libm_path[4096];
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

static void find_runtime_libs(void)
{
    Dl_info info;
    void *g = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_LOCAL);
    void *sym = g ? dlsym(g, "GOMP_parallel") : NULL;
    if (sym && dladdr(sym, &info) && info.dli_fname)
        snprintf(gomp_path, sizeof(gomp_path), "%s", info.dli_fname);
    double (*e)(double) = exp;
    if (dladdr(*(void **)&e, &info) && info.dli_fname && strstr(info.dli_fname, "libm"))
        snprintf(libm_path, sizeof(libm_path), "%s", info.dli_fname);
}

/* The linker's path, found once: compile threads run concurrently. */
static char lld_path[4096];
static pthread_once_t lld_once = PTHREAD_ONCE_INIT;

static void find_lld_once(void)
{
    static const char *const names[] = {"ld.lld-14", "ld.lld"};
    const char *path = getenv("PATH");
    char candidate[4096];
    for (size_t i = 0; i < 2; i++) {
        const char *p = path ? path : "/usr/bin:/bin";
        while (*p) {
            size_t n = strcspn(p, ":");
            snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)n, p, names[i]);
            if (access(candidate, X_OK) == 0) {
                memcpy(lld_path, candidate, sizeof(lld_path));
                return;
            }
            p += n + (p[n] == ':');
        }
    }
}

static const char *find_lld(void)
{
    pthread_once(&lld_once, find_lld_once);
    return lld_path[0] ? lld_path : NULL;
}

tt_status tt__codegen_link(const char *obj, const char *so, bool host, tt_errbuf *err)
{
    if (host)
        pthread_once(&libs_once, find_runtime_libs);
    const char *lld = find_lld();
    if (!lld)
        return tt_err(err, TT_ERR_IO, "ld.lld not found (install lld-14: scripts/install-deps.sh)");
    int pipefd[2];
    if (pipe(pipefd))
        return tt_err(err, TT_ERR_IO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    char *argv[10] = {(char *)lld, "-shared", "--hash-style=gnu", "-o", (char *)so, (char *)obj};
    int argc = 6;
    if (host && gomp_path[0])
        argv[argc++] = gomp_path;
    if (host && libm_path[0])
        argv[argc++] = libm_path;
    argv[argc] = NULL;
    pid_t pid;
    int rc = posix_spawn(&pid, lld, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    char out[1024];
    size_t len = 0;
    ssize_t n;
    while ((n = read(pipefd[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = 0;
    close(pipefd[0]);
    if (rc != 0)
        return tt_err(err, TT_ERR_IO, "cannot run %s: %s", lld, strerror(rc));
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tt_err(err, TT_ERR_IO, "linking %s failed: %s", so, out[0] ? out : "ld.lld failed");
    return TT_OK;
}
