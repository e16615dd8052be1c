/* Fuzz target: workload text (operator library and the TE language).  Whatever the input, the
 * parser returns a status; on success the canonical key parses back to itself. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule/schedule.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 4096)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = 0;
    tt_workload *w = NULL;
    tt_errbuf err;
    if (tt_workload_parse(text, &w, &err) == TT_OK) {
        tt_workload *again = NULL;
        if (tt_workload_parse(w->key, &again, &err) != TT_OK || strcmp(again->key, w->key) != 0)
            abort();
        tt_workload_free(again);
        tt_workload_free(w);
    }
    free(text);
    return 0;
}
