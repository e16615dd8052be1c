/* Private to tuner/: what the files of the tuning loop share (tune.c and tune_*.c). */
#ifndef TT_TUNER_TUNE_INT_H
#define TT_TUNER_TUNE_INT_H

#include <jansson.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>

#include "../codegen/codegen.h"
#include "../costmodel/costmodel.h"
#include "../costmodel/features.h"
#include "../db/db.h"
#include "../rpc/device_info.h"
#include "../rpc/measure_proto.h"
#include "tune.h"

/* ---- the farm: devices of a tracker's key, one session per batch ---- */

#define FARM_MAX_DEVICES 16

typedef struct {
    const tt_remote_options *o;
    int ndevices;                         /* sessions measured in parallel */
    tt_remote *session[FARM_MAX_DEVICES]; /* one per measuring thread, per batch */
    char device[512];     /* the fingerprint of the first device (resume and records) */
    tt_cl_device_info cl; /* OpenCL targets: the first device's OpenCL device */
    char key[128];
    int64_t losses, quarantined;
    double wait_s;
    pthread_mutex_t mu; /* losses, quarantined, wait_s, the log, the canaries */
    FILE *log;
    volatile sig_atomic_t *stop;
    double started; /* wall clock: a sick device's records of this run are marked suspect */
} farm;

typedef struct compile_pool compile_pool; /* below */

/* ---- one workload's task ---- */

typedef struct {
    const tt_tune_options *o;
    tt_workload *w;
    tt_space space;
    char space_sig[40]; /* identity of the template space, kept with each record's index */
    tt_target target;
    tt_vector_isa isa; /* CPU targets: what bounds the template's register tiles */
    /* How candidates are compiled: measured here on x86-64, as unlinked objects the measuring
     * child loads in memory (no linker per candidate); on the farm, as shared objects. */
    tt_codegen_options codegen;
    const char *target_text;
    bool gpu;            /* an OpenCL target: kernels are OpenCL artifacts */
    tt_gpu_limits lim;   /* what the device allows one kernel (gpu) */
    int warp;            /* gpu: threads the naive binding and the sketches take as a warp: 32,
                          * or fewer where the device allows fewer a work-group */
    bool overlap_builds; /* measure each candidate while later ones build (tt_tune_options) */
    char device[512];
    char dir[256];
    farm *farm;         /* NULL: measure on this machine */
    compile_pool *pool; /* OpenCL measured here: the run's compile threads (NULL: per batch) */
    char canary[512];   /* farm: the naive schedule, compiled, that tells a sick device ("" none) */
    tt_db *db;
    FILE *log;
    /* inputs and reference outputs, in parameter order */
    int nparams, ninputs;
    void *data[64];
    tt_measure_buffer bufs[64];
    /* configs measured so far (hashes of their step text), sorted */
    uint64_t *seen;
    size_t nseen, capseen;
    int64_t total, measured, errors;
    /* resume: earlier records timed with another cache flush mode (or before records said),
     * and the first such mode */
    int64_t other_flush;
    char other_flush_name[32];
    /* how this run's records say they were flushed: the mode's name, or in the network mode
     * tt_measure_network_flush_name's ("" when a farm's devices decide, any network form):
     * records of different shares do not compare */
    char flush_name[32];
    double build_s;   /* compile time of this run's candidates */
    double measure_s; /* their measurements' wall time (tt_measure_result.run_s) */
    double best_s, naive_s;
    char *best_config;
    uint64_t grid_next;
    /* xgb, ga, evo: starting points measured first (the template's default and the best template
     * configs of similar workloads, mapped to this space) */
    uint64_t seeds[24];
    int nseeds, seed_next;
    tt_rng rng;
    /* this run's measurements in index form, for the model and the genetic algorithm */
    uint64_t *run_idx;
    double *run_score; /* throughput, 0 for errors */
    int nrun, caprun;
    tt_costmodel *model;
    /* genetic algorithm: the generation waiting to be measured */
    uint64_t *gen;
    int ngen, gen_next;
    uint64_t elites[3];
    double elite_score[3];
    int nelites;
    double t_start;
    int64_t t_start_total;
    /* evolutionary search: sketches, measured programs, the current round's plan */
    tt_sketch_space sketch;
    bool have_sketch;
    int gpu_starts_picked; /* fixed GPU tilings offered so far, measured first (tt__tune_pick) */
    tt_evo_history hist;
    char **plan;
    int nplan, plan_next;
    int evo_fd, evo_want; /* a search round in flight: its pipe (-1: none) */
    pid_t evo_pid;
    int evo_programs; /* measured programs the round in flight trains on */
    void *preload;    /* a saved model trained on exactly the resumed history */
    size_t preload_len;
    /* measuring */
    struct candidate *cands;
    int batch;
    bool exhausted;
    double *sched_hist; /* best latency after each scheduler round */
    int sched_cap;
} task;

/* Candidate index meaning "the config is a step list" (sketch-based strategies). */
#define STEPS_INDEX (UINT64_MAX - 1)

/* ---- one round: pick, compile in parallel, measure, record ---- */

typedef struct candidate {
    task *t;
    uint64_t index;
    char *config;
    char so[512];
    int error_no;
    char error_text[512];
    double build_s;
    tt_measure_result res;
    char device[512]; /* farm: the fingerprint of the device that measured it */
    char host[300];   /* farm: its address ("ip:port"), in the record's extra */
    bool compiled, measured, stored;
    int requeued; /* farm: times moved off a device found sick */
    float *rows;  /* per-store features (evolutionary search) */
    int nrows;
    uint64_t program;   /* tt_evo_program_hash of its lowered program (evolutionary search), 0 */
    tt_layout *layouts; /* per parameter, when some constant input is passed packed (LR) */
    /* GPU: which fixed tiling it is (pick_gpu_starts: "default", "large", ...), in the record's
     * extra as "start"; NULL for the others */
    const char *start;
} candidate;

/* A batch in flight: compile threads take candidates in order; with a farm, one measuring
 * thread per device takes them in the same order as soon as they are compiled (builds pipelined
 * with measurements). */
typedef struct {
    candidate *c;
    int n;
    int next, measure_next;
    pthread_mutex_t mu;
    pthread_cond_t compiled;
    tt_measure_options mo; /* with this batch's deadline */
    tt_status failure;     /* no device: stop measuring, keep what was measured */
    tt_errbuf err;
    int retry[256]; /* farm: candidates taken off a sick device, measured first */
    int nretry;
} compile_queue;

/* Compile threads that last a whole run (OpenCL measured here): each keeps a builder process with
 * the device's context (tt_measure_keep_builder), which a thread per batch would lose with every
 * batch.  A batch is posted to all of them; each drains the queue and reports done. */
struct compile_pool {
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    compile_queue *q; /* the batch being compiled */
    uint64_t gen;     /* bumped with each batch */
    int nthreads, busy;
    bool quit;
    pthread_t th[64];
};

/* Starts `nthreads` compile threads (at most 64; none when threads cannot be made: the batches
 * then make their own). */
void tt__compile_pool_start(compile_pool *p, int nthreads);
/* Ends the threads, each releasing its builder. */
void tt__compile_pool_stop(compile_pool *p);

/* A farm measuring thread: the batch and its device slot. */
typedef struct {
    compile_queue *q;
    int slot;
} farm_worker_arg;

/* tune_task.c: a task, its history and its records */
bool tt__tune_seen_has(const task *t, uint64_t h);
void tt__tune_seen_add(task *t, uint64_t h);
void tt__tune_note_result(task *t, const char *config, double fastest, int error_no);
void tt__tune_run_add(task *t, uint64_t index, double thr);
void tt__tune_history_add(task *t, const char *config, const float *rows, int nrows, double thr,
                          int group, uint64_t program);
tt_status tt__tune_task_open(const tt_tune_options *o, const char *wtext, tt_db *db, farm *fm,
                             const tt_cl_device_info *cl, FILE *log, task **out, tt_errbuf *err);
void tt__tune_task_close(task *t, const char *wtext, tt_tune_summary *sum);

/* tune_round.c: one round */
void tt__tune_compile_one(candidate *c);
/* The buffers to measure candidate c with: the task's, except constant inputs that c reads
 * packed (LR), packed from the task's data into *scratch (free it after; NULL when none). */
const tt_measure_buffer *tt__tune_candidate_bufs(task *t, const candidate *c,
                                                 tt_measure_buffer *bufs, void **scratch);
void tt__tune_finish_result(task *t, candidate *c, const tt_measure_options *mo);
void tt__tune_store_now(task *t, candidate *c);
int tt__tune_pick(task *t, candidate *c, int want);
void tt__tune_progress(task *t, bool final);
tt_status tt__tune_round_trip(task *t, candidate *c, int n, tt_errbuf *err);

/* tune_template.c: xgb and ga (plans run in a child process: spawn_search / reap_search) */
int tt__tune_spawn_search(task *t, void (*child)(task *, int, void *), void *arg, pid_t *pid);
void tt__tune_reap_search(int fd, pid_t pid);
int tt__tune_model_plan(task *t, uint64_t *out, int n);
void tt__tune_ga_breed(task *t, int pop);
void tt__tune_load_seeds(task *t, int cores);

/* tune_evo.c: the evolutionary search and transfer */
void tt__tune_evo_start(task *t, int want);
void tt__tune_evo_finish(task *t);
void tt__tune_evo_preload(task *t);
void tt__tune_load_transfer(task *t);

/* tune_farm.c: the farm */
void tt__tune_farm_release(farm *f, int k);
void *tt__tune_farm_worker(void *arg);
tt_status tt__tune_farm_check(farm *f, const tt_target *t, tt_errbuf *err);

#endif
