/* src/nn/fileio.c: crash-safe file writing for checkpoints and reports,
 * and CRC-32.
 *
 * Note [Atomic save]: a save never leaves a broken file at its path:
 *   1. write "<path>.tmp.<pid>.<k>" in the same directory (so the rename
 *      stays on one file system and is atomic), created with O_EXCL;
 *   2. check every write (a full disk fails here, not silently later);
 *   3. fsync the file, then close it and check close's result;
 *   4. rename the temp file over path;
 *   5. fsync the directory: the rename is atomic at once but durable only
 *      then.
 * On any failure the temp file is unlinked and path keeps its old content,
 * so the previous checkpoint still loads. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "nn.h"

struct nn_writer {
  int fd;
  int err;          /* first errno, 0 if none */
};

static _Atomic long write_fail_at;  /* test hook: nn_write_fail_at (atomic: Note [Threads]) */

void nn_write_fail_at(long n) { write_fail_at = n; }

int nn_write(nn_writer *w, const void *buf, size_t n) {
  if (w->err) return KILN_ERR_IO;
  if (write_fail_at > 0 && --write_fail_at == 0) {
    w->err = EIO;
    return KILN_ERR_IO;
  }
  const char *p = buf;
  while (n > 0) {
    ssize_t k = write(w->fd, p, n);
    if (k < 0) {
      if (errno == EINTR) continue;
      w->err = errno;
      return KILN_ERR_IO;
    }
    p += k;
    n -= (size_t)k;
  }
  return 0;
}

static void sync_dir(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return; /* best effort: some file systems refuse it */
  (void)fsync(fd);
  close(fd);
}

/* Note [Stale temporaries]: a process killed during a save leaves
 * "<path>.tmp.<pid>.<n>" behind. The next save of the same path removes
 * those whose pid names no live process (kill(pid, 0) fails with ESRCH):
 * a concurrent writer's file is left alone, and so is anything not of
 * exactly this naming. */
static void remove_stale(const char *path) {
  char dir[4096];
  const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
  if (!slash) snprintf(dir, sizeof dir, ".");
  else if (slash == path) snprintf(dir, sizeof dir, "/");
  else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
  size_t bn = strlen(base);
  DIR *d = opendir(dir);
  for (struct dirent *e; d && (e = readdir(d));) {
    const char *s = e->d_name;
    if (strncmp(s, base, bn) != 0 || strncmp(s + bn, ".tmp.", 5) != 0) continue;
    char *end;
    errno = 0;
    long pid = strtol(s + bn + 5, &end, 10);
    if (errno || pid <= 0 || *end != '.' || !end[1]) continue;
    const char *c = end + 1;
    while (*c >= '0' && *c <= '9') c++;
    if (*c || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    char full[8192];
    snprintf(full, sizeof full, "%s/%s", dir, s);
    unlink(full);
  }
  if (d) closedir(d);
}

int nn_atomic_write(const char *path, const char *ctx, int (*fn)(nn_writer *w, void *ud),
                    void *ud) {
  static unsigned counter;
  size_t tn = strlen(path) + 64;
  char *tmp = core_alloc(tn);
  if (!tmp) return KILN_ERR_NOMEM;
  nn_writer w = {.fd = -1, .err = 0};
  int rc = 0;
  remove_stale(path);
  /* Past a file-size limit (ulimit -f) a write raises SIGXFSZ, which kills
   * the process; ignored while writing, the write fails with EFBIG and the
   * save reports it. (The disposition is process-wide: a thread writing a
   * file meanwhile gets EFBIG too, which is what it would want.) */
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_xfsz;
  sigemptyset(&ign.sa_mask);
  bool restore = sigaction(SIGXFSZ, &ign, &old_xfsz) == 0;
  for (int attempt = 0; attempt < 100; attempt++) {
    unsigned c = __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED);
    snprintf(tmp, tn, "%s.tmp.%ld.%u", path, (long)getpid(), c);
    w.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w.fd >= 0 || errno != EEXIST) break;
  }
  if (w.fd < 0) {
    rc = core_error(KILN_ERR_IO, "%s: '%s': cannot create a temporary file beside it: %s", ctx,
                    path, strerror(errno));
    if (restore) sigaction(SIGXFSZ, &old_xfsz, NULL);
    core_free(tmp);
    return rc;
  }
  rc = fn(&w, ud);
  if (rc < 0 || w.err) {
    if (w.err)
      rc = core_error(KILN_ERR_IO, "%s: '%s': write failed: %s (the file was not changed)", ctx,
                      path, strerror(w.err));
    goto fail;
  }
  if (fsync(w.fd) != 0) {
    rc = core_error(KILN_ERR_IO, "%s: '%s': fsync failed: %s (the file was not changed)", ctx,
                    path, strerror(errno));
    goto fail;
  }
  int err = close(w.fd);
  w.fd = -1;
  if (err != 0) {
    rc = core_error(KILN_ERR_IO, "%s: '%s': close failed: %s (the file was not changed)", ctx,
                    path, strerror(errno));
    goto fail;
  }
  if (rename(tmp, path) != 0) {
    rc = core_error(KILN_ERR_IO, "%s: '%s': cannot rename the temporary file to it: %s", ctx,
                    path, strerror(errno));
    goto fail;
  }
  sync_dir(path);
  if (restore) sigaction(SIGXFSZ, &old_xfsz, NULL);
  core_free(tmp);
  return 0;
fail:
  if (w.fd >= 0) close(w.fd);
  unlink(tmp);
  if (restore) sigaction(SIGXFSZ, &old_xfsz, NULL);
  core_free(tmp);
  return rc < 0 ? rc : KILN_ERR_IO;
}

uint32_t nn_crc32(uint32_t crc, const void *buf, size_t n) {
  const unsigned char *p = buf;
  uLong c = crc;
  while (n > 0) {
    uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
    c = crc32(c, p, k);
    p += k;
    n -= k;
  }
  return (uint32_t)c;
}
