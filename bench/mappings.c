// Holds COUNT separate one-page mappings: each is mapped read-write and written, then every
// other one is made read-only, so that no two neighbours can be merged into one VMA. Prints
// "mappings N", sleeps HOLD seconds and exits 0. For bench/sampler.sh: what the residency
// sampler's reads cost on a process with many mappings (vm.max_map_count, 65530 by
// default, bounds COUNT). With "merged", none is made read-only: the kernel merges
// neighbours into a few VMAs, which memsup's snapshots cut again where the recorded calls'
// ranges meet. With "churn", each is unmapped once written, so that every call is a mapping
// call memsup records and nothing is held (both for bench/mapping_calls_ab.sh).
//
// Usage: mappings [COUNT [HOLD [merged|churn]]]   (defaults 20000 and 5)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long count = argc > 1 ? atol(argv[1]) : 20000;
    unsigned hold = argc > 2 ? (unsigned)atoi(argv[2]) : 5;
    const char *mode = argc > 3 ? argv[3] : "";
    int merged = strcmp(mode, "merged") == 0;
    int churn = strcmp(mode, "churn") == 0;
    long page = sysconf(_SC_PAGESIZE);
    long made = 0;
    for (long i = 0; i < count; i++) {
        char *map = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED) {
            perror("mmap");
            break;
        }
        map[0] = (char)i;
        if (churn && munmap(map, page) != 0) {
            perror("munmap");
            break;
        }
        if (!merged && !churn && i % 2 && mprotect(map, page, PROT_READ) != 0) {
            perror("mprotect");
            break;
        }
        made++;
    }
    printf("mappings %ld\n", made);
    fflush(stdout);
    sleep(hold);
    return made == count ? 0 : 1;
}
