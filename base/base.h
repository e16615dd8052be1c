/* base/: status codes, logging, arena, vectors, strings, hashing, RNG, JSON helpers, tied child
 * processes, tensor memory.
 * Depends on nothing in the project (jansson outside it). */
#ifndef TT_BASE_BASE_H
#define TT_BASE_BASE_H

#include "arena.h"
#include "child.h"
#include "clock.h"
#include "hash.h"
#include "io.h"
#include "fmt.h"
#include "json.h"
#include "log.h"
#include "rng.h"
#include "status.h"
#include "strbuf.h"
#include "tensor_mem.h"
#include "vec.h"
#include "workdir.h"

#define TT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
