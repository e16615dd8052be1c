/* Private to codegen/'s loader: relocatable objects loaded in memory (object_loader.c). */
#ifndef TT_CODEGEN_LOADER_INT_H
#define TT_CODEGEN_LOADER_INT_H

#include <stddef.h>

#include "loader.h"

typedef struct tt__object_image {
    void *base; /* the mapping: code and constants read + execute, data read + write */
    size_t size;
    void *fn;              /* the entry */
    void (*release)(void); /* <entry>.ws.release, when the kernel keeps heap buffers */
} tt__object_image;

/* Loads the x86-64 relocatable object at `path` into memory, applies its relocations (undefined
 * symbols resolved in this process: libm and libgomp are loaded globally first) and finds
 * `entry`.  TT_ERR_UNSUPPORTED for another machine, TT_ERR_IO with the reason for a malformed
 * object, an unsupported relocation or a missing symbol. */
tt_status tt__kernel_load_object(const char *path, const char *entry, tt__object_image *out,
                                 tt_errbuf *err);
void tt__kernel_unload_object(tt__object_image *img);

/* True when the file at `path` starts like a relocatable ELF object (e_type ET_REL). */
bool tt__is_relocatable_object(const char *path);

#endif
