/* Tensor memory at a fixed page offset: see tensor_mem.h. */
#include "tensor_mem.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t mapped_size(size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + TT_TENSOR_PAGE_OFFSET + page - 1) / page * page;
}

void *tt_tensor_alloc(size_t bytes)
{
    size_t len = mapped_size(bytes);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
        return NULL;
    return (char *)base + TT_TENSOR_PAGE_OFFSET;
}

void tt_tensor_free(void *p, size_t bytes)
{
    if (p)
        munmap((char *)p - TT_TENSOR_PAGE_OFFSET, mapped_size(bytes));
}
