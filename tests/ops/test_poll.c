/* tests/ops/test_poll.c: the thread's kernel poll function (Note [Kernel
 * poll] in src/core/core.h) is called inside long kernels — a float32 GEMM
 * at every CPU level kiln has a kernel for, a convolution's batch chunks —
 * on the thread that set it only, and not at all once cleared. */
#include <omp.h>

#include "core/core.h"
#include "test.h"

static int polls;
static int foreign; /* calls from a thread other than the setter's */
static int owner;   /* omp_get_thread_num() of the setter */

static void count(void *ud) {
  if (omp_get_thread_num() != owner || ud != &polls) foreign++;
  polls++;
}

TEST(kernel_poll_runs_inside_gemm_and_conv_on_its_thread_only) {
  int saved = core_cpu_level(), max = core_cpu_max_level();
  kiln_generator *gen = kiln_generator_new(5);
  kiln_scope_begin();
  /* 300 rows: more than one row panel of every sgemm kernel (MC) */
  kiln_tensor *a = kiln_randn(2, (int64_t[]){300, 200}, KILN_DTYPE_F32, gen);
  kiln_tensor *b = kiln_randn(2, (int64_t[]){200, 100}, KILN_DTYPE_F32, gen);
  kiln_tensor *x = kiln_randn(4, (int64_t[]){4, 3, 12, 12}, KILN_DTYPE_F32, gen);
  kiln_tensor *w = kiln_randn(4, (int64_t[]){8, 3, 3, 3}, KILN_DTYPE_F32, gen);
  owner = omp_get_thread_num();
  for (int l = 0; l <= max; l++) {
    if (core_cpu_set_level(l) < 0) continue;
    polls = foreign = 0;
    core_set_poll(count, &polls);
    kiln_tensor *c = kiln_matmul(a, b);
    CHECK(c != NULL);
    int gemm_polls = polls;
    kiln_tensor *y = kiln_conv2d(x, w, NULL, (int64_t[]){1, 1}, (int64_t[]){1, 1});
    CHECK(y != NULL);
    core_set_poll(NULL, NULL);
    int set_polls = polls;
    kiln_tensor *c2 = kiln_matmul(a, b);
    CHECK(c2 != NULL);
    /* the baseline level's float32 GEMM is OpenBLAS's, which kiln cannot
     * poll inside; the convolution polls between its chunks at every level */
    if (l > 0) CHECK_MSG(gemm_polls >= 2, "level %s: %d polls in a 300-row GEMM",
                         core_cpu_level_name(l), gemm_polls);
    CHECK_MSG(set_polls > gemm_polls, "level %s: the convolution did not poll",
              core_cpu_level_name(l));
    CHECK_MSG(polls == set_polls, "level %s: polled after the function was cleared",
              core_cpu_level_name(l));
    CHECK_MSG(foreign == 0, "level %s: %d polls from another thread", core_cpu_level_name(l),
              foreign);
  }
  core_cpu_set_level(saved);
  kiln_scope_end();
  kiln_generator_free(gen);
}
