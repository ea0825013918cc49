/* What reading the TSC costs on this machine: rdtsc and rdtscp, back to back, in ns each
 * (the hooks read it once per record, and rdtscp where order matters). See BENCHMARKS.md.
 * gcc -O2 -o clock_cost bench/clock_cost.c && ./clock_cost */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double seconds(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec + now.tv_nsec * 1e-9;
}

int main(void) {
    const int reads = 20000000;
    unsigned long long sum = 0;
    unsigned aux;
    double start = seconds();
    for (int i = 0; i < reads; i++)
        sum += __rdtsc();
    double middle = seconds();
    for (int i = 0; i < reads; i++)
        sum += __rdtscp(&aux);
    double end = seconds();
    printf("rdtsc %.1f ns, rdtscp %.1f ns (checksum %llu)\n", (middle - start) * 1e9 / reads,
           (end - middle) * 1e9 / reads, sum & 1);
    return 0;
}
