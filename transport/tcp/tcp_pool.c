/* TCP transport: the receive buffer pool.
 *
 * Buffers come in power-of-two size classes. Only the poller takes buffers
 * (from its private free lists, no lock); any thread gives one back with a
 * lock-free push onto `returned`; the poller takes the whole return list at
 * once (atomic exchange, so no ABA) when a free list runs dry. In steady
 * state no frame allocates. Each class caches at most TCP_POOL_CLASS_BYTES
 * (and at least 4 buffers); the surplus is freed.
 */
#include "transport/tcp/tcp_int.h"

#include "src/alloc.h"

static int size_class(size_t size)
{
	unsigned shift = TCP_POOL_MIN_SHIFT;

	if (size == 0)
		return 0;
	while (shift < 63 && ((size_t)1 << shift) < size)
		shift++;
	if ((int)(shift - TCP_POOL_MIN_SHIFT) + 1 >= TCP_POOL_CLASSES)
		return -1;
	return (int)(shift - TCP_POOL_MIN_SHIFT) + 1;
}

static size_t class_cap(int cls)
{
	return cls == 0 ? 0 : (size_t)1 << (TCP_POOL_MIN_SHIFT + cls - 1);
}

static uint32_t class_limit(int cls)
{
	uint64_t n = cls == 0 ? 1024 : TCP_POOL_CLASS_BYTES / class_cap(cls);

	if (n > 1024)
		n = 1024;
	return n < 4 ? 4 : (uint32_t)n;
}

static struct tcp_buf *buf_new(struct tcp_pool *p, size_t cap, int cls)
{
	struct tcp_buf *b = rps_malloc(sizeof(*b));

	if (!b)
		return NULL;
	b->next = NULL;
	b->cap = cap;
	b->cls = cls;
	b->data = NULL;
	if (cap) {
		b->data = rps_aligned_alloc(64, cap);
		if (!b->data) {
			rps_free(b);
			return NULL;
		}
	}
	atomic_fetch_add_explicit(&p->created, 1, memory_order_relaxed);
	return b;
}

static void buf_free(struct tcp_buf *b)
{
	rps_free(b->data);
	rps_free(b);
}

void tcp_pool_init(struct tcp_pool *p)
{
	for (int i = 0; i < TCP_POOL_CLASSES; i++) {
		p->free[i] = NULL;
		p->nfree[i] = 0;
	}
	atomic_init(&p->returned, NULL);
	atomic_init(&p->created, 0);
}

static void free_list(struct tcp_buf *b)
{
	while (b) {
		struct tcp_buf *next = b->next;

		buf_free(b);
		b = next;
	}
}

void tcp_pool_fini(struct tcp_pool *p)
{
	for (int i = 0; i < TCP_POOL_CLASSES; i++) {
		free_list(p->free[i]);
		p->free[i] = NULL;
		p->nfree[i] = 0;
	}
	free_list(atomic_exchange(&p->returned, NULL));
}

/* Sort the returned buffers into the free lists. */
static void pool_collect(struct tcp_pool *p)
{
	struct tcp_buf *b = atomic_exchange_explicit(&p->returned, NULL, memory_order_acquire);

	while (b) {
		struct tcp_buf *next = b->next;

		if (p->nfree[b->cls] < class_limit(b->cls)) {
			b->next = p->free[b->cls];
			p->free[b->cls] = b;
			p->nfree[b->cls]++;
		} else {
			buf_free(b);
		}
		b = next;
	}
}

struct tcp_buf *tcp_pool_get(struct tcp_pool *p, size_t size)
{
	int cls = size_class(size);
	struct tcp_buf *b;

	if (cls < 0)
		return buf_new(p, size, -1);
	if (!p->free[cls])
		pool_collect(p);
	b = p->free[cls];
	if (b) {
		p->free[cls] = b->next;
		p->nfree[cls]--;
		b->next = NULL;
		return b;
	}
	return buf_new(p, class_cap(cls), cls);
}

void tcp_pool_discard(struct tcp_pool *p, struct tcp_buf *b)
{
	if (b->cap >= TCP_POOL_KEEP_MAX) {
		buf_free(b); /* its pages go back now, not to the cache */
		return;
	}
	tcp_pool_put(p, b);
}

void tcp_pool_put(struct tcp_pool *p, struct tcp_buf *b)
{
	struct tcp_buf *head;

	if (b->cls < 0) {
		buf_free(b);
		return;
	}
	head = atomic_load_explicit(&p->returned, memory_order_relaxed);
	do {
		b->next = head;
	} while (!atomic_compare_exchange_weak_explicit(
	    &p->returned, &head, b, memory_order_release, memory_order_relaxed));
}
