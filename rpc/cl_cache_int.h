/* Private to rpc/: OpenCL program binaries cached by content.
 *
 * Most of a GPU candidate's measurement was the driver's build (1.8-4.2 s a candidate on NVIDIA's
 * driver, against a few milliseconds of kernel).  The tuner's parallel builders (build_only) store
 * what the driver built; the measuring worker, a repeated candidate and a restarted run load it
 * (clCreateProgramWithBinary) instead of building again.  A binary is keyed by the device (name,
 * vendor, version, driver: a new driver is a new key), the build options and the whole source,
 * and the entry holds the source itself, so a hit is exact, never a hash's guess.
 *
 * The folder: $TT_CL_CACHE, else $XDG_CACHE_HOME/tvm-tune/opencl, else
 * $HOME/.cache/tvm-tune/opencl; TT_CL_CACHE=off turns caching off.  Without TT_CL_CACHE, CPU
 * devices are not cached: pocl caches its builds by source itself, and asking it for a binary
 * costs a second compile of every kernel.  Entries are written to a
 * temporary name and renamed (concurrent builders never see half a file); a hit refreshes the
 * entry's time, and the folder is trimmed to its least recently used entries once it passes
 * TT__CL_CACHE_MAX_BYTES.  Everything is best effort: a folder that cannot be made or written
 * only means no cache. */
#ifndef TT_RPC_CL_CACHE_INT_H
#define TT_RPC_CL_CACHE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "opencl.h"

#define TT__CL_CACHE_MAX_BYTES (512ll << 20)

typedef struct tt__cl_cache {
    bool on;
    char dir[512];
    char file[600]; /* this entry's path */
} tt__cl_cache;

/* Opens the cache for one program; false (and c->on false) when caching is off or the folder
 * cannot be made. */
bool tt__cl_cache_open(tt__cl_cache *c, const tt_cl_device_info *dev, const char *options,
                       const char *src, size_t len);
/* The cached binary of `src` (malloc'd, its size in *n), or NULL. */
unsigned char *tt__cl_cache_get(const tt__cl_cache *c, const char *src, size_t len, size_t *n);
/* Stores the binary of `src`. */
void tt__cl_cache_put(const tt__cl_cache *c, const char *src, size_t len, const unsigned char *bin,
                      size_t n);

#endif
