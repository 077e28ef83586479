/* For compare_allreduce.sh only, never built by CMake: Open MPI's
 * MPI_Allreduce (float sum) over the sizes allreduce_bench uses, one JSON
 * line per size, in the same fields: busbw = S / t * 2(N-1)/N.
 *   mpirun -np N mpi_allreduce NAME REPS BYTES... */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  if (argc < 4) {
    if (rank == 0)
      fprintf(stderr, "usage: mpi_allreduce NAME REPS BYTES...\n");
    MPI_Finalize();
    return 2;
  }
  const char* name = argv[1];
  int reps = atoi(argv[2]);
  for (int a = 3; a < argc; ++a) {
    long bytes = atol(argv[a]);
    long len = bytes / (long)sizeof(float);
    float* buf = malloc((size_t)len * sizeof(float));
    for (long i = 0; i < len; ++i)
      buf[i] = 1.0f;
    long iters = (256L << 20) / bytes;
    if (iters < 3)
      iters = 3;
    if (iters > 2000)
      iters = 2000;
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)len, MPI_FLOAT, MPI_SUM,
                  MPI_COMM_WORLD); /* warm */
    double* bw = malloc((size_t)reps * sizeof(double));
    double t_min = 1e30;
    for (int r = 0; r < reps; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = MPI_Wtime();
      for (long i = 0; i < iters; ++i)
        MPI_Allreduce(MPI_IN_PLACE, buf, (int)len, MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      double mine = (MPI_Wtime() - t0) / (double)iters, t = 0;
      MPI_Allreduce(&mine, &t, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      bw[r] = (double)bytes / t * 2.0 * (n - 1) / n / 1e9;
      if (t < t_min)
        t_min = t;
    }
    qsort(bw, (size_t)reps, sizeof(double), by_value);
    double median =
      reps % 2 ? bw[reps / 2] : (bw[reps / 2 - 1] + bw[reps / 2]) / 2;
    if (rank == 0)
      printf("{\"bench\": \"compare_allreduce\", \"name\": \"%s\", \"unit\": "
             "\"GB/s\", \"min\": %.6g, \"median\": %.6g, \"n\": %d, "
             "\"bytes\": %ld, \"t_min_us\": %.3f, \"algorithm\": "
             "\"MPI_Allreduce\"}\n",
             name, bw[0], median, n, bytes, t_min * 1e6);
    free(bw);
    free(buf);
  }
  MPI_Finalize();
  return 0;
}
