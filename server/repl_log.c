/* The head's log of forwarded entries (server/repl_log.h). */
#include "server/repl_log.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "src/alloc.h"
#include "src/log.h"

struct rec {
	struct rec *next;
	uint64_t seq;
	struct rps_frame_hdr h;
	char data[];
};

struct shard_log {
	pthread_mutex_t lock;
	struct rec *head, *tail;
	uint64_t next_seq;
};

struct rps_repl_log {
	int nshards;
	atomic_int broken;
	struct shard_log s[];
};

struct rps_repl_log *rps_repl_log_new(int nshards)
{
	struct rps_repl_log *l = rps_calloc(1, sizeof(*l) + (size_t)nshards * sizeof(l->s[0]));

	if (!l)
		return NULL;
	l->nshards = nshards;
	for (int i = 0; i < nshards; i++)
		pthread_mutex_init(&l->s[i].lock, NULL);
	return l;
}

void rps_repl_log_free(struct rps_repl_log *l)
{
	if (!l)
		return;
	for (int i = 0; i < l->nshards; i++) {
		rps_repl_log_trim(l, i, UINT64_MAX);
		pthread_mutex_destroy(&l->s[i].lock);
	}
	rps_free(l);
}

void rps_repl_log_lock(struct rps_repl_log *l, int shard)
{
	pthread_mutex_lock(&l->s[shard].lock);
}

void rps_repl_log_unlock(struct rps_repl_log *l, int shard)
{
	pthread_mutex_unlock(&l->s[shard].lock);
}

uint64_t rps_repl_log_add(struct rps_repl_log *l, int shard, const struct rps_frame_hdr *h,
			  const struct iovec *iov, int n)
{
	struct shard_log *s = &l->s[shard];
	struct rec *r;
	size_t off = 0;

	if (atomic_load(&l->broken))
		return 0;
	r = rps_malloc(sizeof(*r) + h->len);
	if (!r) {
		if (!atomic_exchange(&l->broken, 1))
			RPS_ERR("replication: no memory for the log of forwarded entries: if the "
				"first backup dies now, the second cannot take its place");
		return 0;
	}
	r->next = NULL;
	r->seq = ++s->next_seq;
	r->h = *h;
	for (int i = 0; i < n; i++) {
		memcpy(r->data + off, iov[i].iov_base, iov[i].iov_len);
		off += iov[i].iov_len;
	}
	if (s->tail)
		s->tail->next = r;
	else
		s->head = r;
	s->tail = r;
	return r->seq;
}

uint64_t rps_repl_log_last(const struct rps_repl_log *l, int shard)
{
	return l->s[shard].next_seq;
}

int rps_repl_log_broken(const struct rps_repl_log *l)
{
	return atomic_load(&((struct rps_repl_log *)l)->broken);
}

void rps_repl_log_trim(struct rps_repl_log *l, int shard, uint64_t upto)
{
	struct shard_log *s = &l->s[shard];

	pthread_mutex_lock(&s->lock);
	while (s->head && s->head->seq <= upto) {
		struct rec *r = s->head;

		s->head = r->next;
		rps_free(r);
	}
	if (!s->head)
		s->tail = NULL;
	pthread_mutex_unlock(&s->lock);
}

int rps_repl_log_each(struct rps_repl_log *l, int shard,
		      int (*fn)(void *arg, uint64_t seq, const struct rps_frame_hdr *h,
				const void *payload),
		      void *arg)
{
	for (struct rec *r = l->s[shard].head; r; r = r->next) {
		int rc = fn(arg, r->seq, &r->h, r->data);

		if (rc)
			return rc;
	}
	return 0;
}
