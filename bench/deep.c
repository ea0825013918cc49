/* deep: N malloc/free pairs made D frames deep (recursion), for the cost of
 * copying and unwinding deep stacks.
 * Usage: deep [-n N] [-d D]   (default N=100000, D=64)
 * Prints checksum= (the bytes read back) so the work cannot be elided. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long checksum;

static __attribute__((noinline)) unsigned long descend(long depth, long i)
{
    if (depth > 1) {
        /* Used after the call, so the recursion is not a tail call. */
        unsigned long below = descend(depth - 1, i);
        return below + (unsigned long)depth;
    }
    volatile unsigned char *p = malloc(64);
    if (!p) { perror("malloc"); exit(1); }
    p[0] = (unsigned char)i;
    unsigned long v = p[0];
    free((void *)p);
    return v;
}

int main(int argc, char **argv)
{
    long n = 100000, depth = 64;
    int opt;
    while ((opt = getopt(argc, argv, "n:d:")) != -1) {
        if (opt == 'n') n = atol(optarg);
        else if (opt == 'd') depth = atol(optarg);
        else { fprintf(stderr, "usage: deep [-n N] [-d D]\n"); return 2; }
    }
    for (long i = 0; i < n; i++)
        checksum += descend(depth, i);
    printf("checksum=%lu\n", checksum);
    return 0;
}
