/* Memory for the tensors a kernel is measured on, placed where deployments place them.
 *
 * A kernel's speed can depend on where its buffers start within a page: one tuned MobileNet-V2
 * depthwise kernel ran in 42 us or 94 us depending on the page offsets of its buffers alone
 * (likely 4K aliasing: loads of input rows that match pending output stores in their low 12
 * address bits wait for them; not proven with counters).  posix_memalign puts a large block
 * wherever the process's heap history leaves room, so the tuner's measuring child, forked from a
 * process that has allocated and freed for hours, and an application calling the built library saw
 * different offsets.  Every measurement (rpc/measure.c) and benchmark timing therefore takes its
 * buffers from here: each at TT_TENSOR_PAGE_OFFSET bytes past the start of pages of its own,
 * which is where glibc's posix_memalign(64), and with it PyTorch's and TVM's CPU allocators,
 * put a tensor of more than a few hundred KiB.  docs/tuning.md, "Measurement". */
#ifndef TT_BASE_TENSOR_MEM_H
#define TT_BASE_TENSOR_MEM_H

#include <stddef.h>

#define TT_TENSOR_PAGE_OFFSET 64

/* `bytes` (0 allowed) of memory starting TT_TENSOR_PAGE_OFFSET bytes past a page boundary, in
 * pages of its own; NULL when out of memory.  Contents are unspecified (fresh pages read 0). */
void *tt_tensor_alloc(size_t bytes);

/* Frees what tt_tensor_alloc returned for `bytes`; NULL is ignored. */
void tt_tensor_free(void *p, size_t bytes);

#endif
