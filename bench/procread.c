// What the residency sampler's reads cost on a running process: reads /proc/PID/status,
// /proc/PID/smaps_rollup and /proc/PID/smaps REPS times each (whole file, reopened each
// time, as memsup does) and prints, per file, the median and minimum CPU time of one read
// (CLOCK_THREAD_CPUTIME_ID, so the numbers hold on a loaded machine) and the size of the
// text, as TSV: file reads gap_ms median_ns min_ns bytes. With GAP_MS, it sleeps that long
// between reads, as memsup's sampler does between rounds: the caches are then cold.
//
// Usage: procread PID [REPS [SMAPS_REPS [GAP_MS]]]   (defaults 200, 10 and 0)
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long thread_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (unsigned long long)t.tv_sec * 1000000000ULL + (unsigned long long)t.tv_nsec;
}

static char *buffer;
static int gap_ms;
static size_t capacity = 1 << 16;

// Returns the bytes read, -1 when the file cannot be opened or read.
static long read_whole(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t length = 0;
    for (;;) {
        if (capacity - length < 4096) {
            capacity *= 2;
            buffer = realloc(buffer, capacity);
            if (!buffer) {
                perror("realloc");
                exit(1);
            }
        }
        ssize_t got = read(fd, buffer + length, capacity - length);
        if (got < 0) {
            close(fd);
            return -1;
        }
        if (got == 0)
            break;
        length += (size_t)got;
    }
    close(fd);
    return (long)length;
}

static int compare(const void *a, const void *b) {
    unsigned long long x = *(const unsigned long long *)a, y = *(const unsigned long long *)b;
    return x < y ? -1 : x > y;
}

static int measure(const char *pid, const char *file, int reps) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%s/%s", pid, file);
    unsigned long long *costs = calloc((size_t)reps, sizeof *costs);
    long bytes = 0;
    for (int i = 0; i < reps; i++) {
        if (gap_ms > 0)
            nanosleep(&(struct timespec){gap_ms / 1000, (long)(gap_ms % 1000) * 1000000L}, NULL);
        unsigned long long start = thread_ns();
        bytes = read_whole(path);
        costs[i] = thread_ns() - start;
        if (bytes < 0) {
            fprintf(stderr, "procread: cannot read %s\n", path);
            free(costs);
            return 1;
        }
    }
    qsort(costs, (size_t)reps, sizeof *costs, compare);
    printf("%s\t%d\t%d\t%llu\t%llu\t%ld\n", file, reps, gap_ms, costs[reps / 2], costs[0], bytes);
    free(costs);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: procread PID [REPS [SMAPS_REPS [GAP_MS]]]\n");
        return 2;
    }
    int reps = argc > 2 ? atoi(argv[2]) : 200;
    int smaps_reps = argc > 3 ? atoi(argv[3]) : 10;
    gap_ms = argc > 4 ? atoi(argv[4]) : 0;
    if (reps < 1 || smaps_reps < 1 || gap_ms < 0)
        return 2;
    buffer = malloc(capacity);
    if (!buffer)
        return 1;
    printf("file\treads\tgap_ms\tmedian_ns\tmin_ns\tbytes\n");
    int failed = measure(argv[1], "status", reps);
    failed |= measure(argv[1], "smaps_rollup", reps);
    failed |= measure(argv[1], "smaps", smaps_reps);
    return failed;
}
