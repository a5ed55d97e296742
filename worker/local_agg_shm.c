/* Aggregation on the host: the shared memory segments, the futex waits and
 * the members' liveness (robust mutexes). See worker/local_agg.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "src/alloc.h"
#include "src/log.h"
#include "src/util.h"
#include "worker/local_agg.h"

#define POLL_NS (10u * 1000u * 1000u) /* liveness / deadline checks */

static int map_fd(int fd, size_t bytes, void **p_p)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED)
		return -errno;
	*p_p = p;
	return 0;
}

int rps_lagg_ctl_open(const char *name, struct rps_lagg_ctl **ctl_p)
{
	struct stat st;
	void *p;
	int fd, rc;

	fd = shm_open(name, O_RDWR | O_CREAT, 0600);
	if (fd < 0) {
		rc = -errno;
		RPS_ERR("local aggregation: shm_open %s: %s", name, strerror(-rc));
		return rc;
	}
	/* every member sets the same size: whoever comes first creates it,
	 * zero-filled, the others change nothing */
	if (fstat(fd, &st) != 0 || (st.st_size != (off_t)sizeof(struct rps_lagg_ctl) &&
				    ftruncate(fd, sizeof(struct rps_lagg_ctl)) != 0)) {
		rc = -errno;
		RPS_ERR("local aggregation: sizing %s (%zu bytes): %s", name,
			sizeof(struct rps_lagg_ctl), strerror(-rc));
		close(fd);
		return rc;
	}
	rc = map_fd(fd, sizeof(struct rps_lagg_ctl), &p);
	close(fd);
	if (rc) {
		RPS_ERR("local aggregation: mmap %s: %s", name, strerror(-rc));
		return rc;
	}
	*ctl_p = p;
	return 0;
}

void rps_lagg_unmap(void *p, size_t len)
{
	if (p)
		munmap(p, len);
}

int rps_lagg_data_create(const char *name, size_t bytes, void **p_p)
{
	int fd, rc;

	(void)shm_unlink(name); /* a stale one: never reused */
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0) {
		rc = -errno;
		RPS_ERR("local aggregation: creating %s: %s", name, strerror(-rc));
		return rc;
	}
	if (ftruncate(fd, (off_t)bytes) != 0) {
		rc = -errno;
		RPS_ERR("local aggregation: sizing %s (%zu bytes; /dev/shm full?): %s", name, bytes,
			strerror(-rc));
		close(fd);
		shm_unlink(name);
		return rc;
	}
	rc = map_fd(fd, bytes, p_p);
	close(fd);
	if (rc) {
		RPS_ERR("local aggregation: mmap %s (%zu bytes): %s", name, bytes, strerror(-rc));
		shm_unlink(name);
	}
	return rc;
}

int rps_lagg_data_open(const char *name, size_t bytes, void **p_p)
{
	struct stat st;
	int fd, rc;

	fd = shm_open(name, O_RDWR, 0);
	if (fd < 0) {
		rc = -errno;
		RPS_ERR("local aggregation: opening %s: %s", name, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0 || st.st_size != (off_t)bytes) {
		RPS_ERR("local aggregation: %s has %lld bytes, the leader announced %zu", name,
			(long long)st.st_size, bytes);
		close(fd);
		return -EPROTO;
	}
	rc = map_fd(fd, bytes, p_p);
	close(fd);
	if (rc)
		RPS_ERR("local aggregation: mmap %s (%zu bytes): %s", name, bytes, strerror(-rc));
	return rc;
}

/* ---- liveness ---- */

int rps_lagg_alive(struct rps_lagg_slot *s)
{
	int rc = pthread_mutex_trylock(&s->life);

	if (rc == EBUSY)
		return 1;
	if (rc == EOWNERDEAD) { /* its process (or life thread) died holding it */
		pthread_mutex_consistent(&s->life);
		pthread_mutex_unlock(&s->life);
	} else if (rc == 0) { /* released: the member left */
		pthread_mutex_unlock(&s->life);
	}
	return 0; /* ENOTRECOVERABLE and the rest: gone as well */
}

struct rps_lagg_life {
	struct rps_lagg_slot *slot;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int locked, stop, rc;
};

/* Holds the slot's robust mutex until told to stop: the peers' trylock sees
 * EBUSY while this process lives, EOWNERDEAD once it died. A thread of its
 * own, so that the caller's thread may come and go. */
static void *life_main(void *arg)
{
	struct rps_lagg_life *l = arg;
	int rc = pthread_mutex_lock(&l->slot->life);

	if (rc == EOWNERDEAD) {
		pthread_mutex_consistent(&l->slot->life);
		rc = 0;
	}
	pthread_mutex_lock(&l->lock);
	l->locked = 1;
	l->rc = -rc;
	pthread_cond_broadcast(&l->cond);
	while (!l->stop)
		pthread_cond_wait(&l->cond, &l->lock);
	pthread_mutex_unlock(&l->lock);
	if (!rc)
		pthread_mutex_unlock(&l->slot->life);
	return NULL;
}

int rps_lagg_life_start(struct rps_lagg_slot *s, struct rps_lagg_life **life_p)
{
	struct rps_lagg_life *l = rps_calloc(1, sizeof(*l));
	pthread_mutexattr_t a;
	int rc;

	if (!l)
		return -ENOMEM;
	pthread_mutexattr_init(&a);
	pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
	rc = pthread_mutex_init(&s->life, &a);
	pthread_mutexattr_destroy(&a);
	if (rc) {
		rps_free(l);
		RPS_ERR("local aggregation: robust mutex: %s", strerror(rc));
		return -rc;
	}
	l->slot = s;
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->cond, NULL);
	rc = pthread_create(&l->thread, NULL, life_main, l);
	if (rc) {
		RPS_ERR("local aggregation: life thread: %s", strerror(rc));
		goto err;
	}
	pthread_setname_np(l->thread, "rps-lagg-life");
	pthread_mutex_lock(&l->lock);
	while (!l->locked)
		pthread_cond_wait(&l->cond, &l->lock);
	rc = -l->rc;
	pthread_mutex_unlock(&l->lock);
	if (rc) {
		RPS_ERR("local aggregation: locking the life mutex: %s", strerror(rc));
		rps_lagg_life_stop(l);
		return -rc;
	}
	*life_p = l;
	return 0;
err:
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	rps_free(l);
	return -rc;
}

void rps_lagg_life_stop(struct rps_lagg_life *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->lock);
	l->stop = 1;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	pthread_join(l->thread, NULL);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
	rps_free(l);
}

/* ---- waits ---- */

static void futex_wait(_Atomic uint32_t *word, uint32_t val, uint32_t ns)
{
	struct timespec ts = { 0, (long)ns };

	/* shared (not FUTEX_PRIVATE_FLAG): the word is in a MAP_SHARED segment */
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

void rps_lagg_wake(_Atomic uint32_t *word)
{
	syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

int rps_lagg_wait(struct rps_lagg_ctl *ctl, _Atomic uint32_t *word, uint32_t target,
		  struct rps_lagg_slot *watch, uint64_t deadline_ns)
{
	uint64_t next_check = 0;

	for (int spin = 0;; spin++) {
		uint32_t v = atomic_load_explicit(word, memory_order_acquire);
		uint64_t now;

		if ((int32_t)(v - target) >= 0)
			return 0;
		if (spin < 64)
			continue;
		now = rps_now_ns();
		if (now >= next_check) {
			if (atomic_load(&ctl->failed))
				return -EHOSTDOWN;
			if (watch && !rps_lagg_alive(watch)) {
				/* it may have finished just before it went */
				v = atomic_load_explicit(word, memory_order_acquire);
				return (int32_t)(v - target) >= 0 ? 0 : -EHOSTDOWN;
			}
			if (deadline_ns && now >= deadline_ns)
				return -ETIMEDOUT;
			next_check = now + POLL_NS;
		}
		futex_wait(word, v, POLL_NS);
	}
}

/* ---- sweeping what dead jobs left ---- */

static int ctl_all_gone(const char *name)
{
	struct rps_lagg_ctl *ctl;
	struct stat st;
	int fd = shm_open(name, O_RDWR, 0), gone = 1;
	void *p;

	if (fd < 0)
		return 0;
	if (fstat(fd, &st) != 0 || st.st_size != (off_t)sizeof(*ctl) ||
	    map_fd(fd, sizeof(*ctl), &p) != 0) {
		close(fd);
		return 1; /* not one of our ctl segments: old junk */
	}
	close(fd);
	ctl = p;
	if (atomic_load(&ctl->magic) == RPS_LAGG_MAGIC)
		for (int i = 0; i < RPS_MAX_WORKERS && gone; i++) {
			uint32_t s = atomic_load(&ctl->slot[i].state);

			if (s == RPS_LAGG_INIT || (s == RPS_LAGG_READY && rps_lagg_alive(&ctl->slot[i])))
				gone = 0;
		}
	munmap(p, sizeof(*ctl));
	return gone;
}

void rps_lagg_sweep(int max_age_s)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	time_t now = time(NULL);
	uid_t me = getuid();

	if (!d)
		return;
	while ((e = readdir(d))) {
		char path[300], name[300];
		struct stat st;

		if (strncmp(e->d_name, &RPS_LAGG_PREFIX[1], strlen(RPS_LAGG_PREFIX) - 1))
			continue;
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		snprintf(name, sizeof(name), "/%s", e->d_name);
		if (stat(path, &st) != 0 || st.st_uid != me || now - st.st_mtime < max_age_s)
			continue;
		size_t len = strlen(e->d_name);
		int data = len > 2 && !strcmp(e->d_name + len - 2, "-d");

		if (!data && !ctl_all_gone(name))
			continue;
		if (shm_unlink(name) == 0)
			RPS_WARN("local aggregation: removed %s, left by a job that died (%lld s old)",
				 path, (long long)(now - st.st_mtime));
	}
	closedir(d);
}
