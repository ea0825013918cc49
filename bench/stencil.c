// bench/engines.sh's stencil workload: two double grids allocated once, then K sweeps of
// a 5-point Jacobi stencil between them. Almost no allocator calls after the start: what a
// profiler costs a program that computes rather than allocates.
// Usage: stencil [-n SIDE] [-k ITERATIONS]; prints checksum= of the final grid.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    long side = 2000, iterations = 20;
    int option;
    while ((option = getopt(argc, argv, "n:k:")) != -1) {
        if (option == 'n') side = atol(optarg);
        else if (option == 'k') iterations = atol(optarg);
        else return 2;
    }
    double *from = malloc(side * side * sizeof *from);
    double *to = malloc(side * side * sizeof *to);
    if (!from || !to) return 1;
    // Fixed boundary and a deterministic interior, the same in both grids.
    for (long y = 0; y < side; y++)
        for (long x = 0; x < side; x++)
            from[y * side + x] = to[y * side + x] = (double)((x * 31 + y * 17) % 101);
    for (long k = 0; k < iterations; k++) {
        for (long y = 1; y < side - 1; y++)
            for (long x = 1; x < side - 1; x++) {
                long i = y * side + x;
                to[i] = 0.25 * (from[i - 1] + from[i + 1] + from[i - side] + from[i + side]);
            }
        double *swap = from;
        from = to;
        to = swap;
    }
    // Summed in a fixed order and rounded: the same integer on every run.
    double sum = 0;
    for (long i = 0; i < side * side; i++) sum += from[i] * (double)(i % 7 + 1);
    printf("checksum=%lld\n", (long long)(sum * 1000.0));
    free(from);
    free(to);
    return 0;
}
