#include "hash.h"

#include <stdio.h>
#include <string.h>

uint64_t tt_hash64_update(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

uint64_t tt_hash64(const void *data, size_t n)
{
    return tt_hash64_update(TT_FNV64_OFFSET, data, n);
}

uint64_t tt_hash64_str(const char *s)
{
    return tt_hash64(s, strlen(s));
}

void tt_hash64_hex(uint64_t h, char out[17])
{
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}
