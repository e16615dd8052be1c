#define _GNU_SOURCE /* dladdr */
/* Objects -> shared object with LLVM's linker (ld.lld), and -> static library with llvm-ar, which
 * handle every architecture LLVM targets: no cross toolchain needed.  Undefined symbols (libm,
 * a cross kernel's libgomp) are resolved when the shared object is loaded. */
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

/* The path of this machine's libm, so host kernels name it as a dependency (DT_NEEDED) and load
 * into any process.  Found through the dynamic loader, not guessed. */
static char libm_path[4096];
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;

/* The kernels' thread pool, compiled for this machine (cmake/embed_binary.cmake). */
extern const unsigned char tt__pool_object[];
extern const unsigned long tt__pool_object_size;

tt_status tt_codegen_write_pool_object(const char *path, tt_errbuf *err)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return tt_err(err, TT_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    bool ok = fwrite(tt__pool_object, 1, tt__pool_object_size, f) == tt__pool_object_size;
    if (fclose(f) || !ok) {
        remove(path);
        return tt_err(err, TT_ERR_IO, "cannot write %s", path);
    }
    return TT_OK;
}

static void find_runtime_libs(void)
{
    Dl_info info;
    double (*e)(double) = exp;
    if (dladdr(*(void **)&e, &info) && info.dli_fname && strstr(info.dli_fname, "libm"))
        snprintf(libm_path, sizeof(libm_path), "%s", info.dli_fname);
}

bool tt_codegen_find_tool(const char *const *names, int nnames, char *out, size_t n)
{
    const char *path = getenv("PATH");
    char candidate[4096];
    for (int i = 0; i < nnames; i++) {
        const char *p = path ? path : "/usr/bin:/bin";
        while (*p) {
            size_t len = strcspn(p, ":");
            snprintf(candidate, sizeof(candidate), "%.*s/%s", (int)len, p, names[i]);
            if (access(candidate, X_OK) == 0) {
                snprintf(out, n, "%s", candidate);
                return true;
            }
            p += len + (p[len] == ':');
        }
    }
    return false;
}

/* The tools' paths, found once: compile threads run concurrently. */
static char lld_path[4096], ar_path[4096];
static pthread_once_t tools_once = PTHREAD_ONCE_INIT;

static void find_tools_once(void)
{
    static const char *const lld[] = {"ld.lld-14", "ld.lld"}, *const ar[] = {"llvm-ar-14",
                                                                             "llvm-ar"};
    if (!tt_codegen_find_tool(lld, 2, lld_path, sizeof(lld_path)))
        lld_path[0] = 0;
    if (!tt_codegen_find_tool(ar, 2, ar_path, sizeof(ar_path)))
        ar_path[0] = 0;
}

/* Runs argv[0] with argv; TT_ERR_IO with its output when it fails. */
static tt_status run_tool(char *const *argv, const char *what, tt_errbuf *err)
{
    int pipefd[2];
    if (pipe(pipefd))
        return tt_err(err, TT_ERR_IO, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDERR_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, pipefd[0]);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, NULL, argv, environ);
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
        return tt_err(err, TT_ERR_IO, "cannot run %s: %s", argv[0], strerror(rc));
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return tt_err(err, TT_ERR_IO, "%s failed: %s", what, out[0] ? out : argv[0]);
    return TT_OK;
}

/* What linking and archiving share: a host output gets the pool, written beside it
 * (OUT.pool.o) for the tool to take in; argv has room for `nargs` arguments. */
static tt_status start_tool(const char *out_path, bool host, size_t nargs, char pool_obj[4200],
                            char ***argv, tt_errbuf *err)
{
    snprintf(pool_obj, 4200, "%s.pool.o", out_path);
    if (host) {
        tt_status s = tt_codegen_write_pool_object(pool_obj, err);
        if (s)
            return s;
    }
    if (!(*argv = calloc(nargs, sizeof(char *)))) {
        if (host)
            remove(pool_obj);
        return tt_err(err, TT_ERR_NOMEM, "out of memory");
    }
    return TT_OK;
}

static void end_tool(bool host, const char *pool_obj, char **argv)
{
    free(argv);
    if (host)
        remove(pool_obj);
}

tt_status tt_codegen_link_shared(const char *const *objs, int nobjs, const char *so_path, bool host,
                                 const char *const *extra, int nextra, tt_errbuf *err)
{
    if (host)
        pthread_once(&libs_once, find_runtime_libs);
    pthread_once(&tools_once, find_tools_once);
    if (!lld_path[0])
        return tt_err(err, TT_ERR_IO, "ld.lld not found (install lld-14: scripts/install-deps.sh)");
    if (nobjs < 1 || nobjs + nextra > 1000)
        return tt_err(err, TT_ERR_INVALID_ARG, "link: %d objects", nobjs);
    char pool_obj[4200], **argv;
    tt_status s = start_tool(so_path, host, (size_t)(nobjs + nextra + 12), pool_obj, &argv, err);
    if (s)
        return s;
    int argc = 0;
    argv[argc++] = lld_path;
    argv[argc++] = "-shared";
    argv[argc++] = "--hash-style=gnu";
    argv[argc++] = "-o";
    argv[argc++] = (char *)so_path;
    for (int i = 0; i < nobjs; i++)
        argv[argc++] = (char *)objs[i];
    for (int i = 0; i < nextra; i++)
        argv[argc++] = (char *)extra[i];
    if (host) {
        argv[argc++] = pool_obj;
        argv[argc++] = "-z";
        argv[argc++] = "nodelete";
    }
    if (host && libm_path[0])
        argv[argc++] = libm_path;
    argv[argc] = NULL;
    char what[4200];
    snprintf(what, sizeof(what), "linking %s", so_path);
    s = run_tool(argv, what, err);
    end_tool(host, pool_obj, argv);
    return s;
}

tt_status tt_codegen_archive(const char *const *objs, int nobjs, const char *a_path, bool host,
                             tt_errbuf *err)
{
    pthread_once(&tools_once, find_tools_once);
    if (!ar_path[0])
        return tt_err(err, TT_ERR_IO,
                      "llvm-ar not found (install llvm-14: scripts/install-deps.sh)");
    if (nobjs < 1 || nobjs > 1000)
        return tt_err(err, TT_ERR_INVALID_ARG, "archive: %d objects", nobjs);
    remove(a_path); /* rcs would add to an old archive */
    char pool_obj[4200], **argv;
    tt_status s = start_tool(a_path, host, (size_t)nobjs + 5, pool_obj, &argv, err);
    if (s)
        return s;
    int argc = 0;
    argv[argc++] = ar_path;
    argv[argc++] = "rcs";
    argv[argc++] = (char *)a_path;
    for (int i = 0; i < nobjs; i++)
        argv[argc++] = (char *)objs[i];
    if (host)
        argv[argc++] = pool_obj;
    argv[argc] = NULL;
    char what[4200];
    snprintf(what, sizeof(what), "archiving %s", a_path);
    s = run_tool(argv, what, err);
    end_tool(host, pool_obj, argv);
    return s;
}
