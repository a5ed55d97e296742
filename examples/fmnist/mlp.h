/* A 784-256-128-10 multi-layer perceptron (ReLU, softmax cross-entropy) with
 * forward and backward passes through OpenBLAS sgemm.
 *
 * Parameters are one flat array, six tensors back to back (the six keys the
 * distributed job stores on the servers): W1 784x256, b1, W2 256x128, b2,
 * W3 128x10, b3. Weights are row-major [in x out]. */
#ifndef FMNIST_MLP_H
#define FMNIST_MLP_H

#include <stddef.h>
#include <stdint.h>

#define MLP_NTENSORS 6
#define MLP_IN 784
#define MLP_H1 256
#define MLP_H2 128
#define MLP_OUT 10

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

/* Mean cross-entropy of the batch; grad = scale * gradient of that mean. */
float mlp_grad(const float *params, const float *x, const uint8_t *y, size_t n, float scale,
	       float *grad, struct mlp_ws *ws);

/* Accuracy over n samples (evaluated in batches of ws->batch). */
double mlp_accuracy(const float *params, const float *x, const uint8_t *y, size_t n,
		    struct mlp_ws *ws);

#endif
