/* Value numbering while emitting: an operation on the same LLVM operands is built once per region
 * in which it dominates what follows.
 *
 * Unrolling (an `unroll` loop, auto_unroll_max_step) emits a loop body once per iteration with the
 * loop variable bound to a constant, so every index expression is built again: a convolution tile
 * unrolled 512 times came to 65,000 lines of IR, most of them the same multiplies and adds of the
 * outer loop variables, which LLVM then spent most of its time removing again (InstCombine,
 * EarlyCSE, GVN).  Keys are LLVM values, so an operation on a rebound variable is a different key
 * and needs no invalidation.  Emission is structured, so a value built in region R dominates
 * everything emitted later while R is open: each loop body, branch arm and outlined function opens
 * a region, and an entry is used only while its region is still open. */
#include "codegen_int.h"

#include <stdint.h>
#include <stdlib.h>

static uint64_t hash_key(int op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    uint64_t h = (uint64_t)op * 0x9E3779B97F4A7C15ull;
    h ^= (uint64_t)(uintptr_t)a + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)(uintptr_t)b + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    h ^= (uint64_t)(uintptr_t)c + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
    return h ^ (h >> 29);
}

/* Is the region an entry was made in still open (and in the function being emitted)? */
static bool live(const tt__vn *vn, const tt__vn_entry *x)
{
    return x->v && x->depth >= vn->floor && x->depth <= vn->depth &&
           vn->stack[x->depth] == x->region;
}

static bool grow(tt__vn *vn)
{
    size_t cap = vn->cap ? vn->cap * 2 : 1024;
    tt__vn_entry *t = calloc(cap, sizeof(*t));
    if (!t)
        return false;
    size_t used = 0;
    for (size_t i = 0; i < vn->cap; i++) {
        const tt__vn_entry *x = &vn->table[i];
        if (!live(vn, x))
            continue;
        size_t j = hash_key(x->op, x->a, x->b, x->c) & (cap - 1);
        while (t[j].v)
            j = (j + 1) & (cap - 1);
        t[j] = *x;
        used++;
    }
    free(vn->table);
    vn->table = t;
    vn->cap = cap;
    vn->used = used;
    return true;
}

LLVMValueRef tt__vn_find(const tt__vn *vn, int op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
    if (!vn->cap)
        return NULL;
    for (size_t j = hash_key(op, a, b, c) & (vn->cap - 1);; j = (j + 1) & (vn->cap - 1)) {
        const tt__vn_entry *x = &vn->table[j];
        if (!x->v)
            return NULL;
        if (x->op == op && x->a == a && x->b == b && x->c == c && live(vn, x))
            return x->v;
    }
}

void tt__vn_add(tt__vn *vn, int op, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c, LLVMValueRef v)
{
    /* Constants are folded by the builder and free to rebuild: only instructions are kept. */
    if (!LLVMIsAInstruction(v) || vn->depth >= TT_VN_MAX_DEPTH)
        return;
    if (2 * (vn->used + 1) > vn->cap) {
        if (!grow(vn))
            return; /* out of memory: emit without numbering */
    }
    size_t j = hash_key(op, a, b, c) & (vn->cap - 1);
    /* Reuse a dead entry on the probe path, else the first empty slot. */
    while (vn->table[j].v && live(vn, &vn->table[j]))
        j = (j + 1) & (vn->cap - 1);
    vn->used += vn->table[j].v == NULL;
    tt__vn_entry x = {op, (uint16_t)vn->depth, vn->stack[vn->depth], a, b, c, v};
    vn->table[j] = x;
}

void tt__vn_open(tt__vn *vn)
{
    vn->depth++;
    if (vn->depth < TT_VN_MAX_DEPTH)
        vn->stack[vn->depth] = ++vn->next_region;
}

void tt__vn_close(tt__vn *vn)
{
    if (vn->depth < TT_VN_MAX_DEPTH)
        vn->stack[vn->depth] = 0;
    vn->depth--;
}

void tt__vn_free(tt__vn *vn)
{
    free(vn->table);
    vn->table = NULL;
    vn->cap = vn->used = 0;
}
