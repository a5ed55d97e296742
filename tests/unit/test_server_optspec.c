/* The job's optimizer spec per slice, without a network: a slice declared
 * with a spec runs it (not the shard's default), bit for bit what
 * rps_optim_apply gives; the rules for a second DECLARE (same spec, another
 * spec, no spec, a spec after updates) with their reasons; specs interned per
 * shard; clipping with the slice's clip_norm; checkpoints keep the spec
 * (format version 2) and version-1 files are still read. */
#include <dirent.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rdmaps/optim.h>

#include "src/ckpt.h"
#include "tests/unit/test_server_util.h"

struct fixture {
	struct rps_shard sh;
	struct t_io io;
	char dir[64];
};

/* ASP (every push one step), the default sgd lr 0.5 of t_params */
static void params(struct fixture *f, struct rps_shard_params *p, enum rps_consistency c)
{
	t_params(p, c);
	p->ckpt_dir = f->dir;
	p->server_shards = 1;
}

static int setup_c(void **state, enum rps_consistency c)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct rps_shard_params p;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/rps-optspec-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	params(f, &p, c);
	assert_int_equal(rps_shard_init(&f->sh, &p, &t_io_ops, &f->io), 0);
	atomic_store(&f->sh.server_rank, 0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	return setup_c(state, RPS_ASP);
}

static int setup_bsp(void **state)
{
	return setup_c(state, RPS_BSP);
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	DIR *d = opendir(f->dir);
	struct dirent *de;
	char path[512];

	rps_shard_stop(&f->sh);
	rps_shard_fini(&f->sh);
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", f->dir, de->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(f->dir);
	free(f);
	return 0;
}

#define N 20

static void adam_spec(struct rps_optim_opts *o)
{
	rps_optim_opts_init(o);
	o->kind = RPS_OPT_ADAMW;
	o->lr = 0.01f;
	o->weight_decay = 0.1f;
	o->schedule = RPS_LR_LINEAR;
	o->total_steps = 10;
	o->warmup_steps = 3;
	o->lr_min = 0.001f;
}

static void grad(float *g, int step)
{
	for (int i = 0; i < N; i++)
		g[i] = (float)((i * 7 + step * 3) % 11) - 5.0f;
}

/* k ASP pushes of slice (key, 0) from worker 0 at clock 0 */
static void pushes(struct rps_shard *sh, uint64_t key, int k0, int k)
{
	float g[N];

	for (int s = k0; s < k0 + k; s++) {
		grad(g, s);
		t_push(sh, 0, key, 0, 0, N, 0, g, (uint32_t)(500 + s));
	}
}

/* what the slice must hold after k steps of o from w0 */
static void local(const struct rps_optim_opts *o, float w0, int k, float *w)
{
	struct rps_optimizer *opt;
	float g[N];

	assert_int_equal(rps_optimizer_create(o, N, &opt), 0);
	for (int i = 0; i < N; i++)
		w[i] = w0;
	for (int s = 0; s < k; s++) {
		grad(g, s);
		rps_optimizer_step(opt, w, g);
	}
	rps_optimizer_destroy(opt);
}

/* A spec'd slice runs its spec; a slice without one the shard's default. */
static void test_spec_applied(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_optim_opts o;
	float want[N], got[N];

	adam_spec(&o);
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), 0);
	assert_int_equal(t_declare(sh, 8, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	assert_non_null(rps_srv_keytab_lookup(&sh->tab, 7, 0)->spec);
	assert_null(rps_srv_keytab_lookup(&sh->tab, 8, 0)->spec);
	assert_non_null(rps_srv_keytab_lookup(&sh->tab, 7, 0)->opt.v); /* adam's state */
	pushes(sh, 7, 0, 6);
	pushes(sh, 8, 0, 6);
	local(&o, 1.0f, 6, want);
	t_read(sh, 7, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
	local(&sh->p.optim, 1.0f, 6, want);
	t_read(sh, 8, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
	/* another slice with an equal spec shares the shard's copy */
	assert_int_equal(t_declare_opt(sh, 9, 0, N, RPS_INIT_ZEROS, 0, 0, &o, NULL), 0);
	assert_ptr_equal(rps_srv_keytab_lookup(&sh->tab, 9, 0)->spec,
			 rps_srv_keytab_lookup(&sh->tab, 7, 0)->spec);
	assert_int_equal(sh->nspecs, 1);
}

/* Same spec: fine. Another: -EINVAL naming the key and both, nothing moves.
 * No spec: the slice keeps its own. */
static void test_second_declare(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_optim_opts o, other;
	const struct rps_shard_spec *before;
	struct rps_declare_ack a1, a2;
	float want[N], got[N];

	adam_spec(&o);
	rps_optim_opts_init(&other);
	other.kind = RPS_OPT_MOMENTUM;
	other.lr = 0.1f;
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, &a1), 0);
	pushes(sh, 7, 0, 2);
	before = rps_srv_keytab_lookup(&sh->tab, 7, 0)->spec;
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, &a2), 0);
	assert_int_equal(a2.offset, a1.offset);
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &other, NULL),
			 -EINVAL);
	assert_non_null(strstr(f->io.why, "key 7 slice 0"));
	assert_non_null(strstr(f->io.why, "optimizer momentum lr 0.1 refused"));
	assert_non_null(strstr(f->io.why, "already has adamw lr 0.01 linear over 10 warmup 3"));
	assert_int_equal(t_declare(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	assert_ptr_equal(rps_srv_keytab_lookup(&sh->tab, 7, 0)->spec, before);
	assert_int_equal(sh->nspecs, 1);
	/* and it goes on with its spec */
	pushes(sh, 7, 2, 3);
	local(&o, 1.0f, 5, want);
	t_read(sh, 7, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
}

/* A spec for a slice declared without one: taken before any update (its
 * state made for the new kind), refused after. */
static void test_spec_after_default(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_optim_opts o;
	struct rps_slice_meta *m;
	float want[N], got[N];

	adam_spec(&o);
	assert_int_equal(t_declare(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	assert_int_equal(t_declare(sh, 8, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	m = rps_srv_keytab_lookup(&sh->tab, 7, 0);
	assert_null(m->opt.m); /* sgd: no state */
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), 0);
	assert_non_null(m->spec);
	assert_non_null(m->opt.m);
	assert_non_null(m->opt.v);
	pushes(sh, 7, 0, 4);
	local(&o, 1.0f, 4, want);
	t_read(sh, 7, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));

	pushes(sh, 8, 0, 1);
	t_read(sh, 8, 0, 0, N, want);
	assert_int_equal(t_declare_opt(sh, 8, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), -EINVAL);
	assert_non_null(strstr(f->io.why, "key 8 slice 0"));
	assert_non_null(strstr(f->io.why, "already trained with the servers' default optimizer"));
	m = rps_srv_keytab_lookup(&sh->tab, 8, 0);
	assert_null(m->spec);
	assert_null(m->opt.m);
	t_read(sh, 8, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
}

/* The slice's clip_norm, per tensor: a spec with clip 1 clips, the default
 * (no clipping) does not. Under BSP the sum is applied once per clock. */
static void test_clip_per_spec(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh;
	struct rps_optim_opts o;
	float g[4] = {1, 1, 1, 1}, v[4];

	rps_optim_opts_init(&o);
	o.lr = 1.0f;
	o.clip_norm = 1.0f; /* ||g|| = 2 per worker: each scaled by 1/2 */
	assert_int_equal(t_declare_opt(sh, 7, 0, 4, RPS_INIT_ZEROS, 0, 0, &o, NULL), 0);
	assert_int_equal(t_declare(sh, 8, 0, 4, RPS_INIT_ZEROS, 0, 0, NULL), 0);
	for (uint32_t w = 0; w < 2; w++) {
		t_push(sh, w, 7, 0, 0, 4, 0, g, 10 + w);
		t_push(sh, w, 8, 0, 0, 4, 0, g, 20 + w);
		t_clock(sh, w, 0, 2);
	}
	t_read(sh, 7, 0, 0, 4, v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == -1.0f); /* lr 1 * (0.5 + 0.5) */
	t_read(sh, 8, 0, 0, 4, v);
	for (int i = 0; i < 4; i++)
		assert_true(v[i] == -1.0f); /* default: sgd lr 0.5 * (1 + 1) */
	/* the spec's step counts the clock: clock 1 again */
	for (uint32_t w = 0; w < 2; w++) {
		t_push(sh, w, 7, 0, 0, 4, 1, g, 30 + w);
		t_clock(sh, w, 1, 1);
	}
	t_read(sh, 7, 0, 0, 4, v);
	assert_true(v[0] == -2.0f);
}

static void restore(struct fixture *f, struct rps_shard *sh2, struct t_io *io2,
		    const struct rps_optim_opts *dflt, uint64_t clock, int want_rc)
{
	struct rps_shard_params p;
	struct rps_shard_restore r;

	params(f, &p, RPS_ASP);
	p.optim = *dflt;
	assert_int_equal(rps_shard_init(sh2, &p, &t_io_ops, io2), 0);
	memset(&r, 0, sizeof(r));
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, clock, r.path, sizeof(r.path)), 0);
	r.rank = 0;
	r.nshards = 1;
	rps_shard_restore_run(sh2, &r);
	assert_int_equal(r.rc, want_rc);
}

/* A checkpoint keeps each slice's spec: restored under another default, the
 * spec'd slice goes on with its spec. */
static void test_ckpt_keeps_spec(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh, sh2;
	struct rps_optim_opts o, dflt;
	struct t_io io2;
	struct rps_slice_meta *m;
	float want[N], got[N];

	adam_spec(&o);
	assert_int_equal(t_declare_opt(sh, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), 0);
	assert_int_equal(t_declare(sh, 8, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	pushes(sh, 7, 0, 3);
	assert_int_equal(rps_shard_ckpt_write(sh), 0);

	/* another default kind: key 8 (no spec, sgd) is refused by name */
	memset(&io2, 0, sizeof(io2));
	rps_optim_opts_init(&dflt);
	dflt.kind = RPS_OPT_MOMENTUM;
	restore(f, &sh2, &io2, &dflt, 0, -EINVAL);
	rps_shard_fini(&sh2);

	/* the same default kind, another lr: key 7 keeps adamw */
	dflt.kind = RPS_OPT_SGD;
	dflt.lr = 3.0f;
	memset(&io2, 0, sizeof(io2));
	restore(f, &sh2, &io2, &dflt, 0, 0);
	m = rps_srv_keytab_lookup(&sh2.tab, 7, 0);
	assert_non_null(m->spec);
	assert_true(rps_optim_opts_same(&m->spec->opts, &o));
	assert_int_equal(m->opt.step, 3);
	assert_null(rps_srv_keytab_lookup(&sh2.tab, 8, 0)->spec);
	pushes(&sh2, 7, 3, 4);
	local(&o, 1.0f, 7, want);
	t_read(&sh2, 7, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
	/* the worker re-declaring with its spec is fine, with another refused */
	assert_int_equal(t_declare_opt(&sh2, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), 0);
	o.lr = 0.5f;
	assert_int_equal(t_declare_opt(&sh2, 7, 0, N, RPS_INIT_CONST, 1.0f, 0, &o, NULL), -EINVAL);
	rps_shard_fini(&sh2);
}

/* A version-1 file (no specs: a version-2 file without any, but for the
 * version) is still read: its slices take the server's default. */
static void test_ckpt_v1_read(void **state)
{
	struct fixture *f = *state;
	struct rps_shard *sh = &f->sh, sh2;
	struct rps_ckpt_hdr h;
	struct t_io io2;
	char path[RPS_CKPT_PATH_MAX];
	float want[N], got[N];
	FILE *fp;

	assert_int_equal(t_declare(sh, 8, 0, N, RPS_INIT_CONST, 1.0f, 0, NULL), 0);
	pushes(sh, 8, 0, 2);
	assert_int_equal(rps_shard_ckpt_write(sh), 0);
	assert_int_equal(rps_ckpt_path(f->dir, 0, 0, 0, path, sizeof(path)), 0);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	assert_int_equal(fread(&h, sizeof(h), 1, fp), 1);
	assert_int_equal(h.version, 2);
	h.version = 1;
	h.hdr_crc = rps_crc32c(0, &h, offsetof(struct rps_ckpt_hdr, hdr_crc));
	rewind(fp);
	assert_int_equal(fwrite(&h, sizeof(h), 1, fp), 1);
	fclose(fp);

	memset(&io2, 0, sizeof(io2));
	restore(f, &sh2, &io2, &sh->p.optim, 0, 0);
	assert_null(rps_srv_keytab_lookup(&sh2.tab, 8, 0)->spec);
	pushes(&sh2, 8, 2, 1);
	local(&sh->p.optim, 1.0f, 3, want);
	t_read(&sh2, 8, 0, 0, N, got);
	assert_memory_equal(got, want, sizeof(got));
	rps_shard_fini(&sh2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_spec_applied, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_second_declare, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_spec_after_default, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_clip_per_spec, setup_bsp, teardown),
	    cmocka_unit_test_setup_teardown(test_ckpt_keeps_spec, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ckpt_v1_read, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
