/* tools/commands.h: the `kiln` subcommands defined outside tools/kiln.c.
 * Each takes the arguments after its name and returns the exit status. */
#ifndef KILN_TOOLS_COMMANDS_H
#define KILN_TOOLS_COMMANDS_H

/* kiln train [--model mlp|cnn|lstm] [--mode eager|jit|lazy] [--epochs N] ...
 * (tools/train.c; `kiln train --help` lists every option). */
int kiln_cmd_train(int argc, char **argv);
/* kiln eval CHECKPOINT [--data DIR] [--limit N] */
int kiln_cmd_eval(int argc, char **argv);
/* kiln bench [--json] [--filter SUBSTR] [--threads N] ... (bench/bench_main.c) */
int kiln_bench_main(int argc, char **argv);

#endif
