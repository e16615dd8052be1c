/* Fuzz target: the measurement protocol as a server reads it (docs/rpc-protocol.md): messages
 * ("TTM1", JSON length, blob length, JSON, blob) from a pipe until the stream ends or is refused,
 * each message's JSON decoded the way the server and the client decode it (measurement options,
 * results, device capabilities, artifact ids, dtypes).  Hostile lengths must be refused before
 * anything is allocated for them; nothing may crash, leak or hang.  Inputs whose length is odd
 * are read by a sealed channel (a session key known to the target): MACs that fail must end the
 * stream before the JSON is looked at. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rpc/device_info.h"
#include "rpc/measure_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 60000) /* all of it must fit in the pipe before reading starts */
        return 0;
    int fds[2];
    if (pipe(fds))
        return 0;
    if (size && write(fds[1], data, size) != (ssize_t)size) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    close(fds[1]);
    int sink = open("/dev/null", O_WRONLY);
    tt_mchan ch;
    tt_mchan_init(&ch, fds[0], true);
    if (size & 1) {
        uint8_t key[TT_AUTH_KEY_BYTES];
        memset(key, 0x5a, sizeof(key));
        tt_mchan_seal(&ch, key);
    }
    for (int msgs = 0; msgs < 64; msgs++) {
        json_t *msg = NULL;
        uint64_t blob = 0;
        tt_errbuf err;
        if (tt_mproto_recv(&ch, &msg, &blob, &err) != TT_OK)
            break;
        tt_measure_options o = {0};
        tt_measure_options_from_json(json_object_get(msg, "options"), &o);
        tt_measure_result res;
        tt_measure_result_from_json(msg, &res, &err);
        tt_device_info dev;
        tt_device_info_from_json(json_object_get(msg, "device"), &dev);
        const char *id = json_string_value(json_object_get(msg, "id"));
        uint64_t h, len;
        if (id)
            tt_artifact_id_parse(id, &h, &len);
        const json_t *args = json_object_get(msg, "args");
        for (size_t i = 0; json_is_array(args) && i < json_array_size(args); i++) {
            tt_elem e;
            const char *dt = json_string_value(json_object_get(json_array_get(args, i), "dtype"));
            if (dt)
                tt_elem_parse(dt, &e);
        }
        json_decref(msg);
        uint64_t hash;
        if (blob && tt_mproto_recv_blob(&ch, blob, sink, &hash, &err) != TT_OK)
            break;
    }
    if (sink >= 0)
        close(sink);
    close(fds[0]);
    return 0;
}
