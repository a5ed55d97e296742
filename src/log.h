/* Logging: the level is tested before anything is formatted.
 * Messages are lowercase and concrete: "qp 0x1a to 10.9.0.2: retry exceeded".
 * Level from RDMAPS_LOG_LEVEL (error|warn|info|debug|trace), default info.
 * Each line: "<time> <role>[<rank>] <level> <file>:<line> message" on stderr. */
#ifndef RPS_LOG_H
#define RPS_LOG_H

#include <stddef.h>
#include <stdint.h>

enum rps_log_level {
	RPS_LOG_ERROR = 0,
	RPS_LOG_WARN,
	RPS_LOG_INFO,
	RPS_LOG_DEBUG,
	RPS_LOG_TRACE,
};

extern int rps_log_level_cur;

void rps_log_set_level(int level);
/* "error".."trace" -> level, or -1 */
int rps_log_level_parse(const char *s);
/* Name shown in each line, e.g. "server" and rank 1 -> "server[1]". */
void rps_log_set_ident(const char *role, int rank);
void rps_log_emit(int level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Text a peer sent (error reasons, refusals, host names) goes through this
 * before it is logged: bytes outside printable ASCII, and the backslash, become
 * \xNN; trailing NULs are dropped (a C string); at most RPS_LOG_ESC_IN bytes are
 * shown, then "...". Writes a NUL-terminated string into buf (RPS_LOG_ESC_BUF
 * bytes hold any input) and returns buf. */
#define RPS_LOG_ESC_IN 200
#define RPS_LOG_ESC_BUF (RPS_LOG_ESC_IN * 4 + 4)
const char *rps_log_escape(const void *s, size_t n, char *buf, size_t len);

#define RPS_LOG(lvl, ...)                                                   \
	do {                                                                \
		if ((lvl) <= rps_log_level_cur)                             \
			rps_log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__); \
	} while (0)
/* Rate limiting, per call site (like the kernel's printk_ratelimited): at
 * most `burst` lines per `interval_ms`; the first line after a quiet spell
 * says how many were left out: "... (N similar messages suppressed)". For
 * anything a peer can make us say over and over (accept failures, refusals,
 * bad frames, connect retries). Thread-safe. */
struct rps_log_rl {
	uint64_t start_ns;	/* window start */
	unsigned shown;		/* lines shown in this window */
	unsigned suppressed;	/* lines left out since the last shown */
};
/* 1: show it (*suppressed_p: how many were left out before it), 0: drop. */
int rps_log_rl_check(struct rps_log_rl *rl, unsigned interval_ms, unsigned burst,
		     unsigned *suppressed_p);
/* The number of lines a limiter left out so far and not yet reported (tests). */
unsigned rps_log_rl_pending(struct rps_log_rl *rl);

#define RPS_LOG_RL_MS	 5000 /* default window */
#define RPS_LOG_RL_BURST 5    /* default lines per window */

#define RPS_LOG_RATELIMITED_EX(lvl, ms, burst, fmt, ...)                                   \
	do {                                                                              \
		static struct rps_log_rl rl_;                                             \
		unsigned sup_;                                                            \
		if ((lvl) <= rps_log_level_cur && rps_log_rl_check(&rl_, (ms), (burst), &sup_)) { \
			if (sup_)                                                         \
				rps_log_emit((lvl), __FILE__, __LINE__,                   \
					     fmt " (%u similar messages suppressed)",     \
					     ##__VA_ARGS__, sup_);                        \
			else                                                              \
				rps_log_emit((lvl), __FILE__, __LINE__, fmt, ##__VA_ARGS__); \
		}                                                                         \
	} while (0)
#define RPS_LOG_RATELIMITED(lvl, fmt, ...) \
	RPS_LOG_RATELIMITED_EX(lvl, RPS_LOG_RL_MS, RPS_LOG_RL_BURST, fmt, ##__VA_ARGS__)

#define RPS_ERR(...) RPS_LOG(RPS_LOG_ERROR, __VA_ARGS__)
#define RPS_WARN(...) RPS_LOG(RPS_LOG_WARN, __VA_ARGS__)
#define RPS_INFO(...) RPS_LOG(RPS_LOG_INFO, __VA_ARGS__)
#define RPS_DEBUG(...) RPS_LOG(RPS_LOG_DEBUG, __VA_ARGS__)
#define RPS_TRACE(...) RPS_LOG(RPS_LOG_TRACE, __VA_ARGS__)

#endif
