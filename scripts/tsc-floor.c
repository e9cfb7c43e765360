/* What two clock reads cost on this host, the floor under any span that times itself: rdtsc
 * (what gpuspan's and fastrace's spans read) and clock_gettime (std's Instant), each read twice
 * per iteration around the same tiny body. Built by scripts/gpu-bench build-peers. */
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
    const long n = 50000000;
    volatile unsigned long long sink = 0;
    unsigned long long x = 7;
    double a = now();
    for (long i = 0; i < n; i++) x = x * 0x9E3779B97F4A7C15ull;
    double body = (now() - a) / n;
    a = now();
    for (long i = 0; i < n; i++) {
        unsigned long long s = __rdtsc();
        x = x * 0x9E3779B97F4A7C15ull;
        sink += __rdtsc() - s;
    }
    double tsc = (now() - a) / n;
    a = now();
    for (long i = 0; i < n; i++) {
        struct timespec s, e;
        clock_gettime(CLOCK_MONOTONIC, &s);
        x = x * 0x9E3779B97F4A7C15ull;
        clock_gettime(CLOCK_MONOTONIC, &e);
        sink += e.tv_nsec - s.tv_nsec;
    }
    double mono = (now() - a) / n;
    printf("tsc-floor: body %.2f ns; body between two rdtsc %.2f ns; between two clock_gettime %.2f ns (%llu)\n",
           body, tsc, mono, (sink + x) & 1);
    return 0;
}
