/* tools/cli.h: the `kiln` command's option tables. Each subcommand has one
 * table of cli_opt (name, kind, destination, help), parsed by cli_parse
 * with getopt_long: -h/--help, --opt value and --opt=value, unambiguous
 * abbreviations, and one line naming the option and what is wrong with
 * its value. Adding an option is adding one row. */
#ifndef KILN_TOOLS_CLI_H
#define KILN_TOOLS_CLI_H

#include <stdbool.h>
#include <stdio.h>

typedef enum cli_kind {
  CLI_FLAG,     /* no value; dest is bool* (set true) */
  CLI_INT,      /* long long* >= min */
  CLI_NUM,      /* double* >= min (finite) */
  CLI_STR,      /* const char** */
  CLI_CHOICE,   /* const char**, one of metavar's "a|b|c" */
  CLI_OUT_FILE, /* const char**: its directory must exist and be writable */
  CLI_OUT_DIR,  /* const char**: exists as a writable directory, or its parent does */
  CLI_IN_FILE   /* const char**: must be a readable file */
} cli_kind;

typedef struct cli_opt {
  const char *name;     /* long name, without "--" */
  char short_name;      /* 0: none */
  cli_kind kind;
  void *dest;
  const char *metavar;  /* "N", "DIR"; for CLI_CHOICE the choices "a|b|c" */
  double min;           /* CLI_INT, CLI_NUM: smallest value allowed */
  const char *help;     /* one line */
} cli_opt;

typedef struct cli_cmd {
  const char *name;      /* "train" */
  const char *args;      /* positional arguments in the synopsis: "GRAPH.ir [INPUT ...]" */
  const char *summary;   /* one line: what the command does */
  const char *details;   /* more lines printed after the options, or NULL */
  const cli_opt *opts;
  int n_opts;
  int min_pos, max_pos;  /* positional arguments allowed (max -1: any number) */
} cli_cmd;

enum { CLI_OK = 0, CLI_HELP = 1, CLI_BAD = 2 };

/* Parses argv[1..argc) (argv[0] is the subcommand's name) into the table's
 * destinations and checks every value, outputs included, before any work.
 * Positional arguments (in order) are left in *pos / *n_pos (pointers into
 * argv). Returns CLI_OK; CLI_HELP after printing the help on stdout; or
 * CLI_BAD after printing one line "kiln CMD: reason" on stderr. A negative
 * number ("-2.5") is a positional argument or a value, not an option. */
int cli_parse(const cli_cmd *c, int argc, char **argv, char ***pos, int *n_pos);
/* The command's help: synopsis, summary, one line per option, details. */
void cli_help(const cli_cmd *c, FILE *f);
/* Prints "kiln CMD: <formatted reason>" on stderr; returns CLI_BAD. */
int cli_bad(const cli_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Checks that path can be written as kind (CLI_OUT_FILE or CLI_OUT_DIR);
 * prints the one-line reason naming opt and returns CLI_BAD if not. */
int cli_check_output(const cli_cmd *c, const char *opt, const char *path, cli_kind kind);

#endif
