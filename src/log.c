#include "src/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

int rps_log_level_cur = RPS_LOG_INFO;
static char log_ident[48] = "rdmaps";
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static const char *const level_names[] = { "error", "warn", "info", "debug", "trace" };

void rps_log_set_level(int level)
{
	if (level >= RPS_LOG_ERROR && level <= RPS_LOG_TRACE)
		rps_log_level_cur = level;
}

int rps_log_level_parse(const char *s)
{
	for (int i = 0; i <= RPS_LOG_TRACE; i++)
		if (!strcasecmp(s, level_names[i]))
			return i;
	return -1;
}

void rps_log_set_ident(const char *role, int rank)
{
	if (rank >= 0)
		snprintf(log_ident, sizeof(log_ident), "%s[%d]", role, rank);
	else
		snprintf(log_ident, sizeof(log_ident), "%s", role);
}

void rps_log_emit(int level, const char *file, int line, const char *fmt, ...)
{
	char msg[1024];
	struct timespec ts;
	struct tm tm;
	const char *base = strrchr(file, '/');
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &ts);
	localtime_r(&ts.tv_sec, &tm);
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%02d:%02d:%02d.%03ld %s %s %s:%d %s\n", tm.tm_hour, tm.tm_min,
		tm.tm_sec, ts.tv_nsec / 1000000, log_ident, level_names[level],
		base ? base + 1 : file, line, msg);
	pthread_mutex_unlock(&log_lock);
}

static pthread_mutex_t rl_lock = PTHREAD_MUTEX_INITIALIZER;

int rps_log_rl_check(struct rps_log_rl *rl, unsigned interval_ms, unsigned burst,
		     unsigned *suppressed_p)
{
	struct timespec ts;
	uint64_t now;
	int show = 0;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	pthread_mutex_lock(&rl_lock);
	if (!rl->start_ns || now - rl->start_ns >= (uint64_t)interval_ms * 1000000ull) {
		rl->start_ns = now ? now : 1;
		rl->shown = 0;
	}
	if (rl->shown < (burst ? burst : 1)) {
		rl->shown++;
		*suppressed_p = rl->suppressed;
		rl->suppressed = 0;
		show = 1;
	} else {
		rl->suppressed++;
	}
	pthread_mutex_unlock(&rl_lock);
	return show;
}

unsigned rps_log_rl_pending(struct rps_log_rl *rl)
{
	unsigned n;

	pthread_mutex_lock(&rl_lock);
	n = rl->suppressed;
	pthread_mutex_unlock(&rl_lock);
	return n;
}

const char *rps_log_escape(const void *s, size_t n, char *buf, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const unsigned char *p = s;
	size_t o = 0, i;

	if (!len)
		return buf;
	if (!p)
		n = 0;
	while (n && !p[n - 1])
		n--;
	for (i = 0; i < n && i < RPS_LOG_ESC_IN; i++) {
		unsigned char c = p[i];
		size_t need = (c < 0x20 || c > 0x7e || c == '\\') ? 4 : 1;

		if (o + need + 1 > len)
			break;
		if (need == 1) {
			buf[o++] = (char)c;
		} else {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	if (i < n) { /* cut: show it, room permitting */
		while (o && o + 4 > len)
			o--;
		if (o + 4 <= len) {
			memcpy(buf + o, "...", 3);
			o += 3;
		}
	}
	buf[o] = 0;
	return buf;
}
