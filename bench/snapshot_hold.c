// Holds MIB MiB of heap in 4 KiB blocks (every block written; a glibc arena of many chunks,
// as an application's heap is) and THREADS threads blocked in a condition wait, prints
// "ready" and waits for stdin to end. For bench/snapshot.sh: how long `memsup snapshot`
// stops a process against its heap size and thread count.
//
// Usage: snapshot_hold MIB THREADS
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *wait_forever(void *unused) {
    (void)unused;
    pthread_mutex_lock(&lock);
    for (;;)
        pthread_cond_wait(&never, &lock);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: snapshot_hold MIB THREADS\n");
        return 2;
    }
    size_t blocks = (size_t)atol(argv[1]) * (1 << 20) / BLOCK;
    int threads = atoi(argv[2]);
    char **held = malloc(blocks * sizeof *held);
    for (size_t i = 0; i < blocks; i++) {
        held[i] = malloc(BLOCK);
        memset(held[i], (int)i, BLOCK);
    }
    for (int i = 0; i < threads; i++) {
        pthread_t thread;
        pthread_attr_t attributes;
        pthread_attr_init(&attributes);
        pthread_attr_setstacksize(&attributes, 64 << 10);
        if (pthread_create(&thread, &attributes, wait_forever, NULL) != 0) {
            perror("pthread_create");
            return 1;
        }
    }
    printf("ready\n");
    fflush(stdout);
    while (getchar() != EOF) {
    }
    return 0;
}
