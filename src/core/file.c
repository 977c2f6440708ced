/* src/core/file.c: opening input files. Readers take regular files only: a
 * FIFO would block the open (and the read) forever, a device could be
 * endless. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

int core_open_regular(const char *path, const char *ctx) {
  /* O_NONBLOCK: opening a FIFO without a writer returns at once */
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return core_error(KILN_ERR_IO, "%s: '%s': cannot open: %s", ctx, path, strerror(errno));
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return core_error(KILN_ERR_IO, "%s: '%s': cannot stat: %s", ctx, path, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return core_error(KILN_ERR_IO, "%s: '%s' is not a regular file (it is %s)", ctx, path,
                      S_ISDIR(st.st_mode)    ? "a directory"
                      : S_ISFIFO(st.st_mode) ? "a FIFO"
                      : S_ISSOCK(st.st_mode) ? "a socket"
                                             : "a device");
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

FILE *core_fopen_regular(const char *path, const char *ctx) {
  int fd = core_open_regular(path, ctx);
  if (fd < 0) return NULL;
  FILE *f = fdopen(fd, "rb");
  if (!f) {
    close(fd);
    core_error(KILN_ERR_NOMEM, "%s: '%s': out of memory", ctx, path);
  }
  return f;
}
