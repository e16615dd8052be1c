#include "auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../base/io.h"

_Static_assert(sizeof(crypto_auth_hmacsha512256_state) <= sizeof(((tt_auth_mac *)0)->state),
               "tt_auth_mac too small for libsodium's state");
_Static_assert(crypto_auth_hmacsha512256_BYTES == TT_AUTH_TAG_BYTES, "tag size");
_Static_assert(crypto_auth_hmacsha512256_KEYBYTES == TT_AUTH_KEY_BYTES, "key size");

#define LABEL "tvm-tune-auth-v1"

static void init_sodium(void)
{
    /* Idempotent and thread-safe after the first call; it fails only without a random source,
     * where nothing could be secured anyway. */
    if (sodium_init() < 0) {
        fprintf(stderr, "tvm-tune: libsodium cannot start (no random source)\n");
        abort();
    }
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

bool tt_auth_unhex(const char *text, uint8_t out[32])
{
    if (!text || strlen(text) != 64)
        return false;
    for (int i = 0; i < 32; i++) {
        int hi = hexval(text[2 * i]), lo = hexval(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}

void tt_auth_hex(const uint8_t in[32], char out[TT_AUTH_HEX])
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[in[i] >> 4];
        out[2 * i + 1] = d[in[i] & 15];
    }
    out[64] = 0;
}

tt_status tt_auth_load(const char *path, tt_auth_keyring *ring, tt_errbuf *err)
{
    memset(ring, 0, sizeof(*ring));
    init_sodium();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return tt_err(err, TT_ERR_IO, "key file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return tt_err(err, TT_ERR_INVALID_ARG, "key file %s: not a regular file", path);
    }
    if (st.st_mode & 077) {
        close(fd);
        return tt_err(err, TT_ERR_INVALID_ARG,
                      "key file %s is readable by others (mode %03o): chmod 600 %s", path,
                      (unsigned)(st.st_mode & 0777), path);
    }
    char text[4096];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(text) - 1 && (r = read(fd, text + n, sizeof(text) - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    if (n == sizeof(text) - 1)
        return tt_err(err, TT_ERR_LIMIT, "key file %s: over %zu bytes", path, sizeof(text) - 2);
    text[n] = 0;
    int line = 0;
    for (char *p = text, *next; p && *p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next)
            *next++ = 0;
        char *hash = strchr(p, '#');
        if (hash)
            *hash = 0;
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strlen(p);
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t' || p[len - 1] == '\r'))
            p[--len] = 0;
        if (!len)
            continue;
        if (ring->nkeys == TT_AUTH_MAX_KEYS) {
            sodium_memzero(text, sizeof(text));
            return tt_err(err, TT_ERR_LIMIT, "key file %s line %d: more than %d keys", path, line,
                          TT_AUTH_MAX_KEYS);
        }
        if (!tt_auth_unhex(p, ring->key[ring->nkeys])) {
            sodium_memzero(text, sizeof(text));
            memset(ring, 0, sizeof(*ring));
            return tt_err(err, TT_ERR_PARSE,
                          "key file %s line %d: a key is 64 hex digits (tvm-tune keygen FILE "
                          "writes one)",
                          path, line);
        }
        ring->nkeys++;
    }
    sodium_memzero(text, sizeof(text));
    if (!ring->nkeys)
        return tt_err(err, TT_ERR_PARSE, "key file %s holds no key", path);
    return TT_OK;
}

tt_status tt_auth_load_default(const char *path, tt_auth_keyring *ring, tt_errbuf *err)
{
    memset(ring, 0, sizeof(*ring));
    if (!path || !*path)
        path = getenv("TVM_TUNE_AUTH_KEY_FILE");
    if (!path || !*path)
        return TT_OK;
    return tt_auth_load(path, ring, err);
}

tt_status tt_auth_keygen(const char *path, tt_errbuf *err)
{
    init_sodium();
    uint8_t key[TT_AUTH_KEY_BYTES];
    randombytes_buf(key, sizeof(key));
    char line[TT_AUTH_HEX + 1];
    tt_auth_hex(key, line);
    sodium_memzero(key, sizeof(key));
    line[64] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0)
        return tt_err(err, TT_ERR_IO, "cannot create key file %s: %s", path, strerror(errno));
    tt_status s = TT_OK;
    if (!tt_write_all(fd, line, 65) || fsync(fd))
        s = tt_err(err, TT_ERR_IO, "cannot write key file %s: %s", path, strerror(errno));
    close(fd);
    sodium_memzero(line, sizeof(line));
    if (s)
        unlink(path);
    return s;
}

void tt_auth_nonce(uint8_t out[TT_AUTH_NONCE_BYTES])
{
    init_sodium();
    randombytes_buf(out, TT_AUTH_NONCE_BYTES);
}

static void proof(const uint8_t key[TT_AUTH_KEY_BYTES], tt_auth_role role,
                  const uint8_t cn[TT_AUTH_NONCE_BYTES], const uint8_t sn[TT_AUTH_NONCE_BYTES],
                  uint8_t tag[TT_AUTH_TAG_BYTES])
{
    crypto_auth_hmacsha512256_state st;
    uint8_t r = (uint8_t)role;
    crypto_auth_hmacsha512256_init(&st, key, TT_AUTH_KEY_BYTES);
    crypto_auth_hmacsha512256_update(&st, (const uint8_t *)LABEL, sizeof(LABEL));
    crypto_auth_hmacsha512256_update(&st, &r, 1);
    crypto_auth_hmacsha512256_update(&st, cn, TT_AUTH_NONCE_BYTES);
    crypto_auth_hmacsha512256_update(&st, sn, TT_AUTH_NONCE_BYTES);
    crypto_auth_hmacsha512256_final(&st, tag);
    sodium_memzero(&st, sizeof(st));
}

void tt_auth_prove(const tt_auth_keyring *ring, tt_auth_role role,
                   const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                   const uint8_t snonce[TT_AUTH_NONCE_BYTES], uint8_t tag[TT_AUTH_TAG_BYTES])
{
    init_sodium();
    proof(ring->key[0], role, cnonce, snonce, tag);
}

int tt_auth_verify(const tt_auth_keyring *ring, tt_auth_role role,
                   const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                   const uint8_t snonce[TT_AUTH_NONCE_BYTES], const uint8_t tag[TT_AUTH_TAG_BYTES])
{
    init_sodium();
    int found = -1;
    for (int i = 0; i < ring->nkeys; i++) { /* every key, so the time says nothing of which */
        uint8_t want[TT_AUTH_TAG_BYTES];
        proof(ring->key[i], role, cnonce, snonce, want);
        if (!sodium_memcmp(want, tag, TT_AUTH_TAG_BYTES) && found < 0)
            found = i;
    }
    return found;
}

void tt_auth_session_key(const uint8_t client_key[TT_AUTH_KEY_BYTES],
                         const uint8_t server_key[TT_AUTH_KEY_BYTES],
                         const uint8_t cnonce[TT_AUTH_NONCE_BYTES],
                         const uint8_t snonce[TT_AUTH_NONCE_BYTES], uint8_t out[TT_AUTH_KEY_BYTES])
{
    init_sodium();
    crypto_generichash_state st;
    crypto_generichash_init(&st, client_key, TT_AUTH_KEY_BYTES, TT_AUTH_KEY_BYTES);
    crypto_generichash_update(&st, (const uint8_t *)LABEL "-session", sizeof(LABEL "-session"));
    crypto_generichash_update(&st, server_key, TT_AUTH_KEY_BYTES);
    crypto_generichash_update(&st, cnonce, TT_AUTH_NONCE_BYTES);
    crypto_generichash_update(&st, snonce, TT_AUTH_NONCE_BYTES);
    crypto_generichash_final(&st, out, TT_AUTH_KEY_BYTES);
    sodium_memzero(&st, sizeof(st));
}

void tt_auth_mac_init(tt_auth_mac *m, const uint8_t key[TT_AUTH_KEY_BYTES])
{
    init_sodium();
    crypto_auth_hmacsha512256_init((crypto_auth_hmacsha512256_state *)m->state, key,
                                   TT_AUTH_KEY_BYTES);
}

void tt_auth_mac_update(tt_auth_mac *m, const void *data, size_t n)
{
    crypto_auth_hmacsha512256_update((crypto_auth_hmacsha512256_state *)m->state, data, n);
}

void tt_auth_mac_final(tt_auth_mac *m, uint8_t tag[TT_AUTH_TAG_BYTES])
{
    crypto_auth_hmacsha512256_final((crypto_auth_hmacsha512256_state *)m->state, tag);
    sodium_memzero(m, sizeof(*m));
}

bool tt_auth_tag_equal(const uint8_t a[TT_AUTH_TAG_BYTES], const uint8_t b[TT_AUTH_TAG_BYTES])
{
    return sodium_memcmp(a, b, TT_AUTH_TAG_BYTES) == 0;
}

bool tt_auth_is_loopback(const char *host)
{
    if (!host)
        return false;
    if (!strcmp(host, "localhost"))
        return true;
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

tt_status tt_auth_check_listen(const tt_auth_keyring *ring, const char *host, bool insecure,
                               const char *risk, tt_errbuf *err)
{
    if ((ring && ring->nkeys) || tt_auth_is_loopback(host) || insecure)
        return TT_OK;
    return tt_err(err, TT_ERR_INVALID_ARG,
                  "refusing to listen on %s without a key: anyone who can reach it could %s.  "
                  "Give --auth-key-file (tvm-tune keygen FILE makes one), or --insecure on a "
                  "network you trust",
                  host, risk);
}
