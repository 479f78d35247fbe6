/* SPDX-License-Identifier: BSD-3-Clause */
/* Elementwise and small reduction kernels of examples/ddp_mlp.c (the matrix
 * products are cuBLAS's). Every kernel is deterministic: the same inputs give
 * the same bits, whatever the launch, so replicas stay bit-identical and a
 * sample's data does not depend on which rank (or how big a batch) made it. */
#ifndef DDP_MLP_KERNELS_H
#define DDP_MLP_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Matrices are column-major; a batch is `width` rows by `batch` columns (one
 * sample per column). */

/* p[i] = scale * u, u uniform in [-1, 1) from (seed, tag, i). */
cudaError_t mlp_init_uniform(float *p, size_t n, uint64_t seed, uint64_t tag, float scale,
                             cudaStream_t s);
/* Inputs of samples first .. first+batch-1 of step `step`'s global batch:
 * x[k + width*j] uniform in [-1, 1) from (seed, step, first + j, k). */
cudaError_t mlp_gen_inputs(float *x, int width, int batch, uint64_t first, uint64_t step,
                           uint64_t seed, cudaStream_t s);
/* The teacher: y = T2 * tanh(T1 * x), T1 rank x width, T2 width x rank, one
 * sample at a time in a fixed order (rank <= 256). */
cudaError_t mlp_teacher(const float *x, const float *t1, const float *t2, float *y, int width,
                        int rank, int batch, cudaStream_t s);
/* h = relu(h + b) (or just h + b when relu is 0), b broadcast over columns. */
cudaError_t mlp_bias_act(float *h, const float *b, int width, int batch, int relu, cudaStream_t s);
/* *loss = sum (y - t)^2 / (width * batch) (double, one block, fixed order) and
 * its gradient dy = 2 (y - t) / (width * batch): the mean over this batch (the
 * all-reduce AVG over ranks then gives the mean over the global batch). */
cudaError_t mlp_mse(const float *y, const float *t, float *dy, double *loss, int width, int batch,
                    cudaStream_t s);
/* db[o] = sum over columns of dz[o, :], in column order. */
cudaError_t mlp_bias_grad(const float *dz, float *db, int width, int batch, cudaStream_t s);
/* da[i] = h[i] > 0 ? da[i] : 0 (ReLU's derivative from its output). */
cudaError_t mlp_relu_bwd(float *da, const float *h, size_t n, cudaStream_t s);
/* p -= lr * g */
cudaError_t mlp_sgd(float *p, const float *g, size_t n, float lr, cudaStream_t s);
/* Elements where hi != lo (the bitwise MAX and MIN of the replicas' parameter
 * words): *count_p gets their number, *first_p the lowest index (n if none).
 * count_p and first_p are device memory. */
cudaError_t mlp_mismatch(const int32_t *hi, const int32_t *lo, size_t n,
                         unsigned long long *count_p, unsigned long long *first_p,
                         cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
