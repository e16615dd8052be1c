/* Loading a relocatable object (ET_REL) in memory: what replaces `ld.lld -shared` + dlopen() for
 * kernels measured on this machine.  Spawning the linker costs ~20-40 ms per candidate (it loads
 * all of libLLVM); a kernel object has a handful of sections and relocations (calls into the
 * thread pool and libm, references to its constant pool and its outlined parallel bodies), which
 * take microseconds to apply here.
 *
 * x86-64 only (the machine that tunes locally); other objects are refused with the reason, and
 * devices of other architectures keep receiving linked shared objects.  The object is untrusted
 * input in the sense of the measuring child (it runs code anyway), but a malformed file must
 * still be an error, not a crash of the loader: every offset and index is bounds-checked. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loader_int.h"
#include "pool.h"

#define MAX_OBJECT_BYTES (256u << 20)

typedef struct {
    const uint8_t *data;
    size_t size;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    uint8_t *base;   /* the mapping */
    size_t map_size; /* bytes mapped */
    size_t exec_end; /* [0, exec_end) becomes read + execute */
    uint64_t *addr;  /* per section: where it was placed (0: not loaded) */
    uint8_t *stubs;  /* 16 bytes per undefined symbol: jmp *slot(%rip); slot */
    int nstubs, maxstubs;
    const char **stub_names;
} object;

static bool in_file(const object *o, uint64_t off, uint64_t len)
{
    return off <= o->size && len <= o->size - off;
}

/* Sections placed in memory: allocated ones, except unwind tables (nothing unwinds a kernel). */
static bool loaded(const object *o, int i, const char *shstr, size_t shstr_len)
{
    const Elf64_Shdr *s = &o->sh[i];
    if (!(s->sh_flags & SHF_ALLOC) || s->sh_size == 0)
        return false;
    if (s->sh_name < shstr_len && !strncmp(shstr + s->sh_name, ".eh_frame", 9))
        return false;
    return true;
}

/* The thread pool's entry points, linked into this process (a static device build has no
 * dynamic symbol table to find them in). */
static void *pool_symbol(const char *name)
{
    void *p = NULL;
    if (!strcmp(name, "tt_rt1_parallel"))
        *(void (**)(void (*)(void *), void *, unsigned, unsigned)) & p = tt_rt1_parallel;
    else if (!strcmp(name, "tt_rt1_thread_num"))
        *(int (**)(void)) & p = tt_rt1_thread_num;
    else if (!strcmp(name, "tt_rt1_num_threads"))
        *(int (**)(void)) & p = tt_rt1_num_threads;
    else if (!strcmp(name, "tt_rt1_parallel_for"))
        *(void (**)(void (*)(void *, tt_rt1_loop *, int), void *, long long, unsigned)) & p =
            tt_rt1_parallel_for;
    else if (!strcmp(name, "tt_rt1_loop_next"))
        *(int (**)(tt_rt1_loop *, int, long long[2])) & p = tt_rt1_loop_next;
    return p;
}

/* The address of an undefined symbol: a stub that jumps to it (calls may be more than 2 GiB from
 * the mapping), whose 8-byte slot also serves as its GOT entry. */
static uint8_t *stub_for(object *o, const char *name, tt_errbuf *err, tt_status *st)
{
    for (int i = 0; i < o->nstubs; i++)
        if (!strcmp(o->stub_names[i], name))
            return o->stubs + 16 * i;
    if (o->nstubs >= o->maxstubs) {
        *st = tt_err(err, TT_ERR_IO, "object: more undefined symbols than counted");
        return NULL;
    }
    void *target = pool_symbol(name);
    if (!target)
        target = dlsym(RTLD_DEFAULT, name);
    if (!target) {
        *st =
            tt_err(err, TT_ERR_IO,
                   "object: undefined symbol '%s' (not in libm, libgomp or the thread pool)", name);
        return NULL;
    }
    uint8_t *s = o->stubs + 16 * o->nstubs;
    o->stub_names[o->nstubs++] = name;
    static const uint8_t jmp[6] = {0xff, 0x25, 0x02, 0x00, 0x00, 0x00}; /* jmp *2(%rip) */
    memcpy(s, jmp, 6);
    s[6] = s[7] = 0xcc;
    memcpy(s + 8, &target, 8);
    return s;
}

static tt_status put32(uint8_t *at, int64_t v, const char *what, tt_errbuf *err)
{
    if (v < INT32_MIN || v > INT32_MAX)
        return tt_err(err, TT_ERR_IO, "object: %s relocation out of range (%lld)", what,
                      (long long)v);
    int32_t x = (int32_t)v;
    memcpy(at, &x, 4);
    return TT_OK;
}

static tt_status relocate(object *o, const Elf64_Shdr *rs, const Elf64_Sym *syms, size_t nsyms,
                          const char *strtab, size_t strtab_len, tt_errbuf *err)
{
    uint32_t target_sec = rs->sh_info;
    if (target_sec >= o->eh->e_shnum || !o->addr[target_sec])
        return TT_OK; /* relocations of a section not loaded (unwind tables) */
    if (!in_file(o, rs->sh_offset, rs->sh_size) || rs->sh_entsize != sizeof(Elf64_Rela))
        return tt_err(err, TT_ERR_IO, "object: bad relocation section");
    const Elf64_Rela *r = (const Elf64_Rela *)(o->data + rs->sh_offset);
    size_t n = rs->sh_size / sizeof(Elf64_Rela);
    const Elf64_Shdr *ts = &o->sh[target_sec];
    for (size_t i = 0; i < n; i++) {
        uint32_t type = ELF64_R_TYPE(r[i].r_info), si = ELF64_R_SYM(r[i].r_info);
        if (si >= nsyms || r[i].r_offset > ts->sh_size || ts->sh_size - r[i].r_offset < 4)
            return tt_err(err, TT_ERR_IO, "object: relocation %zu out of bounds", i);
        const Elf64_Sym *sym = &syms[si];
        uint8_t *P = (uint8_t *)(uintptr_t)(o->addr[target_sec] + r[i].r_offset);
        int64_t A = r[i].r_addend;
        uint64_t S = 0;
        uint8_t *got = NULL; /* the slot holding S, for GOT-relative relocations */
        tt_status st = TT_OK;
        if (sym->st_shndx == SHN_UNDEF) {
            if (sym->st_name >= strtab_len)
                return tt_err(err, TT_ERR_IO, "object: bad symbol name");
            uint8_t *stub = stub_for(o, strtab + sym->st_name, err, &st);
            if (!stub)
                return st;
            memcpy(&S, stub + 8, 8);
            got = stub + 8;
            if (type == R_X86_64_PLT32)
                S = (uint64_t)(uintptr_t)stub;
        } else if (sym->st_shndx == SHN_ABS) {
            S = sym->st_value;
        } else if (sym->st_shndx < o->eh->e_shnum && o->addr[sym->st_shndx]) {
            S = o->addr[sym->st_shndx] + sym->st_value;
        } else {
            return tt_err(err, TT_ERR_IO, "object: relocation against an unloaded section");
        }
        uint64_t Pa = (uint64_t)(uintptr_t)P;
        switch (type) {
        case R_X86_64_NONE: break;
        case R_X86_64_64: {
            if (r[i].r_offset + 8 > ts->sh_size)
                return tt_err(err, TT_ERR_IO, "object: relocation %zu out of bounds", i);
            uint64_t v = S + (uint64_t)A;
            memcpy(P, &v, 8);
            break;
        }
        case R_X86_64_PC64: {
            if (r[i].r_offset + 8 > ts->sh_size)
                return tt_err(err, TT_ERR_IO, "object: relocation %zu out of bounds", i);
            uint64_t v = S + (uint64_t)A - Pa;
            memcpy(P, &v, 8);
            break;
        }
        case R_X86_64_PC32:
        case R_X86_64_PLT32: st = put32(P, (int64_t)(S + (uint64_t)A - Pa), "PC32", err); break;
        case R_X86_64_GOTPCREL:
        case R_X86_64_GOTPCRELX:
        case R_X86_64_REX_GOTPCRELX:
            if (!got)
                return tt_err(err, TT_ERR_IO,
                              "object: GOT relocation against a defined symbol (type %u)", type);
            st = put32(P, (int64_t)((uint64_t)(uintptr_t)got + (uint64_t)A - Pa), "GOTPCREL", err);
            break;
        default: return tt_err(err, TT_ERR_IO, "object: relocation type %u is not supported", type);
        }
        if (st)
            return st;
    }
    return TT_OK;
}

tt_status tt__kernel_load_object(const char *path, const char *entry, tt__object_image *out,
                                 tt_errbuf *err)
{
    memset(out, 0, sizeof(*out));
    tt_status st = TT_OK;
    object o;
    memset(&o, 0, sizeof(o));
    FILE *f = fopen(path, "rb");
    if (!f)
        return tt_err(err, TT_ERR_IO, "loading %s: %s", path, strerror(errno));
    uint8_t *buf = NULL;
    size_t cap = 0, len = 0, n;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            uint8_t *g = cap <= MAX_OBJECT_BYTES ? realloc(buf, cap) : NULL;
            if (!g) {
                free(buf);
                fclose(f);
                return tt_err(err, TT_ERR_IO, "loading %s: too large or out of memory", path);
            }
            buf = g;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    o.data = buf;
    o.size = len;
    o.eh = (const Elf64_Ehdr *)buf;
    if (len < sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) || buf[EI_CLASS] != ELFCLASS64 ||
        buf[EI_DATA] != ELFDATA2LSB || o.eh->e_type != ET_REL) {
        st = tt_err(err, TT_ERR_IO, "loading %s: not a 64-bit relocatable ELF object", path);
        goto out;
    }
    if (o.eh->e_machine != EM_X86_64) {
        st = tt_err(err, TT_ERR_UNSUPPORTED,
                    "loading %s: relocatable objects are loaded on x86-64 only (machine %u): "
                    "link it into a shared object",
                    path, o.eh->e_machine);
        goto out;
    }
#if !defined(__x86_64__)
    st = tt_err(err, TT_ERR_UNSUPPORTED, "loading %s: an x86-64 object on another machine", path);
    goto out;
#endif
    if (o.eh->e_shentsize != sizeof(Elf64_Shdr) || o.eh->e_shnum == 0 ||
        !in_file(&o, o.eh->e_shoff, (uint64_t)o.eh->e_shnum * sizeof(Elf64_Shdr)) ||
        o.eh->e_shstrndx >= o.eh->e_shnum) {
        st = tt_err(err, TT_ERR_IO, "loading %s: bad section table", path);
        goto out;
    }
    o.sh = (const Elf64_Shdr *)(buf + o.eh->e_shoff);
    int nsec = o.eh->e_shnum;
    const Elf64_Shdr *shs = &o.sh[o.eh->e_shstrndx];
    if (!in_file(&o, shs->sh_offset, shs->sh_size)) {
        st = tt_err(err, TT_ERR_IO, "loading %s: bad section names", path);
        goto out;
    }
    const char *shstr = (const char *)buf + shs->sh_offset;
    size_t shstr_len = shs->sh_size;
    /* The symbol table, and how many stubs undefined symbols may need. */
    const Elf64_Sym *syms = NULL;
    size_t nsyms = 0;
    const char *strtab = NULL;
    size_t strtab_len = 0;
    for (int i = 0; i < nsec; i++)
        if (o.sh[i].sh_type == SHT_SYMTAB) {
            const Elf64_Shdr *s = &o.sh[i];
            if (s->sh_entsize != sizeof(Elf64_Sym) || !in_file(&o, s->sh_offset, s->sh_size) ||
                s->sh_link >= (uint32_t)nsec ||
                !in_file(&o, o.sh[s->sh_link].sh_offset, o.sh[s->sh_link].sh_size)) {
                st = tt_err(err, TT_ERR_IO, "loading %s: bad symbol table", path);
                goto out;
            }
            syms = (const Elf64_Sym *)(buf + s->sh_offset);
            nsyms = s->sh_size / sizeof(Elf64_Sym);
            strtab = (const char *)buf + o.sh[s->sh_link].sh_offset;
            strtab_len = o.sh[s->sh_link].sh_size;
        }
    if (!syms || strtab_len == 0 || strtab[strtab_len - 1] != 0) {
        st = tt_err(err, TT_ERR_IO, "loading %s: no symbol table", path);
        goto out;
    }
    for (size_t i = 0; i < nsyms; i++)
        o.maxstubs += syms[i].st_shndx == SHN_UNDEF && i > 0;
    /* Layout: executable and read-only sections, the stubs, then writable ones. */
    o.addr = calloc((size_t)nsec, sizeof(uint64_t));
    o.stub_names = calloc((size_t)o.maxstubs + 1, sizeof(char *));
    uint64_t *off = calloc((size_t)nsec, sizeof(uint64_t));
    if (!o.addr || !o.stub_names || !off) {
        free(off);
        st = tt_err(err, TT_ERR_NOMEM, "out of memory");
        goto out;
    }
    size_t page = (size_t)sysconf(_SC_PAGESIZE), pos = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < nsec; i++) {
            if (!loaded(&o, i, shstr, shstr_len) || !!(o.sh[i].sh_flags & SHF_WRITE) != pass)
                continue;
            uint64_t al = o.sh[i].sh_addralign ? o.sh[i].sh_addralign : 1;
            if (al > page || (al & (al - 1)) || o.sh[i].sh_size > MAX_OBJECT_BYTES) {
                free(off);
                st = tt_err(err, TT_ERR_IO, "loading %s: bad section %d", path, i);
                goto out;
            }
            pos = (pos + al - 1) & ~(al - 1);
            off[i] = pos + 1; /* 0 = not placed */
            pos += o.sh[i].sh_size;
        }
        if (pass == 0) {
            pos = (pos + 15) & ~(size_t)15;
            size_t stubs_at = pos;
            pos += 16 * (size_t)o.maxstubs;
            o.exec_end = (pos + page - 1) & ~(page - 1);
            pos = o.exec_end;
            off[0] = stubs_at; /* section 0 is never loaded: borrow its slot */
        }
    }
    o.map_size = pos ? (pos + page - 1) & ~(page - 1) : page;
    void *m = mmap(NULL, o.map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        free(off);
        st = tt_err(err, TT_ERR_NOMEM, "loading %s: mmap: %s", path, strerror(errno));
        goto out;
    }
    o.base = m;
    o.stubs = o.base + off[0];
    for (int i = 1; i < nsec; i++) {
        if (!off[i])
            continue;
        o.addr[i] = (uint64_t)(uintptr_t)(o.base + off[i] - 1);
        if (o.sh[i].sh_type != SHT_NOBITS) {
            if (!in_file(&o, o.sh[i].sh_offset, o.sh[i].sh_size)) {
                free(off);
                st = tt_err(err, TT_ERR_IO, "loading %s: section %d outside the file", path, i);
                goto out;
            }
            memcpy(o.base + off[i] - 1, buf + o.sh[i].sh_offset, o.sh[i].sh_size);
        }
    }
    free(off);
    for (int i = 0; i < nsec && !st; i++) {
        if (o.sh[i].sh_type == SHT_REL) {
            st = tt_err(err, TT_ERR_IO, "loading %s: REL relocations are not supported", path);
        } else if (o.sh[i].sh_type == SHT_RELA) {
            tt_errbuf why = {{0}};
            if ((st = relocate(&o, &o.sh[i], syms, nsyms, strtab, strtab_len, &why)))
                tt_err(err, st, "loading %s: %s", path, why.msg);
        }
    }
    if (st)
        goto out;
    if (o.exec_end && mprotect(o.base, o.exec_end, PROT_READ | PROT_EXEC)) {
        st = tt_err(err, TT_ERR_IO, "loading %s: mprotect: %s", path, strerror(errno));
        goto out;
    }
    __builtin___clear_cache((char *)o.base, (char *)o.base + o.exec_end);
    /* The entry and its release function: defined global function symbols. */
    char release[512];
    snprintf(release, sizeof(release), "%s%s", entry, TT_WS_RELEASE_SUFFIX);
    for (size_t i = 1; i < nsyms; i++) {
        const Elf64_Sym *s = &syms[i];
        if (s->st_name >= strtab_len || s->st_shndx == SHN_UNDEF || s->st_shndx >= nsec ||
            !o.addr[s->st_shndx] || ELF64_ST_BIND(s->st_info) == STB_LOCAL)
            continue;
        void *at = (void *)(uintptr_t)(o.addr[s->st_shndx] + s->st_value);
        if (!strcmp(strtab + s->st_name, entry))
            out->fn = at;
        else if (!strcmp(strtab + s->st_name, release))
            *(void **)&out->release = at;
    }
    if (!out->fn) {
        st = tt_err(err, TT_ERR_IO, "%s has no function '%s'", path, entry);
        goto out;
    }
    out->base = o.base;
    out->size = o.map_size;
    o.base = NULL;
out:
    if (o.base)
        munmap(o.base, o.map_size);
    free(o.addr);
    free(o.stub_names);
    free(buf);
    return st;
}

void tt__kernel_unload_object(tt__object_image *img)
{
    if (img->release)
        img->release();
    if (img->base)
        munmap(img->base, img->size);
    memset(img, 0, sizeof(*img));
}
