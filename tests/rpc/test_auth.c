/* The farm's shared-key authentication (rpc/auth.h, docs/security.md): key files, proofs and
 * rotation, the sealed measurement channel (tampering, replay, reflection), and the farm as real
 * processes on loopback with a key: tracker, device and tvm-tune prove it to each other (with
 * rings in the middle of a rotation), a tuning run and a tracker job measure through it, and
 * everything without the key, or with another, is refused with the reason and measures nothing.
 * Daemons without a key refuse to listen beyond loopback. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/io.h"
#include "net/proc.h"
#include "rpc/auth.h"
#include "rpc/measure_proto.h"
#include "rpc/tracker_client.h"
#include "rpc/tracker_proto.h"

static char workdir[256];
static char key_a[300], key_b[300], key_c[300], ring_ab[300], ring_ba[300];
static tt_proc tracker, server;
static int tracker_port, server_port;

static void write_file(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_true(tt_write_all(fd, text, strlen(text)));
    fchmod(fd, mode);
    close(fd);
}

static void read_key_line(const char *path, char *out)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(out, 80, f));
    fclose(f);
    out[64] = 0;
}

static int run(const char *cmd, char *out, size_t n)
{
    return tt_proc_output(cmd, out, n);
}

/* ---- key files ---- */

static void key_files(void **state)
{
    (void)state;
    tt_errbuf err = {{0}};
    tt_auth_keyring ring;
    assert_int_equal(tt_auth_load(key_a, &ring, &err), TT_OK);
    assert_int_equal(ring.nkeys, 1);
    struct stat st;
    assert_int_equal(stat(key_a, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    /* keygen never overwrites */
    assert_int_equal(tt_auth_keygen(key_a, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "File exists"));
    assert_int_equal(tt_auth_load(ring_ab, &ring, &err), TT_OK);
    assert_int_equal(ring.nkeys, 2);

    char path[300], a[80], text[600];
    read_key_line(key_a, a);
    snprintf(path, sizeof(path), "%s/open.key", workdir);
    write_file(path, a, 0644);
    assert_int_equal(tt_auth_load(path, &ring, &err), TT_ERR_INVALID_ARG);
    assert_non_null(strstr(err.msg, "readable by others (mode 644): chmod 600"));
    assert_int_equal(ring.nkeys, 0);

    snprintf(text, sizeof(text), "# the farm\n%s\n\n%.63s\n", a, a);
    write_file(path, text, 0600);
    assert_int_equal(tt_auth_load(path, &ring, &err), TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "line 4: a key is 64 hex digits"));

    write_file(path, "# nothing here\n", 0600);
    assert_int_equal(tt_auth_load(path, &ring, &err), TT_ERR_PARSE);
    assert_non_null(strstr(err.msg, "holds no key"));

    snprintf(text, sizeof(text), "%s\n%s\n%s\n%s\n%s\n", a, a, a, a, a);
    write_file(path, text, 0600);
    assert_int_equal(tt_auth_load(path, &ring, &err), TT_ERR_LIMIT);
    assert_non_null(strstr(err.msg, "line 5: more than 4 keys"));

    snprintf(path, sizeof(path), "%s/missing.key", workdir);
    assert_int_equal(tt_auth_load(path, &ring, &err), TT_ERR_IO);
    assert_non_null(strstr(err.msg, "missing.key"));
}

/* ---- proofs ---- */

static void proofs_and_rotation(void **state)
{
    (void)state;
    tt_errbuf err = {{0}};
    tt_auth_keyring a, b, ab, ba;
    assert_int_equal(tt_auth_load(key_a, &a, &err), TT_OK);
    assert_int_equal(tt_auth_load(key_b, &b, &err), TT_OK);
    assert_int_equal(tt_auth_load(ring_ab, &ab, &err), TT_OK);
    assert_int_equal(tt_auth_load(ring_ba, &ba, &err), TT_OK);
    uint8_t cn[32], sn[32], tag[32];
    tt_auth_nonce(cn);
    tt_auth_nonce(sn);
    assert_memory_not_equal(cn, sn, 32);

    tt_auth_prove(&a, TT_AUTH_MEASURE_CLIENT, cn, sn, tag);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_CLIENT, cn, sn, tag), 0);
    /* another key, another role, swapped or fresh nonces: refused */
    assert_int_equal(tt_auth_verify(&b, TT_AUTH_MEASURE_CLIENT, cn, sn, tag), -1);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_SERVER, cn, sn, tag), -1);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_TRACKER_CLIENT, cn, sn, tag), -1);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_CLIENT, sn, cn, tag), -1);
    uint8_t other[32];
    tt_auth_nonce(other);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_CLIENT, cn, other, tag), -1);
    tag[5] ^= 1;
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_CLIENT, cn, sn, tag), -1);

    /* Mid-rotation: [A, B] proves with A, [B, A] with B; each accepts the other's. */
    tt_auth_prove(&ab, TT_AUTH_MEASURE_CLIENT, cn, sn, tag);
    assert_int_equal(tt_auth_verify(&ba, TT_AUTH_MEASURE_CLIENT, cn, sn, tag), 1);
    tt_auth_prove(&ba, TT_AUTH_MEASURE_SERVER, cn, sn, tag);
    int k = tt_auth_verify(&ab, TT_AUTH_MEASURE_SERVER, cn, sn, tag);
    assert_int_equal(k, 1);
    assert_int_equal(tt_auth_verify(&a, TT_AUTH_MEASURE_SERVER, cn, sn, tag), -1);
    /* both ends derive the same session key from the two proving keys */
    uint8_t client_side[32], server_side[32];
    tt_auth_session_key(ab.key[0], ab.key[k], cn, sn, client_side);
    tt_auth_session_key(ba.key[1], ba.key[0], cn, sn, server_side);
    assert_memory_equal(client_side, server_side, 32);
    tt_auth_session_key(ab.key[0], ab.key[0], cn, sn, server_side);
    assert_memory_not_equal(client_side, server_side, 32);

    char hex[TT_AUTH_HEX];
    uint8_t back[32];
    tt_auth_hex(cn, hex);
    assert_true(tt_auth_unhex(hex, back));
    assert_memory_equal(back, cn, 32);
    hex[10] = 'g';
    assert_false(tt_auth_unhex(hex, back));
    assert_false(tt_auth_unhex("abcd", back));

    assert_true(tt_auth_is_loopback("127.0.0.1"));
    assert_true(tt_auth_is_loopback("127.8.9.10"));
    assert_true(tt_auth_is_loopback("::1"));
    assert_true(tt_auth_is_loopback("localhost"));
    assert_false(tt_auth_is_loopback("0.0.0.0"));
    assert_false(tt_auth_is_loopback("::"));
    assert_false(tt_auth_is_loopback("10.0.0.1"));
    assert_false(tt_auth_is_loopback("example.org"));
}

/* ---- the sealed channel ---- */

static void sealed_channel(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    tt_socket_deadlines(sv[0], 2);
    tt_socket_deadlines(sv[1], 2);
    uint8_t key[32];
    tt_auth_nonce(key);
    tt_mchan client, srv;
    tt_mchan_init(&client, sv[0], false);
    tt_mchan_init(&srv, sv[1], true);
    tt_mchan_seal(&client, key);
    tt_mchan_seal(&srv, key);
    tt_errbuf err = {{0}};
    static const char blob[] = "kernel bytes";

    /* a message with a blob, and one without, both ways */
    assert_int_equal(tt_mproto_send(&client, "{\"op\":\"put\"}", blob, sizeof(blob), &err), TT_OK);
    json_t *msg = NULL;
    uint64_t bl = 0, hash = 0;
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_OK);
    assert_int_equal(bl, sizeof(blob));
    json_decref(msg);
    assert_int_equal(tt_mproto_recv_blob(&srv, bl, -1, &hash, &err), TT_OK);
    assert_int_equal(tt_mproto_send(&srv, "{\"op\":\"ok\"}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&client, &msg, &bl, &err), TT_OK);
    json_decref(msg);

    /* A message built without the key (as an attacker on the wire would): refused before its
     * JSON is used. */
    tt_mchan forged;
    uint8_t wrong[32];
    memcpy(wrong, key, 32);
    wrong[0] ^= 1;
    tt_mchan_init(&forged, sv[0], false);
    tt_mchan_seal(&forged, wrong);
    forged.sent = client.sent;
    assert_int_equal(tt_mproto_send(&forged, "{\"op\":\"measure\"}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_ERR_AUTH);
    assert_null(msg);
    assert_non_null(strstr(err.msg, "failed its authentication check"));

    /* A replay: the same message number again. */
    tt_mchan_seal(&client, key);
    tt_mchan_seal(&srv, key);
    assert_int_equal(tt_mproto_send(&client, "{\"op\":\"have\"}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_OK);
    json_decref(msg);
    client.sent = 0;
    assert_int_equal(tt_mproto_send(&client, "{\"op\":\"have\"}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_ERR_AUTH);

    /* A reflection: the server's own message sent back to it. */
    tt_mchan_seal(&client, key);
    tt_mchan_seal(&srv, key);
    tt_mchan mirror;
    tt_mchan_init(&mirror, sv[0], true); /* writes as the server would */
    tt_mchan_seal(&mirror, key);
    assert_int_equal(tt_mproto_send(&mirror, "{\"op\":\"result\"}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_ERR_AUTH);

    /* A blob altered in transit: the JSON passes, the blob does not. */
    tt_mchan_seal(&client, key);
    tt_mchan_seal(&srv, key);
    char text[] = "{\"op\":\"put\"}";
    uint8_t raw[16 + sizeof(text) - 1 + 32 + sizeof(blob) + 32];
    int pv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, pv), 0);
    tt_mchan capture;
    tt_mchan_init(&capture, pv[0], false);
    tt_mchan_seal(&capture, key);
    assert_int_equal(tt_mproto_send(&capture, text, blob, sizeof(blob), &err), TT_OK);
    assert_true(tt_read_all(pv[1], raw, sizeof(raw)));
    raw[16 + sizeof(text) - 1 + 32 + 3] ^= 0x20; /* one bit of the blob */
    assert_true(tt_write_all(sv[0], raw, sizeof(raw)));
    assert_int_equal(tt_mproto_recv(&srv, &msg, &bl, &err), TT_OK);
    json_decref(msg);
    assert_int_equal(tt_mproto_recv_blob(&srv, bl, -1, &hash, &err), TT_ERR_AUTH);
    assert_non_null(strstr(err.msg, "a blob failed its authentication check"));
    close(pv[0]);
    close(pv[1]);
    close(sv[0]);
    close(sv[1]);
}

/* ---- the farm with a key ---- */

static bool start_tracker(tt_proc *p, const char *key_file, const char *extra, int *port)
{
    char db[300], rest[128];
    snprintf(db, sizeof(db), "%s/farm.db", workdir);
    char *argv[] = {TT_BIN "/tvm-tracker", "--port",         "0",           "--db", db, "--quiet",
                    "--auth-key-file",     (char *)key_file, (char *)extra, NULL};
    if (!tt_proc_start(p, argv) ||
        !tt_proc_wait_line(p, "listening on 127.0.0.1:", rest, sizeof(rest), 10))
        return false;
    *port = atoi(rest);
    return true;
}

static bool start_server(tt_proc *p, const char *key_file, const char *log_name, int *port)
{
    char tr[64], cache[300], log[300], rest[64];
    snprintf(tr, sizeof(tr), "127.0.0.1:%d", tracker_port);
    snprintf(cache, sizeof(cache), "%s/cache", workdir);
    snprintf(log, sizeof(log), "%s/%s", workdir, log_name);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    int saved = dup(2);
    dup2(fd, 2);
    char *argv[] = {TT_BIN "/tvm-rpc-server",
                    "--tracker",
                    tr,
                    "--key",
                    "sec",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--cache",
                    cache,
                    "--no-opencl",
                    "--auth-key-file",
                    (char *)key_file,
                    NULL};
    bool ok = tt_proc_start(p, argv);
    dup2(saved, 2);
    close(saved);
    close(fd);
    return ok && tt_proc_wait_line(p, "listening on 127.0.0.1:", rest, sizeof(rest), 10) &&
           (*port = atoi(rest)) > 0;
}

static bool file_has(const char *name, const char *needle)
{
    char path[300], buf[1 << 15];
    snprintf(path, sizeof(path), "%s/%s", workdir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, needle) != NULL;
}

/* SUMMARY through an authenticated connection. */
static bool summary_with(const char *key_file, char *out, size_t n)
{
    tt_auth_keyring ring;
    tt_errbuf err = {{0}};
    if (tt_auth_load(key_file, &ring, &err))
        return false;
    tt_tracker_conn c;
    if (tt_tracker_connect("127.0.0.1", tracker_port, 5, &ring, &c, &err))
        return false;
    char *reply = NULL;
    tt_status s = tt_tracker_call(&c, "[6]", &reply, &err);
    tt_tracker_close(&c);
    if (s)
        return false;
    snprintf(out, n, "%s", reply);
    free(reply);
    return true;
}

static bool wait_free(const char *key_file, int want, double timeout_s)
{
    char pattern[64], text[1 << 14];
    snprintf(pattern, sizeof(pattern), "\"sec\": {\"free\": %d,", want);
    for (int i = 0; i < (int)(timeout_s * 20); i++) {
        if (summary_with(key_file, text, sizeof(text)) && strstr(text, pattern))
            return true;
        usleep(50000);
    }
    return false;
}

static int records(const char *db)
{
    char cmd[600], text[4096];
    snprintf(cmd, sizeof(cmd), "%s/tvm-db stats --db %s --json 2>/dev/null", TT_BIN, db);
    if (run(cmd, text, sizeof(text)))
        return 0; /* no database yet */
    char *at = strstr(text, "\"records\": ");
    return at ? atoi(at + 11) : -1;
}

static int farm_setup(void **state)
{
    (void)state;
    /* Mid-rotation rings: the tracker proves with A, the device with B. */
    if (!start_tracker(&tracker, ring_ab, NULL, &tracker_port) ||
        !start_server(&server, ring_ba, "server.log", &server_port))
        return -1;
    return wait_free(ring_ab, 1, 15) ? 0 : -1;
}

static int farm_teardown(void **state)
{
    (void)state;
    if (server.pid > 0)
        tt_proc_stop(&server);
    if (tracker.pid > 0)
        tt_proc_stop(&tracker);
    server.pid = tracker.pid = 0;
    return 0;
}

#define TUNE_ARGS                                                                                  \
    "run --workload matmul:M=16,N=16,K=16 --trials 4 --strategy random --target "                  \
    "'llvm -num-cores=1' --tracker 127.0.0.1:%d --key sec --device-wait 20 --db %s"

static void tuning_with_the_key(void **state)
{
    (void)state;
    char db[300], cmd[1200], out[1 << 14];
    snprintf(db, sizeof(db), "%s/run.db", workdir);
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune " TUNE_ARGS " --auth-key-file %s 2>&1", TT_BIN,
             tracker_port, db, ring_ab);
    int rc = run(cmd, out, sizeof(out));
    if (rc)
        print_error("%s\n", out);
    assert_int_equal(rc, 0);
    assert_int_equal(records(db), 4);
    /* the same through the environment variable */
    snprintf(cmd, sizeof(cmd),
             "TVM_TUNE_AUTH_KEY_FILE=%s %s/tvm-tune " TUNE_ARGS " --trials 6 2>&1", ring_ba, TT_BIN,
             tracker_port, db);
    assert_int_equal(run(cmd, out, sizeof(out)), 0);
    assert_int_equal(records(db), 6);
    assert_false(file_has("server.log", "authentication failed"));
}

static void tuning_without_the_key_is_refused(void **state)
{
    (void)state;
    char db[300], cmd[1200], out[1 << 14];
    snprintf(db, sizeof(db), "%s/refused.db", workdir);
    /* no key: the tracker says what it needs */
    snprintf(cmd, sizeof(cmd), "env -u TVM_TUNE_AUTH_KEY_FILE %s/tvm-tune " TUNE_ARGS " 2>&1",
             TT_BIN, tracker_port, db);
    assert_int_not_equal(run(cmd, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "requires the farm's key"));
    assert_int_equal(records(db), 0);
    /* another key: the tracker's proof does not check out */
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune " TUNE_ARGS " --auth-key-file %s 2>&1", TT_BIN,
             tracker_port, db, key_c);
    assert_int_not_equal(run(cmd, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "did not prove the farm's key"));
    assert_int_equal(records(db), 0);
    /* the job commands too */
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune jobs --tracker 127.0.0.1:%d --auth-key-file %s 2>&1",
             TT_BIN, tracker_port, key_c);
    assert_int_equal(run(cmd, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "did not prove the farm's key"));
}

/* Raw bytes without the key: the tracker answers with the reason and closes. */
static void tracker_refuses_strangers(void **state)
{
    (void)state;
    static const char *const msgs[] = {"[6]", "[5, {\"key\": \"server:sec\"}]",
                                       "[100, {\"workload\": \"x\"}]", "[105, \"proof\", \"00\"]"};
    for (size_t i = 0; i < sizeof(msgs) / sizeof(msgs[0]); i++) {
        int fd = tt_net_tracker(tracker_port);
        assert_true(fd >= 0);
        assert_true(tt_net_send_frame(fd, msgs[i]));
        char reply[512];
        assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
        assert_non_null(strstr(reply, i < 3 ? "requires the farm's key" : "authentication failed"));
        assert_true(tt_net_closed(fd));
        close(fd);
    }
    /* a hello with the wrong key's proof */
    tt_auth_keyring c;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_auth_load(key_c, &c, &err), TT_OK);
    tt_tracker_conn conn;
    assert_int_equal(tt_tracker_connect("127.0.0.1", tracker_port, 5, &c, &conn, &err),
                     TT_ERR_AUTH);
    assert_non_null(strstr(err.msg, "did not prove the farm's key"));
}

/* A ticket for the device, as an authenticated client gets it (REQUEST), then TVM's handshake
 * with it: the session is open to our hello. */
static int device_session(void)
{
    tt_auth_keyring ring;
    tt_errbuf err = {{0}};
    assert_int_equal(tt_auth_load(ring_ab, &ring, &err), TT_OK);
    tt_tracker_conn c;
    assert_int_equal(tt_tracker_connect("127.0.0.1", tracker_port, 5, &ring, &c, &err), TT_OK);
    char *reply = NULL;
    assert_int_equal(tt_tracker_call(&c, "[4, \"sec\", \"\", 0]", &reply, &err), TT_OK);
    tt_tracker_close(&c);
    json_t *r = NULL;
    assert_int_equal(tt_json_parse(reply, strlen(reply), &r, &err), TT_OK);
    free(reply);
    char key[300];
    snprintf(key, sizeof(key), "client:%s -timeout=5 " TT_MPROTO_TOKEN,
             json_string_value(json_array_get(json_array_get(r, 1), 2)));
    json_decref(r);
    uint8_t code[4], lb[4];
    char skey[4096];
    int fd = tt_net_rpc_handshake(server_port, key, code);
    assert_true(fd >= 0);
    assert_int_equal(tt_get_le32(code), TT_RPC_SUCCESS);
    assert_true(tt_read_all(fd, lb, 4));
    assert_true(tt_read_all(fd, skey, (size_t)tt_get_le32(lb)));
    return fd;
}

static void device_refuses_strangers(void **state)
{
    (void)state;
    tt_errbuf err = {{0}};
    json_t *msg = NULL;
    uint64_t blob = 0;
    int fd = device_session();
    tt_mchan ch;
    tt_mchan_init(&ch, fd, false);
    assert_int_equal(tt_mproto_send(&ch, "{\"op\":\"hello\",\"proto\":1}", NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&ch, &msg, &blob, &err), TT_OK);
    assert_string_equal(json_string_value(json_object_get(msg, "op")), "error");
    assert_non_null(
        strstr(json_string_value(json_object_get(msg, "message")), "requires the farm's key"));
    json_decref(msg);
    assert_true(tt_net_closed(fd));
    close(fd);

    /* with a nonce, skipping the proof straight to a measurement */
    fd = device_session();
    tt_mchan_init(&ch, fd, false);
    char hello[200], hex[TT_AUTH_HEX];
    uint8_t cn[32];
    tt_auth_nonce(cn);
    tt_auth_hex(cn, hex);
    snprintf(hello, sizeof(hello), "{\"op\":\"hello\",\"proto\":1,\"nonce\":\"%s\"}", hex);
    assert_int_equal(tt_mproto_send(&ch, hello, NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&ch, &msg, &blob, &err), TT_OK);
    assert_string_equal(json_string_value(json_object_get(msg, "op")), "hello");
    assert_non_null(json_object_get(msg, "auth"));
    json_decref(msg);
    assert_int_equal(tt_mproto_send(&ch, "{\"op\":\"measure\",\"lib\":\"x\"}", NULL, 0, &err),
                     TT_OK);
    assert_int_equal(tt_mproto_recv(&ch, &msg, &blob, &err), TT_OK);
    assert_non_null(
        strstr(json_string_value(json_object_get(msg, "message")), "authenticate (auth) first"));
    json_decref(msg);
    assert_true(tt_net_closed(fd));
    close(fd);

    /* with a proof made with another key */
    fd = device_session();
    tt_mchan_init(&ch, fd, false);
    assert_int_equal(tt_mproto_send(&ch, hello, NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&ch, &msg, &blob, &err), TT_OK);
    uint8_t sn[32], proof[32];
    assert_true(tt_auth_unhex(
        json_string_value(json_object_get(json_object_get(msg, "auth"), "nonce")), sn));
    json_decref(msg);
    tt_auth_keyring c;
    assert_int_equal(tt_auth_load(key_c, &c, &err), TT_OK);
    tt_auth_prove(&c, TT_AUTH_MEASURE_CLIENT, cn, sn, proof);
    char text[200];
    tt_auth_hex(proof, hex);
    snprintf(text, sizeof(text), "{\"op\":\"auth\",\"proof\":\"%s\"}", hex);
    assert_int_equal(tt_mproto_send(&ch, text, NULL, 0, &err), TT_OK);
    assert_int_equal(tt_mproto_recv(&ch, &msg, &blob, &err), TT_OK);
    assert_non_null(
        strstr(json_string_value(json_object_get(msg, "message")), "authentication failed"));
    json_decref(msg);
    assert_true(tt_net_closed(fd));
    close(fd);
    assert_true(file_has("server.log", "authentication failed (wrong key)"));
}

/* A device with another key cannot register: it is never handed out. */
static void device_with_another_key_cannot_join(void **state)
{
    (void)state;
    tt_proc rogue;
    int port = 0;
    assert_true(start_server(&rogue, key_c, "rogue.log", &port));
    bool said = false; /* no assertion until the rogue is stopped */
    for (int i = 0; i < 100 && !said; i++) {
        said = file_has("rogue.log", "did not prove the farm's key");
        usleep(50000);
    }
    char text[1 << 14] = "";
    bool read = summary_with(ring_ab, text, sizeof(text));
    tt_proc_stop(&rogue);
    assert_true(said);
    assert_true(read);
    assert_non_null(strstr(text, "\"sec\": {\"free\": 1,")); /* still only the good device */
}

/* A job on the tracker measures through the same authenticated links. */
static void job_with_the_key(void **state)
{
    (void)state;
    char cmd[1200], out[1 << 14];
    snprintf(cmd, sizeof(cmd),
             "%s/tvm-tune submit --tracker 127.0.0.1:%d --key sec --workload "
             "matmul:M=8,N=8,K=8 --trials 3 --strategy random --target 'llvm -num-cores=1' "
             "--auth-key-file %s --watch 2>&1",
             TT_BIN, tracker_port, ring_ba);
    int rc = run(cmd, out, sizeof(out));
    if (rc)
        print_error("%s\n", out);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "done"));
}

/* --allow-tvm: TVM's own codes work without the key, ours do not. */
static void allow_tvm_peers(void **state)
{
    (void)state;
    int port = 0, saved = tracker_port;
    assert_true(start_tracker(&tracker, key_a, "--allow-tvm", &port));
    int fd = tt_net_tracker(port);
    assert_true(fd >= 0);
    char reply[4096];
    assert_true(tt_net_send_frame(fd, "[5, {\"key\": \"server:tvm\", \"addr\": [null, 9091]}]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    assert_true(tt_net_send_frame(fd, "[3, \"tvm\", [9091, \"tvm:1\"], null]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_string_equal(reply, "0");
    assert_true(tt_net_send_frame(fd, "[6]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_non_null(strstr(reply, "\"authenticated\": false"));
    assert_true(tt_net_send_frame(fd, "[102]"));
    assert_true(tt_net_recv_frame(fd, reply, sizeof(reply)));
    assert_non_null(strstr(reply, "requires the farm's key"));
    assert_true(tt_net_closed(fd));
    close(fd);
    tracker_port = port;
    assert_true(summary_with(key_a, reply, sizeof(reply)));
    tracker_port = saved;
}

/* Without a key the daemons stay on loopback unless told --insecure. */
static void no_key_means_loopback(void **state)
{
    (void)state;
    char cmd[600], out[4096];
    snprintf(cmd, sizeof(cmd),
             "env -u TVM_TUNE_AUTH_KEY_FILE %s/tvm-tracker --host 0.0.0.0 --port 0 --no-jobs 2>&1",
             TT_BIN);
    assert_int_equal(run(cmd, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "refusing to listen on 0.0.0.0 without a key"));
    snprintf(cmd, sizeof(cmd),
             "env -u TVM_TUNE_AUTH_KEY_FILE %s/tvm-rpc-server --host 0.0.0.0 --port 0 --no-opencl "
             "2>&1",
             TT_BIN);
    assert_int_equal(run(cmd, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "refusing to listen on 0.0.0.0 without a key"));
    /* an unreadable-by-others rule on the daemons' key file too */
    char path[300];
    snprintf(path, sizeof(path), "%s/open.key", workdir);
    char a[80];
    read_key_line(key_a, a);
    write_file(path, a, 0644);
    snprintf(cmd, sizeof(cmd), "%s/tvm-tracker --auth-key-file %s --port 0 2>&1", TT_BIN, path);
    assert_int_equal(run(cmd, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "chmod 600"));
    snprintf(cmd, sizeof(cmd), "%s/tvm-tracker --allow-tvm --port 0 2>&1", TT_BIN);
    assert_int_equal(run(cmd, out, sizeof(out)), 2);
    assert_non_null(strstr(out, "--allow-tvm needs --auth-key-file"));
}

static int setup(void **state)
{
    (void)state;
    unsetenv("TVM_TUNE_AUTH_KEY_FILE");
    snprintf(workdir, sizeof(workdir), "/tmp/tt-auth-XXXXXX");
    if (!mkdtemp(workdir))
        return -1;
    snprintf(key_a, sizeof(key_a), "%s/a.key", workdir);
    snprintf(key_b, sizeof(key_b), "%s/b.key", workdir);
    snprintf(key_c, sizeof(key_c), "%s/c.key", workdir);
    snprintf(ring_ab, sizeof(ring_ab), "%s/ab.key", workdir);
    snprintf(ring_ba, sizeof(ring_ba), "%s/ba.key", workdir);
    char cmd[400], out[256], a[80], b[80], text[200];
    /* the command users run, for two of them */
    snprintf(cmd, sizeof(cmd), "%s/tvm-tune keygen %s", TT_BIN, key_a);
    if (run(cmd, out, sizeof(out)) || !strstr(out, "wrote a new farm key"))
        return -1;
    tt_errbuf err = {{0}};
    if (tt_auth_keygen(key_b, &err) || tt_auth_keygen(key_c, &err))
        return -1;
    read_key_line(key_a, a);
    read_key_line(key_b, b);
    snprintf(text, sizeof(text), "%s # new\n%s # old\n", a, b);
    write_file(ring_ab, text, 0600);
    snprintf(text, sizeof(text), "%s\n%s\n", b, a);
    write_file(ring_ba, text, 0600);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", workdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(key_files),
        cmocka_unit_test(proofs_and_rotation),
        cmocka_unit_test(sealed_channel),
        cmocka_unit_test_setup_teardown(tuning_with_the_key, farm_setup, farm_teardown),
        cmocka_unit_test_setup_teardown(tuning_without_the_key_is_refused, farm_setup,
                                        farm_teardown),
        cmocka_unit_test_setup_teardown(tracker_refuses_strangers, farm_setup, farm_teardown),
        cmocka_unit_test_setup_teardown(device_refuses_strangers, farm_setup, farm_teardown),
        cmocka_unit_test_setup_teardown(device_with_another_key_cannot_join, farm_setup,
                                        farm_teardown),
        cmocka_unit_test_setup_teardown(job_with_the_key, farm_setup, farm_teardown),
        cmocka_unit_test_teardown(allow_tvm_peers, farm_teardown),
        cmocka_unit_test(no_key_means_loopback),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
