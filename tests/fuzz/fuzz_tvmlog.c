/* Fuzz target: one TVM log line.  Whatever the input, parsing returns a status; a parsed record
 * written back in its own format must parse again to the same record text. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "db/db.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 16384)
        return 0;
    char *line = malloc(size + 1);
    if (!line)
        return 0;
    memcpy(line, data, size);
    line[size] = 0;
    tt_arena arena;
    tt_arena_init(&arena, 4096);
    tt_db_record r;
    tt_errbuf err;
    if (tt_log_parse_line(line, &arena, &r, &err) == TT_OK) {
        /* Write it back the way export does and read it again. */
        tt_db_row row = {0};
        row.workload = (char *)r.workload;
        row.target = (char *)r.target;
        row.config = (char *)r.config;
        row.config_kind = r.config_kind;
        row.costs = (double *)r.costs;
        row.ncosts = r.ncosts;
        row.error_no = r.error_no;
        row.total_s = r.total_s;
        row.timestamp = r.timestamp;
        row.extra = (char *)r.extra;
        tt_strbuf sb = {0};
        if (tt_log_format_row(&row, TT_LOG_AUTO, &sb) == TT_OK) {
            tt_db_record again;
            if (tt_log_parse_line(tt_strbuf_cstr(&sb), &arena, &again, &err) != TT_OK ||
                strcmp(again.workload, r.workload) || strcmp(again.config, r.config) ||
                again.error_no != r.error_no)
                abort();
        }
        tt_strbuf_free(&sb);
    }
    tt_arena_free(&arena);
    free(line);
    return 0;
}
