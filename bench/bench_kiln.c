/* bench/bench_kiln.c: the stand-alone benchmark binary (`make bench`);
 * the same driver as `kiln bench` (bench/bench_main.c). */
#include "../tools/commands.h"

int main(int argc, char **argv) { return kiln_bench_main(argc - 1, argv + 1); }
