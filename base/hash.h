/* Stable hashing.  Values are part of the database format (workload and config hashes), so the
 * functions never change: FNV-1a 64-bit, the same on every machine and byte order. */
#ifndef TT_BASE_HASH_H
#define TT_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define TT_FNV64_OFFSET 0xcbf29ce484222325ull

uint64_t tt_hash64(const void *data, size_t n);
uint64_t tt_hash64_str(const char *s);
/* Continues a hash: tt_hash64_update(tt_hash64(a), b) == hash of a followed by b. */
uint64_t tt_hash64_update(uint64_t h, const void *data, size_t n);
/* 16 lowercase hex digits + NUL. */
void tt_hash64_hex(uint64_t h, char out[17]);

#endif
