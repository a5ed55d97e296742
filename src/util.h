/* Small helpers: time, bit tricks, hashing. */
#ifndef RPS_UTIL_H
#define RPS_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <strings.h>
#include <time.h>

#define RPS_CACHELINE 64
#define RPS_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* The index of s in names[0, n), case-insensitive, or -EINVAL (s NULL or not
 * there): the parsers of the option words (optimizer, schedule, priority). */
static inline int rps_name_index(const char *const *names, size_t n, const char *s)
{
	if (!s)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		if (names[i] && !strcasecmp(s, names[i]))
			return (int)i;
	return -EINVAL;
}
#define RPS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define RPS_MAX(a, b) ((a) > (b) ? (a) : (b))
#define RPS_ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define rps_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#define RPS_LIKELY(x) __builtin_expect(!!(x), 1)
#define RPS_UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline uint64_t rps_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CLOCK_MONOTONIC as of the last timer tick (1..10 ms behind): for
 * bookkeeping stamps read on every request ("a caller polled lately"), where
 * a full clock read per request costs more than the stamp is worth. */
static inline uint64_t rps_coarse_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rps_wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Absolute CLOCK_MONOTONIC time timeout_ms from now (for timed waits on
 * condition variables created with that clock). */
static inline void rps_deadline_ms(struct timespec *ts, int timeout_ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += timeout_ms / 1000;
	ts->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* Sleep ms milliseconds (back-off between retries). */
static inline void rps_sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

/* A spin-wait hint to the CPU (and to a hyperthread sibling). */
static inline void rps_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#endif
}

/* splitmix64 finaliser: a good 64-bit mix for key hashing. */
static inline uint64_t rps_hash64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

#endif
