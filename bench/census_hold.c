// Holds about MIB MiB of glibc heap for bench/heap_census.sh: THREADS threads (each in an
// arena of its own) allocate blocks of 16 to 2032 bytes (about 1 KiB on average, every byte
// written), free every third, and block in a condition wait; main prints its mallinfo2()
// totals ("mallinfo2 ARENA UORDBLKS FORDBLKS ORDBLKS"), "ready" and waits for stdin to end.
//
// Usage: census_hold MIB THREADS
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int done;
static size_t share;

static void *allocate(void *unused) {
    (void)unused;
    size_t blocks = share / 1024;
    char **held = malloc(blocks * sizeof *held);
    for (size_t i = 0; i < blocks; i++) {
        size_t size = 16 + (i * 7919) % 2017;
        held[i] = malloc(size);
        memset(held[i], (int)i, size);
    }
    for (size_t i = 0; i < blocks; i += 3)
        free(held[i]);
    pthread_mutex_lock(&lock);
    done++;
    pthread_cond_broadcast(&changed);
    for (;;)
        pthread_cond_wait(&changed, &lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: census_hold MIB THREADS\n");
        return 2;
    }
    int threads = atoi(argv[2]);
    share = (size_t)atol(argv[1]) * (1 << 20) / (size_t)threads;
    for (int i = 0; i < threads; i++) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, allocate, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    pthread_mutex_lock(&lock);
    while (done < threads)
        pthread_cond_wait(&changed, &lock);
    pthread_mutex_unlock(&lock);
    struct mallinfo2 info = mallinfo2();
    // snprintf and write(2), read(2): stdio would malloc its buffers after the totals.
    char line[160];
    int length = snprintf(line, sizeof line, "mallinfo2 %zu %zu %zu %zu\nready\n", info.arena,
                          info.uordblks, info.fordblks, info.ordblks);
    if (write(1, line, (size_t)length) != length)
        return 1;
    char byte;
    while (read(0, &byte, 1) > 0) {
    }
    return 0;
}
