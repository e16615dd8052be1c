/* tvm-compile: the best records of the database -> a library and header (docs/compile.md). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../graph/net.h"
#include "../tuner/space.h"
#include "compile.h"

static void usage(FILE *f)
{
    fprintf(
        f, "usage: tvm-compile --db PATH [--target T] [--device FINGERPRINT] -o OUTDIR/NAME\n"
           "                   --workload W --symbol SYM [--workload W2 --symbol SYM2 ...]\n"
           "                   [--strict] [--no-fallback] [--quiet]\n"
           "       tvm-compile [--db PATH] [--target T] [--device FP] -o OUTDIR/NAME\n"
           "                   --model M.onnx [--shape NAME=1x3x224x224 ...] [--strict] ...\n"
           "\n"
           "Builds a library from the fastest schedules in the tuning database: OUTDIR/NAME.a,\n"
           "OUTDIR/NAME.so, OUTDIR/NAME.h (int SYM(inputs..., outputs...) per workload, with\n"
           "the record each came from) and OUTDIR/NAME.pc (pkg-config).  SYM takes every buffer\n"
           "row-major whatever the record; a record that reads a weight packed adds its packed\n"
           "form, SYM_pack_NAME(weight, packed) and SYM_packed(...), named for the layout\n"
           "(docs/compile.md).\n"
           "With --model, the library runs the whole network: int NAME_run(inputs..., outputs...)\n"
           "and NAME_run_workspace(workspace, ...), weights embedded and packed for the tuned\n"
           "kernels, intermediates in one preallocated arena (docs/models.md; tvm-net runs it).\n"
           "NAME_init (optional: the first run does it) copies the weights into the process's\n"
           "memory, where runs read them (TVM_TUNE_WEIGHTS=mapped: where the library is mapped).\n"
           "With --model and --target opencl it runs on an OpenCL device (a GPU): NAME_init\n"
           "builds the kernels and uploads the weights once, NAME_run keeps the activations on\n"
           "the device, NAME_error says what failed, NAME_release frees it (docs/opencl.md).\n"
           "  --db PATH        the tuning database (tvm-tune run --db, tvm-tracker --db): a\n"
           "                   SQLite file or postgresql://[user@]host/db (read-only is enough)\n"
           "  --target T       default llvm (this CPU); 'llvm -mtriple=aarch64-linux-gnu ...'\n"
           "                   builds for a board; opencl builds kernels (or a network) for the\n"
           "                   GPU with a host runtime that runs them through the OpenCL ICD\n"
           "                   loader; 'opencl -max_num_threads=N' keeps every kernel's\n"
           "                   work-group to N work-items (default schedules take up to 256),\n"
           "                   -max_shared_memory_per_block=B its local memory to B bytes (a\n"
           "                   record of another target over it gives way to the default),\n"
           "                   -thread_warp_size=W splits bindings by W (AMD: 64; default 32),\n"
           "                   'opencl -device=mali' stages nothing in local memory; an option\n"
           "                   neither ours nor TVM's is an error\n"
           "  --device FP      only records of this device (the fingerprint tvm-db prints)\n"
           "  --workload W     a workload as tvm-tune takes it, followed by its --symbol\n"
           "  --symbol SYM     the C function's name for the preceding workload\n"
           "  --model M.onnx   an ONNX network (as tvm-tune run --model tuned it); NAME must be\n"
           "                   a C identifier; without --db every task gets the default schedule\n"
           "  --shape N=DIMS   the shape of input N (symbolic dimensions), as for tvm-tune\n"
           "  --layout L       channels-last (default) or model: as the tasks were tuned\n"
           "  --winograd on|off  3x3 convolutions as Winograd's F(4x4 or 2x2, 3x3): by default\n"
           "                   on CPUs where it pays (enough tiles, output channels of 3\n"
           "                   vectors or more), not on OpenCL; on takes every one of enough\n"
           "                   tiles, off none: as the tasks were tuned; off builds from\n"
           "                   records tuned before the rewrite (docs/models.md)\n"
           "  --strict         a workload without a tuned record is an error (default: a warning,\n"
           "                   then the tuned config of the nearest other shape of its operator\n"
           "                   on this target, mapped to its shape, or else the default schedule)\n"
           "  --no-fallback    only records of this target (and device) and workload: no records\n"
           "                   of other devices, of other targets of the family or of similar\n"
           "                   shapes\n"
           "  --quiet          no report lines (warnings still go to stderr); with --model\n"
           "                   a report line per task says where its schedule came from, and\n"
           "                   another one names a CPU task whose vector code gathers loads\n"
           "                   lane by lane or left loops scalar (slow whatever its tiles)\n"
           "Exit status: 0 built, 1 failed (the reason on stderr), 2 bad arguments.\n");
}

/* --model: import, partition, build. */
static int compile_model(const tt_compile_options *ko, const char *model, const char *const *shapes,
                         int nshapes, const tt_net_options *no, bool quiet)
{
    tt_graph_options go = {shapes, nshapes, 0, NULL, 0};
    tt_errbuf err = {{0}};
    tt_graph *g = NULL;
    tt_net *net = NULL;
    if (tt_graph_import_onnx(model, &go, &g, &err) || tt_net_build(g, no, &net, &err)) {
        fprintf(stderr, "tvm-compile: %s\n", err.msg);
        tt_graph_free(g);
        return 1;
    }
    if (!ko->db_path)
        fprintf(stderr,
                "tvm-compile: warning: no --db: every task of %s gets the default "
                "schedule\n",
                model);
    tt_compile_net_options o = {ko->db_path, ko->target, ko->device,      ko->out_prefix,
                                model,       ko->strict, ko->no_fallback, quiet ? NULL : stdout,
                                stderr};
    tt_compile_net_summary sum;
    int rc = 0;
    if (tt_compile_net(&o, net, NULL, &sum, &err)) {
        fprintf(stderr, "tvm-compile: %s\n", err.msg);
        rc = 1;
    } else if (!quiet) {
        printf("%d tasks, %d tuned; weights %.2f MiB embedded (%.2f MiB packed), workspace "
               "%.2f MiB\n",
               sum.tasks, sum.tuned, (double)sum.weight_bytes / 1048576.0,
               (double)sum.packed_bytes / 1048576.0, (double)sum.workspace_bytes / 1048576.0);
        if (sum.estimate_s > 0)
            printf("estimated latency %.4g ms (the records' median samples, %.4g ms from their "
                   "fastest; tvm-net time measures it)\n",
                   sum.estimate_s * 1e3, sum.estimate_fastest_s * 1e3);
        printf("wrote %s.a %s.so %s.h %s.pc\n", ko->out_prefix, ko->out_prefix, ko->out_prefix,
               ko->out_prefix);
    }
    tt_net_free(net);
    tt_graph_free(g);
    return rc;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"db", required_argument, 0, 'd'},
                                         {"target", required_argument, 0, 't'},
                                         {"device", required_argument, 0, 'D'},
                                         {"output", required_argument, 0, 'o'},
                                         {"workload", required_argument, 0, 'w'},
                                         {"symbol", required_argument, 0, 's'},
                                         {"strict", no_argument, 0, 'S'},
                                         {"no-fallback", no_argument, 0, 'F'},
                                         {"quiet", no_argument, 0, 'q'},
                                         {"model", required_argument, 0, 'm'},
                                         {"shape", required_argument, 0, 'x'},
                                         {"layout", required_argument, 0, 'L'},
                                         {"winograd", required_argument, 0, 'g'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    tt_compile_options o;
    memset(&o, 0, sizeof(o));
    o.log = stderr;
    tt_compile_kernel ks[256];
    int nw = 0, ns = 0;
    bool quiet = false;
    int winograd = -1; /* the target's default */
    const char *model = NULL;
    const char *shapes[64];
    int nshapes = 0;
    int c, layout = TT_NET_LAYOUT_CHANNELS_LAST;
    while ((c = getopt_long(argc, argv, "o:hq", opts, NULL)) != -1) {
        switch (c) {
        case 'd': o.db_path = optarg; break;
        case 't': o.target = optarg; break;
        case 'D': o.device = optarg; break;
        case 'o': o.out_prefix = optarg; break;
        case 'w':
            if (nw != ns || nw == 256) {
                fprintf(stderr, "tvm-compile: each --workload needs its --symbol (at most 256)\n");
                return 2;
            }
            ks[nw++].workload = optarg;
            break;
        case 's':
            if (ns + 1 != nw) {
                fprintf(stderr, "tvm-compile: --symbol %s must follow its --workload\n", optarg);
                return 2;
            }
            ks[ns++].symbol = optarg;
            break;
        case 'S': o.strict = true; break;
        case 'F': o.no_fallback = true; break;
        case 'q': quiet = true; break;
        case 'm': model = optarg; break;
        case 'x':
            if (nshapes == 64) {
                fprintf(stderr, "tvm-compile: at most 64 --shape\n");
                return 2;
            }
            shapes[nshapes++] = optarg;
            break;
        case 'L':
            if ((layout = tt_net_layout_parse(optarg)) < 0) {
                fprintf(stderr, "tvm-compile: --layout takes channels-last or model, got '%s'\n",
                        optarg);
                return 2;
            }
            break;
        case 'g':
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "tvm-compile: --winograd takes on or off, got '%s'\n", optarg);
                return 2;
            }
            winograd = !strcmp(optarg, "on");
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (model) {
        if (optind < argc || !o.out_prefix || nw > 0) {
            fprintf(stderr, "tvm-compile: --model takes -o OUTDIR/NAME and no --workload%s%s\n",
                    optind < argc ? "; unexpected argument " : "",
                    optind < argc ? argv[optind] : "");
            usage(stderr);
            return 2;
        }
        tt_net_options no;
        const char *target = o.target ? o.target : "llvm";
        tt_net_options_for(&no, target, tt_space_target_lanes(target), (tt_net_layout)layout,
                           winograd);
        return compile_model(&o, model, shapes, nshapes, &no, quiet);
    }
    if (nshapes || layout != TT_NET_LAYOUT_CHANNELS_LAST || winograd >= 0) {
        fprintf(stderr, "tvm-compile: --shape, --layout and --winograd are for --model\n");
        return 2;
    }
    if (optind < argc || !o.db_path || !o.out_prefix || nw == 0 || nw != ns) {
        if (optind < argc)
            fprintf(stderr, "tvm-compile: unexpected argument '%s'\n", argv[optind]);
        else if (nw != ns)
            fprintf(stderr, "tvm-compile: --workload %s has no --symbol\n", ks[nw - 1].workload);
        else
            fprintf(stderr, "tvm-compile: --db, -o and at least one --workload/--symbol pair are "
                            "needed\n");
        usage(stderr);
        return 2;
    }
    o.kernels = ks;
    o.nkernels = nw;
    /* Report lines on stdout; warnings on stderr either way. */
    o.log = quiet ? NULL : stdout;
    o.warnings = stderr;
    tt_compile_report rep[256];
    tt_errbuf err = {{0}};
    if (tt_compile(&o, rep, &err)) {
        fprintf(stderr, "tvm-compile: %s\n", err.msg);
        return 1;
    }
    (void)rep;
    if (!quiet)
        printf("wrote %s.a %s.so %s.h %s.pc\n", o.out_prefix, o.out_prefix, o.out_prefix,
               o.out_prefix);
    return 0;
}
