/* Pieces of the tvm-tune command shared by its source files (not a library interface). */
#ifndef TT_TUNER_TVM_TUNE_CLI_H
#define TT_TUNER_TVM_TUNE_CLI_H

#include "../graph/net.h"
#include "tune.h"

#define TT_CLI_MAX_WORKLOADS TT_TUNE_MAX_TASKS
#define TT_CLI_MAX_SHAPES    16

/* The options of `run` and `submit`: workloads, search, measurement, farm. */
typedef struct {
    tt_tune_options o;
    tt_remote_options remote;
    char remote_host[256];
    bool use_remote, watch;
    const char *workloads[TT_CLI_MAX_WORKLOADS];
    double weights[TT_CLI_MAX_WORKLOADS];
    const char *labels[TT_CLI_MAX_WORKLOADS];
    int nw;
    /* --model: the network whose tasks are the workloads (kept while they are tuned) */
    const char *model;
    const char *shapes[TT_CLI_MAX_SHAPES];
    int nshapes;
    tt_net_layout layout;
    int winograd; /* --winograd: 1 on, 0 off, -1 the target's default */
    tt_graph *graph;
    tt_net *net;
} tune_args;

/* Parses them (getopt); returns -1 when the command should go on, else its exit code. */
int parse_tune_args(const char *cmd, int argc, char **argv, tune_args *a);
void free_tune_args(tune_args *a);

/* Imports `path` (--shape overrides) and partitions it into tasks for `target` under `layout`,
 * the 3x3 convolutions as Winograd's as `winograd` says (tt_net_options_for: -1 the target's
 * default, 1 on, 0 off); prints the error and returns false on failure. */
bool cli_load_model(const char *cmd, const char *path, const char *const *shapes, int nshapes,
                    const char *target, tt_net_layout layout, int winograd, tt_graph **g,
                    tt_net **net);
/* --winograd on|off: *mode 1 or 0; prints the error and returns false for anything else. */
bool cli_parse_winograd(const char *cmd, const char *arg, int *mode);

/* The farm's key of this tvm-tune process: --auth-key-file, else $TVM_TUNE_AUTH_KEY_FILE, else
 * none.  cli_load_auth prints the error and returns false when the file is unusable. */
bool cli_load_auth(const char *cmd, const char *path);
const tt_auth_keyring *cli_auth(void);

/* tvm-tune submit, and status / watch / cancel / jobs (tvm_tune_jobs.c). */
int cmd_submit(int argc, char **argv);
int cmd_job(const char *cmd, int argc, char **argv);

/* `lower --time`: compiles `prog` (the lowered `w`) for this CPU and times it in a measuring child
 * with random inputs (seed), printing the median, the fastest and GFLOPS; returns the exit code. */
int cli_time_program(const tt_workload *w, const tt_program *prog, const char *target_text,
                     const tt_measure_options *mo, uint64_t seed);

#endif
