// Maps COUNT anonymous regions of LENGTH KiB one after another, writes the first page of each
// and unmaps it: every call a mapping call memsup records, for what it spends per mapping
// call (bench/mapping_calls_ab.sh). Prints "map_churn N" and exits 0.
//
// Usage: map_churn [COUNT [LENGTH_KIB]]   (defaults 200000 and 64)
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 200000;
    size_t length = (size_t)(argc > 2 ? atol(argv[2]) : 64) << 10;
    long done = 0;
    for (long i = 0; i < count; i++) {
        char *map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) {
            perror("mmap");
            break;
        }
        map[0] = (char)i;
        munmap(map, length);
        done++;
    }
    printf("map_churn %ld\n", done);
    return done == count ? 0 : 1;
}
