// Holds GIB GiB of resident heap: mallocs it in 64 MiB blocks, writes every page, prints
// "resident N MiB", sleeps HOLD seconds and exits 0. For bench/sampler.sh: what the
// residency sampler's reads cost on a large resident set.
//
// Usage: resident [GIB [HOLD]]   (defaults 4 and 5)
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define BLOCK (64UL << 20)

int main(int argc, char **argv) {
    double gib = argc > 1 ? atof(argv[1]) : 4;
    unsigned hold = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
    long page = sysconf(_SC_PAGESIZE);
    size_t blocks = (size_t)(gib * 16 + 0.5); // 16 blocks of 64 MiB per GiB
    char **held = calloc(blocks ? blocks : 1, sizeof *held);
    if (!held) {
        perror("calloc");
        return 1;
    }
    for (size_t i = 0; i < blocks; i++) {
        held[i] = malloc(BLOCK);
        if (!held[i]) {
            fprintf(stderr, "malloc of block %zu failed\n", i);
            return 1;
        }
        for (size_t offset = 0; offset < BLOCK; offset += page)
            held[i][offset] = (char)(i + offset / page);
    }
    printf("resident %zu MiB\n", blocks * (BLOCK >> 20));
    fflush(stdout);
    sleep(hold);
    for (size_t i = 0; i < blocks; i++)
        free(held[i]);
    free(held);
    return 0;
}
