/* spawn: creates and joins threads one after another, each making one allocation; the cost
 * memsup adds per thread (the clone event and the exit stop) rather than per allocation.
 * Usage: spawn [-n THREADS]. Prints checksum= (the sum of the threads' indexes). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *run(void *argument)
{
    long index = (long)argument;
    volatile char *block = malloc(64);
    if (block == NULL)
        return NULL;
    block[0] = (char)index;
    free((void *)block);
    return (void *)index;
}

int main(int argc, char **argv)
{
    long threads = 2000;
    int option;
    while ((option = getopt(argc, argv, "n:")) != -1)
        if (option == 'n')
            threads = atol(optarg);
    unsigned long checksum = 0;
    for (long index = 0; index < threads; index++) {
        pthread_t thread;
        void *result;
        if (pthread_create(&thread, NULL, run, (void *)index) != 0)
            return 1;
        pthread_join(thread, &result);
        checksum += (unsigned long)result;
    }
    printf("checksum=%lu\n", checksum);
    return 0;
}
