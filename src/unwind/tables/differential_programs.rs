//! The programs the differential test runs: their workloads and sources.

/// Dicts, lists, strings and JSON: pymalloc serves small objects itself, the larger
/// lists, dict tables and strings come from malloc, from deep inside the interpreter.
pub const PYTHON_WORKLOAD: &str = r#"
import json
table = {}
for i in range(3000):
    table[str(i)] = [i] * (i % 97 + 64)
rows = [list(range(i % 200 + 64)) for i in range(2000)]
text = json.dumps(table)
again = json.loads(text)
words = " ".join(str(i) * 40 for i in range(2000)).split()
assert len(again) == len(table) and len(words) == 2000
"#;

/// A C file for cc1 -O2: a few dozen functions with loops, switches and structs,
/// expanded from macros.
pub const C_INPUT: &str = r#"
struct point { long x, y, z; };
struct shape { struct point corners[8]; int kind; double weight; };
#define BODY(n) \
    long work_##n(struct shape *shapes, int count, long seed) { \
        long total = seed; \
        for (int i = 0; i < count; i++) { \
            struct shape *s = &shapes[i]; \
            switch ((s->kind + n) % 5) { \
            case 0: for (int c = 0; c < 8; c++) total += s->corners[c].x * n; break; \
            case 1: for (int c = 0; c < 8; c++) total ^= s->corners[c].y << (c % 7); break; \
            case 2: total += (long)(s->weight * (n + 1)); break; \
            case 3: if (total & 1) total = total * 3 + 1; else total /= 2; break; \
            default: total -= s->corners[i % 8].z; \
            } \
        } \
        return total; \
    }
#define TEN(n) BODY(n##0) BODY(n##1) BODY(n##2) BODY(n##3) BODY(n##4) \
               BODY(n##5) BODY(n##6) BODY(n##7) BODY(n##8) BODY(n##9)
TEN(1) TEN(2)
long all(struct shape *shapes, int count) {
    return work_10(shapes, count, 1) + work_15(shapes, count, 2) + work_29(shapes, count, 3);
}
"#;

/// Templates nested into one another, std::map and std::string through operator new,
/// recursion, a qsort comparator that allocates, a signal handler that allocates on
/// raise(), 3 threads (one after the other) doing the same, and timer signals that
/// interrupt plain code and libc calls through the PLT while the handler allocates. The
/// timer counts the program's own CPU time (ITIMER_VIRTUAL): on wall time, a handler traced
/// more slowly than the period would leave the program no time between signals.
pub const CXX_FIXTURE: &str = r#"
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include <sys/time.h>

volatile long sink;
volatile sig_atomic_t may_allocate;

static void handler(int) {
    if (!may_allocate) return;
    void *block = malloc(48);
    sink += block != nullptr;
    free(block);
    std::string *text = new std::string(100, 'x');
    sink += text->size();
    delete text;
}

template <typename T, int N> struct Nest {
    __attribute__((noinline)) static T build(int depth) {
        std::vector<T> values(depth + N + 64);
        return Nest<T, N - 1>::build(depth) + values.size();
    }
};
template <typename T> struct Nest<T, 0> {
    __attribute__((noinline)) static T build(int depth) {
        std::map<int, T> map;
        for (int i = 0; i < depth; i++) map[i] = i;
        return map.size();
    }
};

__attribute__((noinline)) int recurse(int n) {
    if (n == 0) {
        std::string text(64, 'y');
        return text.size();
    }
    int result = recurse(n - 1);
    sink++;
    return result + 1;
}

static int compare(const void *left, const void *right) {
    static int calls;
    if (++calls % 8 == 0) {
        std::map<int, int> *map = new std::map<int, int>();
        (*map)[1] = 2;
        sink += map->size();
        delete map;
    }
    return *(const int *)left - *(const int *)right;
}

__attribute__((noinline)) long compute(long n) {
    long total = 0;
    for (long i = 0; i < n; i++) total = total * 31 + i % 7;
    return total;
}

__attribute__((noinline)) long measure(long n) {
    static char text[64] = "a string libc measures through the PLT";
    long total = 0;
    for (long i = 0; i < n; i++) total += strlen(text + i % 8);
    return total;
}

static void worker(int id) {
    for (int round = 0; round < 60; round++) {
        sink += Nest<long, 6>::build(round % 20 + id);
        sink += recurse(round % 30);
    }
}

int main() {
    signal(SIGUSR1, handler);
    signal(SIGVTALRM, handler);
    // One thread at a time: while the tracer steps one over malloc's int3, others would
    // pass malloc unseen.
    for (int id = 1; id <= 3; id++) std::thread(worker, id).join();
    for (int round = 0; round < 150; round++) {
        sink += Nest<long, 6>::build(round % 20);
        sink += recurse(round % 40);
        int values[64];
        for (int i = 0; i < 64; i++) values[i] = (i * 37 + round) % 64;
        qsort(values, 64, sizeof values[0], compare);
        may_allocate = 1;
        raise(SIGUSR1);
        may_allocate = 0;
    }
    struct itimerval timer = {{0, 500}, {0, 500}};
    setitimer(ITIMER_VIRTUAL, &timer, nullptr);
    may_allocate = 1;
    for (int round = 0; round < 4; round++) sink += compute(1000000) + measure(1000000);
    may_allocate = 0;
    timer = {};
    setitimer(ITIMER_VIRTUAL, &timer, nullptr);
    return 0;
}
"#;
