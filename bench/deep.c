/* deep: N malloc/free pairs made D frames deep (recursion), for the cost of
 * copying and unwinding deep stacks.
 * Usage: deep [-n N] [-d D]   (default N=100000, D=64)
 * Prints checksum= (the bytes read back) so the work cannot be elided. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned long checksum;

/* noipa and a volatile slot read after the call: gcc can neither turn the recursion into
 * a loop nor drop the frames, so each level is a real frame on the stack. */
static __attribute__((noinline, noipa)) unsigned long descend(long depth, long i)
{
    volatile long level = depth;
    if (depth > 1) {
        unsigned long below = descend(depth - 1, i);
        return below + (unsigned long)level;
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
