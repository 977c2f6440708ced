/* tools/cli.c: cli_parse and the help text of the `kiln` subcommands'
 * option tables (tools/cli.h), on getopt_long. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_OPTS 64
#define NEG_MARK '\x01' /* prefixes a negative number so getopt leaves it alone */

int cli_bad(const cli_cmd *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kiln %s: ", c->name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (kiln %s --help lists the options)\n", c->name);
  va_end(ap);
  return CLI_BAD;
}

void cli_help(const cli_cmd *c, FILE *f) {
  fprintf(f, "usage: kiln %s [options]%s%s\n%s\n\noptions:\n", c->name, c->args ? " " : "",
          c->args ? c->args : "", c->summary);
  for (int i = 0; i <= c->n_opts; i++) {
    const cli_opt *o = i < c->n_opts ? &c->opts[i] : NULL;
    char left[96], sh[8] = "      ";
    if (o && o->short_name) snprintf(sh, sizeof sh, "  -%c, ", o->short_name);
    if (!o)
      snprintf(left, sizeof left, "  -h, --help");
    else if (o->kind == CLI_FLAG)
      snprintf(left, sizeof left, "%s--%s", sh, o->name);
    else
      snprintf(left, sizeof left, "%s--%s %s", sh, o->name, o->metavar ? o->metavar : "X");
    const char *help = o ? o->help : "show this help and exit";
    if (strlen(left) < 30)
      fprintf(f, "%-30s %s\n", left, help);
    else
      fprintf(f, "%s\n%-30s %s\n", left, "", help);
  }
  fprintf(f, "Options may be abbreviated (--ep 3) and given as --opt=value.\n");
  if (c->details) fprintf(f, "\n%s", c->details);
}

static bool is_negative_number(const char *s) {
  if (s[0] != '-' || !s[1]) return false;
  char *end;
  strtod(s, &end);
  return *end == 0;
}

/* The original argument behind s (a marked copy of argv[i] is argv[i]). */
static char *unmark(char *s, char **marked, char **argv, int argc) {
  for (int i = 0; s && i < argc; i++)
    if (marked[i] && (s == marked[i] || s == marked[i] + 1)) return argv[i];
  return s;
}

int cli_check_output(const cli_cmd *c, const char *opt, const char *path, cli_kind kind) {
  struct stat st;
  if (!*path) return cli_bad(c, "--%s: empty path", opt);
  if (kind == CLI_OUT_DIR && stat(path, &st) == 0) {
    if (!S_ISDIR(st.st_mode)) return cli_bad(c, "--%s: '%s' is not a directory", opt, path);
    if (access(path, W_OK) != 0)
      return cli_bad(c, "--%s: cannot write into '%s': %s", opt, path, strerror(errno));
    return CLI_OK;
  }
  if (kind == CLI_OUT_FILE && stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return cli_bad(c, "--%s: '%s' is a directory, not a file", opt, path);
  char *copy = strdup(path);
  if (!copy) return cli_bad(c, "out of memory");
  const char *dir = dirname(copy);
  int rc = CLI_OK;
  if (stat(dir, &st) != 0)
    rc = cli_bad(c, "--%s: directory '%s' does not exist", opt, dir);
  else if (!S_ISDIR(st.st_mode))
    rc = cli_bad(c, "--%s: '%s' is not a directory", opt, dir);
  else if (access(dir, W_OK) != 0)
    rc = cli_bad(c, "--%s: cannot write into '%s': %s", opt, dir, strerror(errno));
  free(copy);
  return rc;
}

static int set_value(const cli_cmd *c, const cli_opt *o, const char *v) {
  char *end;
  switch (o->kind) {
  case CLI_FLAG: *(bool *)o->dest = true; return CLI_OK;
  case CLI_INT: {
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || errno)
      return cli_bad(c, "--%s: expected an integer, got '%s'", o->name, v);
    if ((double)x < o->min)
      return cli_bad(c, "--%s: must be at least %.0f, got %lld", o->name, o->min, x);
    *(long long *)o->dest = x;
    return CLI_OK;
  }
  case CLI_NUM: {
    double x = strtod(v, &end);
    if (!*v || *end || !isfinite(x))
      return cli_bad(c, "--%s: expected a number, got '%s'", o->name, v);
    if (x < o->min) return cli_bad(c, "--%s: must be at least %g, got %s", o->name, o->min, v);
    *(double *)o->dest = x;
    return CLI_OK;
  }
  case CLI_CHOICE: {
    size_t n = strlen(v);
    for (const char *p = o->metavar; p && *p;) {
      const char *bar = strchr(p, '|');
      size_t k = bar ? (size_t)(bar - p) : strlen(p);
      if (k == n && strncmp(p, v, n) == 0) {
        *(const char **)o->dest = v;
        return CLI_OK;
      }
      p = bar ? bar + 1 : p + k;
    }
    return cli_bad(c, "--%s: expected one of %s, got '%s'", o->name, o->metavar, v);
  }
  case CLI_IN_FILE: {
    struct stat st;
    if (stat(v, &st) != 0) return cli_bad(c, "--%s: '%s': %s", o->name, v, strerror(errno));
    if (S_ISDIR(st.st_mode)) return cli_bad(c, "--%s: '%s' is a directory", o->name, v);
    if (access(v, R_OK) != 0) return cli_bad(c, "--%s: '%s': %s", o->name, v, strerror(errno));
    *(const char **)o->dest = v;
    return CLI_OK;
  }
  case CLI_OUT_FILE:
  case CLI_OUT_DIR:
    if (cli_check_output(c, o->name, v, o->kind) != CLI_OK) return CLI_BAD;
    *(const char **)o->dest = v;
    return CLI_OK;
  case CLI_STR: *(const char **)o->dest = v; return CLI_OK;
  }
  return CLI_BAD;
}

int cli_parse(const cli_cmd *c, int argc, char **argv, char ***pos, int *n_pos) {
  struct option lo[MAX_OPTS + 2];
  char shorts[2 * MAX_OPTS + 4] = ":h"; /* ':' first: a missing value returns ':' */
  size_t ns = 2;
  if (c->n_opts > MAX_OPTS) return cli_bad(c, "too many options in the table");
  for (int i = 0; i < c->n_opts; i++) {
    const cli_opt *o = &c->opts[i];
    lo[i] = (struct option){o->name, o->kind == CLI_FLAG ? no_argument : required_argument,
                            NULL, 256 + i};
    if (o->short_name) {
      shorts[ns++] = o->short_name;
      if (o->kind != CLI_FLAG) shorts[ns++] = ':';
    }
  }
  lo[c->n_opts] = (struct option){"help", no_argument, NULL, 'h'};
  lo[c->n_opts + 1] = (struct option){NULL, 0, NULL, 0};
  shorts[ns] = 0;
  /* Negative numbers are values or positional arguments, never options:
   * mark them (a copy of argv, which getopt permutes) and unmark after. */
  char **av = calloc((size_t)argc + 1, sizeof *av);
  char **marked = calloc((size_t)argc + 1, sizeof *marked);
  if (!av || !marked) {
    free(av);
    free(marked);
    return cli_bad(c, "out of memory");
  }
  for (int i = 0; i < argc; i++) {
    av[i] = argv[i];
    if (i > 0 && is_negative_number(argv[i]) && (marked[i] = malloc(strlen(argv[i]) + 2))) {
      marked[i][0] = NEG_MARK;
      strcpy(marked[i] + 1, argv[i]);
      av[i] = marked[i];
    }
  }
  int rc = CLI_OK, ch, idx;
  opterr = 0;
  optind = 0; /* glibc: full re-initialisation */
  while (rc == CLI_OK && (ch = getopt_long(argc, av, shorts, lo, &idx)) != -1) {
    const char *arg = av[optind - 1];
    if (ch == 'h') {
      cli_help(c, stdout);
      rc = CLI_HELP;
    } else if (ch == ':') {
      rc = cli_bad(c, "%s needs a value", arg);
    } else if (ch == '?') {
      if (optopt && optopt < 256)
        rc = cli_bad(c, "unknown option '-%c'", optopt);
      else if (strncmp(arg, "--", 2) == 0) {
        /* unknown, ambiguous, or a value given to a flag */
        size_t n = strcspn(arg + 2, "=");
        int matches = 0;
        const char *first = NULL;
        for (int i = 0; i < c->n_opts; i++)
          if (strncmp(c->opts[i].name, arg + 2, n) == 0 && (first = first ? first : c->opts[i].name))
            matches++;
        if (matches > 1)
          rc = cli_bad(c, "option '%.*s' is ambiguous (--%s, ...)", (int)n + 2, arg, first);
        else if (matches == 1 && arg[2 + n] == '=')
          rc = cli_bad(c, "--%s takes no value", first);
        else
          rc = cli_bad(c, "unknown option '%.*s'", (int)n + 2, arg);
      } else {
        rc = cli_bad(c, "unknown option '%s'", arg);
      }
    } else if (ch >= 256) {
      const cli_opt *o = &c->opts[ch - 256];
      if (o->kind != CLI_FLAG && optarg && !*optarg)
        rc = cli_bad(c, "--%s: empty value", o->name);
      else
        rc = set_value(c, o, unmark(optarg, marked, argv, argc));
    } else {
      for (int i = 0; i < c->n_opts; i++)
        if (c->opts[i].short_name == ch)
          rc = set_value(c, &c->opts[i], unmark(optarg, marked, argv, argc));
    }
  }
  int np = rc == CLI_OK ? argc - optind : 0;
  if (rc == CLI_OK && np < c->min_pos)
    rc = cli_bad(c, "expected %s", c->args ? c->args : "more arguments");
  else if (rc == CLI_OK && c->max_pos >= 0 && np > c->max_pos)
    rc = cli_bad(c, "unexpected argument '%s'",
                 unmark(av[optind + c->max_pos], marked, argv, argc));
  if (rc == CLI_OK) {
    /* the positionals, in order, original strings (values of options
     * point into argv too); av holds them while argv is rewritten */
    for (int i = 0; i < np; i++) av[i] = unmark(av[optind + i], marked, argv, argc);
    for (int i = 0; i < np; i++) argv[1 + i] = av[i];
    *pos = argv + 1;
    *n_pos = np;
  }
  for (int i = 0; i < argc; i++) free(marked[i]);
  free(av);
  free(marked);
  return rc;
}
