/* roundtrip: the bare cost of one ptrace breakpoint round trip.
 *
 * The child calls probe() K times; probe's first byte is int3. Per hit the
 * tracer does waitpid -> PTRACE_GETREGS -> rip fix -> PTRACE_SETREGS ->
 * PTRACE_CONT, which is the least work an int3 probe can cost.
 *
 * Usage: roundtrip [-k K] [-T TRACER_CPU] [-C CHILD_CPU]
 *   -T pins the tracer itself (sched_setaffinity), -C pins the child
 *   (sched_setaffinity in the child before the loop); -1 = not pinned.
 * Prints: hits, elapsed seconds of the loop, microseconds per round trip. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* probe: int3, then a plain ret. The tracer moves rip past the int3. */
__asm__(".text\n.globl probe\n.type probe,@function\nprobe:\n\tint3\n\tret\n.size probe,.-probe\n");
void probe(void);

static void pin(pid_t pid, int cpu)
{
    if (cpu < 0) return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(pid, sizeof set, &set) != 0) { perror("sched_setaffinity"); exit(1); }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long k = 100000;
    int tracer_cpu = -1, child_cpu = -1, opt;
    while ((opt = getopt(argc, argv, "k:T:C:")) != -1) {
        if (opt == 'k') k = atol(optarg);
        else if (opt == 'T') tracer_cpu = atoi(optarg);
        else if (opt == 'C') child_cpu = atoi(optarg);
        else { fprintf(stderr, "usage: %s [-k K] [-T CPU] [-C CPU]\n", argv[0]); return 2; }
    }
    pin(0, tracer_cpu);

    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    if (child == 0) {
        pin(0, child_cpu);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) { perror("PTRACE_TRACEME"); _exit(1); }
        raise(SIGSTOP);
        for (long i = 0; i < k; i++)
            probe();
        _exit(0);
    }

    int status;
    if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) { fprintf(stderr, "child did not stop\n"); return 1; }
    ptrace(PTRACE_SETOPTIONS, child, NULL, (void *)PTRACE_O_EXITKILL);
    unsigned long probe_addr = (unsigned long)&probe;
    long hits = 0;
    double t0 = now();
    if (ptrace(PTRACE_CONT, child, NULL, NULL) != 0) { perror("PTRACE_CONT"); return 1; }
    for (;;) {
        if (waitpid(child, &status, 0) != child) { perror("waitpid"); return 1; }
        if (WIFEXITED(status) || WIFSIGNALED(status)) break;
        int sig = WSTOPSIG(status);
        struct user_regs_struct regs;
        if (sig == SIGTRAP) {
            if (ptrace(PTRACE_GETREGS, child, NULL, &regs) != 0) { perror("PTRACE_GETREGS"); return 1; }
            if (regs.rip != probe_addr + 1) { fprintf(stderr, "unexpected trap at %llx\n", regs.rip); return 1; }
            regs.rip = probe_addr + 1; /* step over the int3: the "emulated" first instruction */
            if (ptrace(PTRACE_SETREGS, child, NULL, &regs) != 0) { perror("PTRACE_SETREGS"); return 1; }
            hits++;
            sig = 0;
        }
        if (ptrace(PTRACE_CONT, child, NULL, (void *)(long)sig) != 0) { perror("PTRACE_CONT"); return 1; }
    }
    double elapsed = now() - t0;
    if (hits != k) { fprintf(stderr, "expected %ld hits, saw %ld\n", k, hits); return 1; }
    printf("roundtrip hits=%ld tracer_cpu=%d child_cpu=%d seconds=%.6f us_per_roundtrip=%.3f\n",
           hits, tracer_cpu, child_cpu, elapsed, hits ? elapsed * 1e6 / hits : 0.0);
    return 0;
}
