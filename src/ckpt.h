/* Shard checkpoints: one file per consistent snapshot of one shard.
 *
 * File name:  <dir>/server<R>-shard<S>-clock<C>.ckpt   (decimal, no padding)
 * While written: the same name + ".tmp"; then fsync(file), rename, fsync(dir),
 * so a reader sees either the whole previous state or the whole new file.
 *
 * Layout (little-endian, fixed-width):
 *   struct rps_ckpt_hdr                                  128 bytes
 *   payload (payload_bytes), nslices records of:
 *     struct rps_ckpt_slice_rec                          40 bytes
 *     struct rps_optim_wire (src/proto.h)                80 bytes, only if the
 *                                     record's flags have RPS_CKPT_SLICE_OPTIM
 *     float params[nelems]
 *     float state[nstate][nelems]     (0, 1 or 2 arrays: momentum / adagrad sum,
 *                                      adam m then v)
 * Checksums: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, initial
 * value ~0, final xor ~0 — the iSCSI/ext4 CRC; check value of "123456789" is
 * 0xE3069283), computed in software (slice-by-8 tables):
 *   payload_crc over the payload bytes; hdr_crc over header bytes [0, 124).
 *
 * Validation order when reading (first failure refuses the file):
 *   size >= header, magic, version (this build reads versions
 *   RPS_CKPT_VERSION_MIN..RPS_CKPT_VERSION),
 *   hdr_bytes, hdr_crc, server rank / shard taken from the name, num_shards
 *   expected by the caller, file size == hdr_bytes + payload_bytes, each slice
 *   record (kind, nstate <= 2, flags, its optimizer spec valid and of the
 *   record's kind, data within the payload), slice count, payload_crc.
 *
 * Versions:
 *   1  the slice records' last field is reserved (0): every slice ran the
 *      server's default optimizer.
 *   2  that field is `flags`; RPS_CKPT_SLICE_OPTIM: the slice has the job's
 *      optimizer spec (rps_worker_declare_opt), which follows the record. A
 *      version-2 file without specs is a version-1 file but for the version.
 *
 * Errors: 0 or a negative errno; each problem is logged once, where found,
 * naming the file and what is wrong.
 *   -EBADMSG          corrupt or truncated file (magic, lengths, checksums, records)
 *   -EPROTONOSUPPORT  a format version this build does not read
 *   -EINVAL           bad argument, or a file for another rank / shard / num_shards
 *   -ENOENT           no (valid) checkpoint for the shard in the directory
 *   others            from the system calls (-EIO, -ENOSPC, -EACCES, ...)
 */
#ifndef RPS_CKPT_H
#define RPS_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include <rdmaps/types.h>

#define RPS_CKPT_MAGIC	      "RDPSCKPT" /* 8 bytes, no NUL on disk */
#define RPS_CKPT_VERSION      2u
#define RPS_CKPT_VERSION_MIN  1u  /* oldest version this build reads */
#define RPS_CKPT_KEEP_DEFAULT 2	  /* files kept per (server rank, shard) */
#define RPS_CKPT_PATH_MAX     512 /* dir + file name, with the NUL */

/* On-disk header (versions 1 and 2). */
struct rps_ckpt_hdr {
	char magic[8];	      /* "RDPSCKPT" */
	uint32_t version;     /* RPS_CKPT_VERSION */
	uint32_t hdr_bytes;   /* sizeof(struct rps_ckpt_hdr) */
	uint32_t server_rank; /* rank of the server among the servers */
	uint32_t shard;	      /* shard index within that server */
	uint32_t num_shards;  /* shards per server when written */
	uint32_t payload_crc; /* CRC-32C of the payload */
	uint64_t clock;	      /* the shard's applied clock of the snapshot */
	uint64_t nslices;
	uint64_t key_min; /* smallest / largest key of the slices (0, 0 if none) */
	uint64_t key_max;
	uint64_t created_ns;	/* wall clock (CLOCK_REALTIME) at commit */
	uint64_t payload_bytes; /* bytes after the header */
	uint8_t reserved[44];	/* zero */
	uint32_t hdr_crc;	/* CRC-32C of the 124 bytes before this field */
};
_Static_assert(sizeof(struct rps_ckpt_hdr) == 128, "checkpoint header is 128 bytes");

/* On-disk slice record; its floats follow it. */
struct rps_ckpt_slice_rec {
	uint64_t key;
	uint32_t slice;	 /* index of this slice within its tensor */
	uint32_t kind;	 /* enum rps_optim_kind */
	uint64_t nelems; /* parameters in the slice */
	uint64_t step;	 /* optimizer steps applied (rps_optim_state.step) */
	uint32_t nstate; /* optimizer state arrays that follow the parameters: 0..2 */
	uint32_t flags;	 /* version 2: RPS_CKPT_SLICE_*; version 1: 0 (reserved) */
};
#define RPS_CKPT_SLICE_OPTIM 0x1u /* a struct rps_optim_wire follows the record */
_Static_assert(sizeof(struct rps_ckpt_slice_rec) == 40, "slice record is 40 bytes");

/* A slice, as given to the writer and as handed to a reader's callback. */
struct rps_ckpt_slice {
	uint64_t key;
	uint32_t slice;
	uint32_t kind; /* enum rps_optim_kind */
	uint64_t nelems;
	uint64_t step;
	uint32_t nstate;       /* 0, 1 or 2 */
	const float *params;   /* nelems floats */
	const float *state[2]; /* state[i] for i < nstate: nelems floats each */
	/* the slice's optimizer spec (its kind is `kind`); NULL: the server's
	 * default optimizer */
	const struct rps_optim_opts *optim;
};

/* What a checkpoint file says about itself. */
struct rps_ckpt_info {
	char path[RPS_CKPT_PATH_MAX];
	uint32_t version;
	uint32_t server_rank;
	uint32_t shard;
	uint32_t num_shards;
	uint64_t clock;
	uint64_t nslices;
	uint64_t key_min;
	uint64_t key_max;
	uint64_t created_ns;
	uint64_t payload_bytes;
	uint32_t payload_crc;
};

/* CRC-32C (ISA-L). Start with crc = 0; feed the result back to continue:
 * rps_crc32c(rps_crc32c(0, a, n), b, m) == rps_crc32c(0, ab, n + m). */
uint32_t rps_crc32c(uint32_t crc, const void *buf, size_t len);

/* "<dir>/server<R>-shard<S>-clock<C>.ckpt" into buf; -ENAMETOOLONG if it does not fit. */
int rps_ckpt_path(const char *dir, uint32_t server_rank, uint32_t shard, uint64_t clock, char *buf,
		  size_t len);

/* "server<R>-shard<S>-clock<C>.ckpt[.tmp]" (a file name, no directory),
 * canonical decimal only. Returns 1 (a checkpoint, with *rank_p, *shard_p,
 * *clock_p), 2 (a temp file of one, likewise) or 0 (not a checkpoint name). */
int rps_ckpt_parse_name(const char *name, uint32_t *rank_p, uint32_t *shard_p, uint64_t *clock_p);

/* ---- writing ------------------------------------------------------------
 * One writer per file, used by one thread at a time. Slices are streamed:
 *   rps_ckpt_writer_open(dir, rank, shard, num_shards, clock, &w)
 *   for each slice: rps_ckpt_writer_add(w, &slice)            (contiguous arrays)
 *              or   rps_ckpt_writer_begin_slice(w, &slice)    (params/state ignored)
 *                   rps_ckpt_writer_append(w, floats, n) ...  (params, then state[0],
 *                   rps_ckpt_writer_end_slice(w)               then state[1]; any split)
 *   rps_ckpt_writer_commit(w, keep)   or   rps_ckpt_writer_abort(w)
 * The writer buffers (1 MiB) and checksums as it goes. After the first error
 * every call returns that error; commit then fails and removes the temp file.
 * commit and abort always free the writer. */
struct rps_ckpt_writer;

/* Creates (truncates) <dir>/server<R>-shard<S>-clock<C>.ckpt.tmp. dir must exist.
 * -EINVAL (num_shards == 0, shard >= num_shards), -ENAMETOOLONG, -ENOMEM, open errors. */
int rps_ckpt_writer_open(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
			 uint64_t clock, struct rps_ckpt_writer **w_p);
/* A whole slice from contiguous arrays. -EINVAL: nstate > 2, nelems == 0, NULL arrays,
 * or a slice begun and not ended. */
int rps_ckpt_writer_add(struct rps_ckpt_writer *w, const struct rps_ckpt_slice *s);
/* Piecewise: the record of s (its arrays are not read); then exactly
 * nelems * (1 + nstate) floats through append; then end_slice (-EINVAL if the
 * count is not exact; append past the count is -EINVAL too). */
int rps_ckpt_writer_begin_slice(struct rps_ckpt_writer *w, const struct rps_ckpt_slice *s);
int rps_ckpt_writer_append(struct rps_ckpt_writer *w, const float *data, uint64_t n);
int rps_ckpt_writer_end_slice(struct rps_ckpt_writer *w);
/* Finish: header (counts, key range, created_ns, checksums), fsync(file), rename to
 * the final name (replacing one of the same clock), fsync(dir); then prune the
 * shard's files to the newest `keep` (<= 0: RPS_CKPT_KEEP_DEFAULT). A failed prune
 * is logged and does not fail the commit. If info_p is not NULL it is filled with
 * the new file's info on success. Frees w. */
int rps_ckpt_writer_commit(struct rps_ckpt_writer *w, int keep, struct rps_ckpt_info *info_p);
/* Close and unlink the temp file; free w. NULL is fine. */
void rps_ckpt_writer_abort(struct rps_ckpt_writer *w);

/* Keep the newest `keep` (<= 0: default) checkpoints of (server rank, shard) in dir,
 * by clock; unlink older ones and the shard's leftover *.ckpt.tmp files. Do not
 * call while a writer for that shard is open (commit calls it). Returns the number
 * of files removed, or a negative errno (opendir). */
int rps_ckpt_prune(const char *dir, uint32_t server_rank, uint32_t shard, int keep);
/* The same, counting and removing only checkpoints of clocks <= upto (the
 * one just written): a file of a later clock (a clock from the future, e.g.
 * forged or of another timeline) never pushes the newest real ones out; it
 * is left alone, with a warning. commit calls this. */
int rps_ckpt_prune_upto(const char *dir, uint32_t server_rank, uint32_t shard, int keep,
			uint64_t upto);

/* ---- reading ------------------------------------------------------------ */

/* Called once per slice, in file order. The arrays are valid during the call
 * only. A non-zero return stops the iteration and is returned. */
typedef int (*rps_ckpt_slice_fn)(const struct rps_ckpt_slice *s, void *arg);

/* Fully verify one file (every check listed above, payload checksum included)
 * for the expected rank / shard / num_shards (num_shards 0: any). info_p (may be
 * NULL) is filled on success. */
int rps_ckpt_verify(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		    struct rps_ckpt_info *info_p);

/* Newest valid checkpoint of (server rank, shard) in dir: candidates by clock,
 * newest first; each refused one is logged (file and reason) and the next older
 * one is tried. -ENOENT (logged) when none is valid or dir does not exist. */
int rps_ckpt_find(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  struct rps_ckpt_info *info_p);

/* The same, among the files with clock <= max_clock: to put every shard of a
 * server back at one common clock (find each shard's newest, take the smallest
 * clock C, then rps_ckpt_find_max(..., C, ...) for each). */
int rps_ckpt_find_max(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		      uint64_t max_clock, struct rps_ckpt_info *info_p);

/* Verify one file, then call fn for each slice (a second pass that checks the
 * checksum again: a file changed in between is -EBADMSG, possibly after some
 * callbacks). fn's non-zero return is returned as is. */
int rps_ckpt_read(const char *path, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		  rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p);

/* rps_ckpt_find + rps_ckpt_read of what it found: what `--restore DIR` does per
 * shard. If the found file fails while being read (changed underneath), that
 * error is returned: callbacks may already have run, so no older file is tried. */
int rps_ckpt_restore(const char *dir, uint32_t server_rank, uint32_t shard, uint32_t num_shards,
		     rps_ckpt_slice_fn fn, void *arg, struct rps_ckpt_info *info_p);

#endif
