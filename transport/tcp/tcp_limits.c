/* TCP transport: what one accepted peer may hold (poller only).
 *
 * - Admission: at most params.max_conns accepted connections at once, and
 *   params.max_conns_per_addr from one address (every phase counts); a
 *   socket beyond them is closed at once.
 * - Out of descriptors (EMFILE / ENFILE, or the kernel short of memory):
 *   the reserve descriptor (/dev/null, opened with the first listener) is
 *   given up to accept the newest pending connection and close it, then
 *   reopened; the listeners are taken out of epoll for
 *   params.accept_backoff_ms, so the poller never spins on a listener it
 *   cannot serve. One log line per interval says how often.
 * - Deadlines, checked every TCP_SWEEP_MS: a frame once begun must be whole
 *   within frame_timeout_ms + len / frame_min_rate; an established
 *   connection silent for idle_timeout_ms (if set) is closed; output queued
 *   for a peer that has not taken a byte of it for frame_timeout_ms cuts it (and
 *   tcp_send.c cuts it at once past sq_max). Connections we opened
 *   ourselves are not limited here: their owner waits for them.
 * Depends on tcp_conn.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "src/log.h"
#include "src/util.h"
#include "transport/tcp/tcp_int.h"

#define SWEEP_MAX 64 /* connections failed per sweep (the rest: next sweep) */

enum { WHY_FRAME = 1, WHY_IDLE, WHY_STALL, WHY_CUT };

static void listeners_set(struct tcp_transport *tt, int on)
{
	for (int i = 0; i < tt->nlisteners; i++) {
		struct tcp_listener *l = tt->listeners[i];
		struct epoll_event e = {.events = on ? EPOLLIN : 0, .data.ptr = &l->kind};

		if (epoll_ctl(tt->ep, EPOLL_CTL_MOD, l->fd, &e) < 0)
			RPS_ERR("tcp: listener on port %u: epoll_ctl: %m", l->port);
	}
}

void tcp_accept_failed(struct tcp_transport *tt, struct tcp_listener *l, int err)
{
	const struct rps_tr_params *p = &tt->base.params;
	int backoff = p->accept_backoff_ms > 0 ? p->accept_backoff_ms : 100;
	int shed = 0;

	if ((err == EMFILE || err == ENFILE) && tt->reserve_fd >= 0) {
		int fd;

		close(tt->reserve_fd);
		tt->reserve_fd = -1;
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd >= 0) {
			close(fd);
			shed = 1;
		}
		tt->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	}
	listeners_set(tt, 0);
	tt->accept_resume_ns = rps_now_ns() + (uint64_t)backoff * 1000000ull;
	RPS_LOG_RATELIMITED_EX(RPS_LOG_WARN, RPS_LOG_RL_MS, 1,
			       "tcp: accept on port %u: %s: %s, not accepting for %d ms "
			       "(%d connections open; RDMAPS_MAX_CONNS %d, see ulimit -n)",
			       l->port, strerror(err),
			       shed ? "closed the newest connection" : "nothing shed", backoff,
			       tt->naccepted, p->max_conns);
}

int tcp_admit(struct tcp_transport *tt, const char *ip, const char *peer)
{
	const struct rps_tr_params *p = &tt->base.params;
	int same = 0;

	if (p->max_conns > 0 && tt->naccepted >= p->max_conns) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "tcp: refusing %s: %d connections open (RDMAPS_MAX_CONNS)",
				    peer, tt->naccepted);
		return -EMFILE;
	}
	if (p->max_conns_per_addr <= 0)
		return 0;
	pthread_mutex_lock(&tt->lock);
	for (struct tcp_conn *c = tt->conns; c; c = c->anext)
		if (c->counted && !strcmp(c->ip, ip))
			same++;
	pthread_mutex_unlock(&tt->lock);
	if (same >= p->max_conns_per_addr) {
		RPS_LOG_RATELIMITED(RPS_LOG_WARN,
				    "tcp: refusing %s: %d connections open from %s "
				    "(RDMAPS_MAX_CONNS_PER_ADDR)",
				    peer, same, ip);
		return -EMFILE;
	}
	return 0;
}

void tcp_rx_mark(struct tcp_conn *c, uint64_t now)
{
	const struct rps_tr_params *p = &c->tt->base.params;
	int mid = c->rx_state != TCP_RX_HDR || c->stage_len > c->stage_pos;

	c->last_rx_ns = now;
	if (!mid) {
		c->rx_deadline = 0;
		return;
	}
	if (c->rx_deadline || p->frame_timeout_ms <= 0)
		return;
	c->rx_deadline = now + (uint64_t)p->frame_timeout_ms * 1000000ull;
	if (c->rx_state != TCP_RX_HDR && p->frame_min_rate)
		c->rx_deadline += (uint64_t)c->rx_hdr.len * 1000000000ull / p->frame_min_rate;
}

/* Output that does not move for this long: the peer does not read. */
static uint64_t stall_ns(const struct tcp_transport *tt)
{
	int ms = tt->base.params.frame_timeout_ms > 0 ? tt->base.params.frame_timeout_ms
						      : tt->timeout_ms;

	return (uint64_t)ms * 1000000ull;
}

static int why_of(struct tcp_conn *c, uint64_t now)
{
	const struct rps_tr_params *p = &c->tt->base.params;
	int stalled, paused;

	pthread_mutex_lock(&c->slock);
	if (c->wr_err && !c->dead) {
		pthread_mutex_unlock(&c->slock);
		return WHY_CUT; /* cut by a sender (tcp_send.c), which could not fail it */
	}
	/* now was read before the lock: a sender (an update thread) may have
	 * started the stall clock since, later than now */
	stalled = c->sq_head && !c->dead && now > c->last_tx_ns &&
		  now - c->last_tx_ns >= stall_ns(c->tt);
	paused = c->rx_paused;
	pthread_mutex_unlock(&c->slock);
	if (stalled)
		return WHY_STALL;
	if (paused)
		return 0; /* we do not read it now: its frame's clock restarts at resume */
	if (c->rx_deadline && now >= c->rx_deadline)
		return WHY_FRAME;
	if (c->phase == TCP_PH_OPEN && p->idle_timeout_ms > 0 &&
	    now - c->last_rx_ns >= (uint64_t)p->idle_timeout_ms * 1000000ull)
		return WHY_IDLE;
	return 0;
}

void tcp_limits_sweep(struct tcp_transport *tt, uint64_t now)
{
	const struct rps_tr_params *p = &tt->base.params;
	struct tcp_conn *victim[SWEEP_MAX];
	int why[SWEEP_MAX], n = 0;

	if (tt->accept_resume_ns && now >= tt->accept_resume_ns) {
		tt->accept_resume_ns = 0;
		listeners_set(tt, 1);
	}
	if (now < tt->next_sweep_ns || !tt->naccepted)
		return;
	tt->next_sweep_ns = now + TCP_SWEEP_MS * 1000000ull;
	pthread_mutex_lock(&tt->lock);
	for (struct tcp_conn *c = tt->conns; c && n < SWEEP_MAX; c = c->anext) {
		int w;

		if (!c->accepted || c->failed || c->fd < 0)
			continue;
		w = why_of(c, now);
		if (w) {
			victim[n] = c;
			why[n++] = w;
		}
	}
	pthread_mutex_unlock(&tt->lock);
	/* Only the poller frees connections: the victims are all still there. */
	for (int i = 0; i < n; i++) {
		struct tcp_conn *c = victim[i];

		tcp_abort_on_close(c);
		switch (why[i]) {
		case WHY_FRAME:
			if (c->rx_state == TCP_RX_HDR)
				RPS_LOG_RATELIMITED(
				    RPS_LOG_WARN,
				    "closing %s: a frame header not whole within its "
				    "deadline (RDMAPS_FRAME_TIMEOUT_MS %d)",
				    c->base.peer, p->frame_timeout_ms);
			else
				RPS_LOG_RATELIMITED(
				    RPS_LOG_WARN,
				    "closing %s: a %u-byte frame not whole within its "
				    "deadline (RDMAPS_FRAME_TIMEOUT_MS %d + size / "
				    "RDMAPS_FRAME_MIN_RATE)",
				    c->base.peer, c->rx_hdr.len, p->frame_timeout_ms);
			tcp_conn_fail(c, -ETIMEDOUT, 0, NULL);
			break;
		case WHY_IDLE:
			RPS_LOG_RATELIMITED(RPS_LOG_INFO,
					    "closing %s: silent for %d ms (RDMAPS_IDLE_TIMEOUT_MS)",
					    c->base.peer, p->idle_timeout_ms);
			tcp_conn_fail(c, -ETIMEDOUT, 0, NULL);
			break;
		case WHY_CUT:
			tcp_conn_fail(c, -ECONNRESET, 0, NULL); /* said why already */
			break;
		default:
			RPS_LOG_RATELIMITED(
			    RPS_LOG_WARN,
			    "closing %s: peer not reading: its output did not move for "
			    "%llu ms (RDMAPS_FRAME_TIMEOUT_MS)",
			    c->base.peer, (unsigned long long)(stall_ns(tt) / 1000000ull));
			tcp_conn_fail(c, -ETIMEDOUT, 0, NULL);
			break;
		}
	}
	if (n == SWEEP_MAX)
		tt->next_sweep_ns = now; /* more may be due */
}

void tcp_abort_on_close(struct tcp_conn *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	/* a reset, not a FIN stuck behind megabytes a peer will never read: the
	 * kernel drops the socket's buffers at once instead of keeping an orphan */
	if (c->fd >= 0)
		setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

int tcp_limits_wait_ms(struct tcp_transport *tt, uint64_t now)
{
	uint64_t at = 0;

	if (tt->accept_resume_ns)
		at = tt->accept_resume_ns;
	if (tt->naccepted && (!at || tt->next_sweep_ns < at))
		at = tt->next_sweep_ns;
	if (!at)
		return -1;
	return at > now ? (int)((at - now + 999999) / 1000000) : 0;
}
