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
