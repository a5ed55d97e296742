#include "worker/keytab.h"

#include <errno.h>
#include <string.h>

#include "src/alloc.h"
#include "src/optim.h"
#include "src/util.h"

#define KEYTAB_MIN_CAP 64

struct rps_keytab_arr {
	size_t cap; /* power of two */
	struct rps_keytab_arr *next_retired;
	_Atomic(struct rps_wkey *) slot[];
};

static struct rps_keytab_arr *arr_new(size_t cap)
{
	struct rps_keytab_arr *a;

	a = rps_calloc(1, sizeof(*a) + cap * sizeof(a->slot[0]));
	if (!a)
		return NULL;
	a->cap = cap;
	for (size_t i = 0; i < cap; i++)
		atomic_init(&a->slot[i], NULL);
	return a;
}

/* Store k in the first free slot of its probe sequence. */
static void arr_put(struct rps_keytab_arr *a, struct rps_wkey *k)
{
	size_t mask = a->cap - 1;

	for (size_t i = rps_hash64(k->key) & mask;; i = (i + 1) & mask) {
		if (!atomic_load_explicit(&a->slot[i], memory_order_relaxed)) {
			atomic_store_explicit(&a->slot[i], k, memory_order_release);
			return;
		}
	}
}

struct rps_wspec {
	struct rps_optim_opts opts;
	struct rps_wspec *next;
};

const struct rps_optim_opts *rps_keytab_spec(struct rps_keytab *t, const struct rps_optim_opts *o)
{
	struct rps_wspec *s;

	pthread_mutex_lock(&t->lock);
	for (s = t->specs; s; s = s->next)
		if (rps_optim_opts_same(&s->opts, o))
			break;
	if (!s) {
		s = rps_calloc(1, sizeof(*s));
		if (s) {
			s->opts = *o;
			s->next = t->specs;
			t->specs = s;
		}
	}
	pthread_mutex_unlock(&t->lock);
	return s ? &s->opts : NULL;
}

int rps_keytab_init(struct rps_keytab *t)
{
	struct rps_keytab_arr *a = arr_new(KEYTAB_MIN_CAP);

	if (!a)
		return -ENOMEM;
	atomic_init(&t->arr, a);
	t->retired = NULL;
	t->count = 0;
	t->specs = NULL;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void rps_keytab_fini(struct rps_keytab *t)
{
	struct rps_keytab_arr *a = atomic_load(&t->arr);

	if (!a)
		return;
	for (size_t i = 0; i < a->cap; i++)
		rps_free(atomic_load_explicit(&a->slot[i], memory_order_relaxed));
	rps_free(a);
	while (t->retired) {
		struct rps_keytab_arr *r = t->retired;

		t->retired = r->next_retired;
		rps_free(r);
	}
	while (t->specs) {
		struct rps_wspec *s = t->specs;

		t->specs = s->next;
		rps_free(s);
	}
	atomic_store(&t->arr, NULL);
	pthread_mutex_destroy(&t->lock);
}

size_t rps_keytab_count(struct rps_keytab *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}

const struct rps_wkey *rps_keytab_find(const struct rps_keytab *t, rps_key_t key)
{
	struct rps_keytab_arr *a =
		atomic_load_explicit(&((struct rps_keytab *)t)->arr, memory_order_acquire);
	size_t mask;

	if (!a)
		return NULL;
	mask = a->cap - 1;
	for (size_t i = rps_hash64(key) & mask;; i = (i + 1) & mask) {
		struct rps_wkey *k = atomic_load_explicit(&a->slot[i], memory_order_acquire);

		if (!k)
			return NULL;
		if (k->key == key)
			return k;
	}
}

int rps_keytab_insert(struct rps_keytab *t, struct rps_wkey *k, const struct rps_wkey **old_p)
{
	struct rps_keytab_arr *a;
	const struct rps_wkey *old;

	pthread_mutex_lock(&t->lock);
	old = rps_keytab_find(t, k->key);
	if (old) {
		pthread_mutex_unlock(&t->lock);
		if (old_p)
			*old_p = old;
		return -EEXIST;
	}
	a = atomic_load_explicit(&t->arr, memory_order_relaxed);
	if ((t->count + 1) * 2 > a->cap) {
		/* grow: readers keep using the old array until the new one is out */
		struct rps_keytab_arr *b = arr_new(a->cap * 2);

		if (!b) {
			pthread_mutex_unlock(&t->lock);
			return -ENOMEM;
		}
		for (size_t i = 0; i < a->cap; i++) {
			struct rps_wkey *e = atomic_load_explicit(&a->slot[i], memory_order_relaxed);

			if (e)
				arr_put(b, e);
		}
		atomic_store_explicit(&t->arr, b, memory_order_release);
		a->next_retired = t->retired;
		t->retired = a;
		a = b;
	}
	arr_put(a, k);
	t->count++;
	pthread_mutex_unlock(&t->lock);
	return 0;
}

void rps_keytab_foreach(const struct rps_keytab *t, void (*fn)(struct rps_wkey *k, void *arg),
			void *arg)
{
	struct rps_keytab_arr *a =
		atomic_load_explicit(&((struct rps_keytab *)t)->arr, memory_order_acquire);

	for (size_t i = 0; a && i < a->cap; i++) {
		struct rps_wkey *k = atomic_load_explicit(&a->slot[i], memory_order_acquire);

		if (k)
			fn(k, arg);
	}
}

struct rps_wkey *rps_wkey_new(const struct rps_keymap *m, rps_key_t key, uint64_t nelems)
{
	uint32_t ns = rps_keymap_num_slices(m, nelems);
	struct rps_wkey *k = rps_calloc(1, sizeof(*k) + ns * sizeof(k->slices[0]));

	if (!k)
		return NULL;
	k->key = key;
	k->nelems = nelems;
	k->nslices = ns;
	atomic_init(&k->optim, NULL);
	for (uint32_t i = 0; i < ns; i++) {
		struct rps_slice_loc loc;

		rps_keymap_locate(m, key, nelems, i, &loc);
		k->slices[i].server = loc.server;
		k->slices[i].shard = loc.shard;
		k->slices[i].offset = loc.offset;
		k->slices[i].nelems = loc.nelems;
	}
	return k;
}

int rps_keytab_check(const struct rps_keytab *t, const rps_key_t *keys, const size_t *lens,
		     size_t n, const void *buf, size_t *bad_p)
{
	if (!n)
		return 0;
	if (!keys || !lens || !buf) {
		if (bad_p)
			*bad_p = 0;
		return -EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct rps_wkey *k;
		int rc = rps_keytab_check1(t, keys[i], lens[i], &k);

		if (rc) {
			if (bad_p)
				*bad_p = i;
			return rc;
		}
	}
	return 0;
}

int rps_keytab_check1(const struct rps_keytab *t, rps_key_t key, size_t len,
		      const struct rps_wkey **k_p)
{
	const struct rps_wkey *k = rps_keytab_find(t, key);

	*k_p = k;
	if (!k)
		return -ENOENT;
	return len != k->nelems ? -EINVAL : 0;
}
