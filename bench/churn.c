/* churn: N malloc/free pairs, each made 8 noinline frames deep.
 * Usage: churn [-n N] [-t T]   (default N=1000000, T=1)
 * Prints checksum= (the bytes read back; deterministic for any T) so the work
 * cannot be elided, and layout= (sum of ptr & 0xfff), which shows whether a
 * tool changed the heap layout; with T > 1 it varies from run to run. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static const size_t sizes[] = {16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 40, 200};
#define NSIZES (sizeof sizes / sizeof sizes[0])

struct work { long start, count; unsigned long sum, layout; };

/* The bottom frame: one malloc/free pair with volatile writes to the block. */
static __thread unsigned long layout;

static NOINLINE unsigned long frame8(long i)
{
    size_t sz = sizes[i % NSIZES];
    volatile unsigned char *p = malloc(sz);
    if (!p) { perror("malloc"); exit(1); }
    p[0] = (unsigned char)i;
    p[sz - 1] = (unsigned char)(i >> 8);
    unsigned long v = p[0] + p[sz - 1];
    layout += (unsigned long)p & 0xfff;
    free((void *)p);
    return v;
}

static NOINLINE unsigned long frame7(long i) { unsigned long v = frame8(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame6(long i) { unsigned long v = frame7(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame5(long i) { unsigned long v = frame6(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame4(long i) { unsigned long v = frame5(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame3(long i) { unsigned long v = frame4(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame2(long i) { unsigned long v = frame3(i); __asm__ volatile("" ::: "memory"); return v + 1; }
static NOINLINE unsigned long frame1(long i) { unsigned long v = frame2(i); __asm__ volatile("" ::: "memory"); return v + 1; }

static void *worker(void *arg)
{
    struct work *w = arg;
    for (long i = w->start; i < w->start + w->count; i++)
        w->sum += frame1(i);
    w->layout = layout;
    return NULL;
}

int main(int argc, char **argv)
{
    long n = 1000000;
    int threads = 1, opt;
    while ((opt = getopt(argc, argv, "n:t:")) != -1) {
        if (opt == 'n') n = atol(optarg);
        else if (opt == 't') threads = atoi(optarg);
        else { fprintf(stderr, "usage: %s [-n N] [-t T]\n", argv[0]); return 2; }
    }
    if (n < 0 || threads < 1 || threads > 64) { fprintf(stderr, "bad -n or -t\n"); return 2; }

    struct work w[64];
    pthread_t tid[64];
    for (int t = 0; t < threads; t++) {
        w[t].start = n / threads * t;
        w[t].count = (t == threads - 1) ? n - w[t].start : n / threads;
        w[t].sum = w[t].layout = 0;
    }
    if (threads == 1) {
        worker(&w[0]);
    } else {
        for (int t = 0; t < threads; t++)
            if (pthread_create(&tid[t], NULL, worker, &w[t]) != 0) { perror("pthread_create"); return 1; }
        for (int t = 0; t < threads; t++)
            pthread_join(tid[t], NULL);
    }
    unsigned long sum = 0, layout_sum = 0;
    for (int t = 0; t < threads; t++) { sum += w[t].sum; layout_sum += w[t].layout; }
    printf("churn n=%ld threads=%d checksum=%lu layout=%lu\n", n, threads, sum, layout_sum);
    return 0;
}
