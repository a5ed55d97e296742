/* A 784-256-128-10 multi-layer perceptron (ReLU, softmax cross-entropy) with
 * forward and backward passes through OpenBLAS sgemm.
 *
 * Parameters are one flat array of tensors back to back (the keys the
 * distributed job stores on the servers): W1 784x256 as MLP_W1_BLOCKS row
 * blocks, b1, W2 256x128, b2, W3 128x10, b3. Weights are row-major [in x out].
 *
 * W1 holds 85% of the bytes, so it is cut into row blocks: the backward pass
 * hands out each block's gradient as soon as it is computed, and the forward
 * pass starts multiplying with the first block while the others are still on
 * their way — communication overlaps computation (hooks below). */
#ifndef FMNIST_MLP_H
#define FMNIST_MLP_H

#include <stddef.h>
#include <stdint.h>

#define MLP_W1_BLOCKS 4
#define MLP_NTENSORS (MLP_W1_BLOCKS + 5)
/* tensor indices */
#define MLP_T_B1 MLP_W1_BLOCKS
#define MLP_T_W2 (MLP_W1_BLOCKS + 1)
#define MLP_T_B2 (MLP_W1_BLOCKS + 2)
#define MLP_T_W3 (MLP_W1_BLOCKS + 3)
#define MLP_T_B3 (MLP_W1_BLOCKS + 4)
#define MLP_IN 784
#define MLP_H1 256
#define MLP_H2 128
#define MLP_OUT 10

/* Called by mlp_grad: wait_param(t) before tensor t of params is read (forward),
 * grad_ready(t) once tensor t of grad is final (backward). Either may be NULL.
 * They return 0 or -errno (which aborts the step). */
struct mlp_hooks {
	int (*wait_param)(void *arg, int t);
	int (*grad_ready)(void *arg, int t);
	void *arg;
};

extern const size_t mlp_lens[MLP_NTENSORS];  /* elements per tensor */
extern const size_t mlp_fan_in[MLP_NTENSORS]; /* 0 for biases */
size_t mlp_nparams(void);

/* Scratch for batches of up to `batch` samples. */
struct mlp_ws {
	size_t batch;
	float *h1, *h2, *z, *dh1, *dh2;
};
int mlp_ws_init(struct mlp_ws *ws, size_t batch);
void mlp_ws_free(struct mlp_ws *ws);

/* He-normal weights, zero biases, from a seed (the --local reference). */
void mlp_init_params(float *params, uint64_t seed);

/* Mean cross-entropy of the batch into *loss_p; grad = scale * gradient of
 * that mean. Returns 0 or the first hook error. */
int mlp_grad(const float *params, const float *x, const uint8_t *y, size_t n, float scale,
	     float *grad, struct mlp_ws *ws, const struct mlp_hooks *hooks, float *loss_p);
/* Offset of tensor t in the flat array. */
size_t mlp_offset(int t);

/* Accuracy over n samples (evaluated in batches of ws->batch). */
double mlp_accuracy(const float *params, const float *x, const uint8_t *y, size_t n,
		    struct mlp_ws *ws);

#endif
