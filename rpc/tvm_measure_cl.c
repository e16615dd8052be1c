/* tvm-measure-cl: measures one OpenCL artifact for tvm-tune or tvm-rpc-server, in a fresh
 * process (rpc/measure_cl.c says why); not a command for people. */
#include "measure_int.h"

int main(int argc, char **argv)
{
    return tt__measure_cl_main(argc, argv);
}
