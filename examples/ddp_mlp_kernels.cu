/* SPDX-License-Identifier: BSD-3-Clause */
/* Kernels of examples/ddp_mlp.c; see ddp_mlp_kernels.h. */
#include "ddp_mlp_kernels.h"

static __host__ __device__ inline uint64_t mix64(uint64_t x) { /* splitmix64's finalizer */
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Uniform in [-1, 1) from a 64-bit key: 24 random bits, exact in float. */
static __device__ inline float unit(uint64_t key) {
  return (float)(int32_t)(mix64(key) >> 40) * (1.0f / 8388608.0f) - 1.0f;
}

static unsigned blocks_for(size_t n, unsigned threads) {
  size_t b = (n + threads - 1) / threads;
  return (unsigned)(b > 65535u * 16u ? 65535u * 16u : (b ? b : 1));
}

__global__ void k_init_uniform(float *p, size_t n, uint64_t key, float scale) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] = scale * unit(key ^ mix64(i));
}

extern "C" cudaError_t mlp_init_uniform(float *p, size_t n, uint64_t seed, uint64_t tag,
                                        float scale, cudaStream_t s) {
  k_init_uniform<<<blocks_for(n, 256), 256, 0, s>>>(p, n, mix64(seed) ^ mix64(tag + 0x1234567ull),
                                                    scale);
  return cudaGetLastError();
}

__global__ void k_gen_inputs(float *x, int width, int batch, uint64_t first, uint64_t key) {
  size_t n = (size_t)width * batch;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint64_t j = first + i / (size_t)width, k = i % (size_t)width;
    x[i] = unit(key ^ mix64(j * 0x100000001b3ull + k));
  }
}

extern "C" cudaError_t mlp_gen_inputs(float *x, int width, int batch, uint64_t first, uint64_t step,
                                      uint64_t seed, cudaStream_t s) {
  size_t n = (size_t)width * batch;
  k_gen_inputs<<<blocks_for(n, 256), 256, 0, s>>>(x, width, batch, first,
                                                  mix64(seed ^ 0xda7a) ^ mix64(step + 77));
  return cudaGetLastError();
}

/* One block per sample: h = tanh(T1 x) in shared memory, then y = T2 h. */
__global__ void k_teacher(const float *x, const float *t1, const float *t2, float *y, int width,
                          int rank) {
  __shared__ float h[256];
  const float *xs = x + (size_t)blockIdx.x * width;
  float *ys = y + (size_t)blockIdx.x * width;
  for (int i = threadIdx.x; i < rank; i += blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < width; k++) acc += t1[i + (size_t)rank * k] * xs[k];
    h[i] = tanhf(acc);
  }
  __syncthreads();
  for (int o = threadIdx.x; o < width; o += blockDim.x) {
    float acc = 0.f;
    for (int i = 0; i < rank; i++) acc += t2[o + (size_t)width * i] * h[i];
    ys[o] = acc;
  }
}

extern "C" cudaError_t mlp_teacher(const float *x, const float *t1, const float *t2, float *y,
                                   int width, int rank, int batch, cudaStream_t s) {
  if (rank < 1 || rank > 256 || batch < 1) return cudaErrorInvalidValue;
  k_teacher<<<batch, 256, 0, s>>>(x, t1, t2, y, width, rank);
  return cudaGetLastError();
}

__global__ void k_bias_act(float *h, const float *b, int width, size_t n, int relu) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    float v = h[i] + b[i % (size_t)width];
    h[i] = relu && !(v > 0.f) ? 0.f : v;
  }
}

extern "C" cudaError_t mlp_bias_act(float *h, const float *b, int width, int batch, int relu,
                                    cudaStream_t s) {
  size_t n = (size_t)width * batch;
  k_bias_act<<<blocks_for(n, 256), 256, 0, s>>>(h, b, width, n, relu);
  return cudaGetLastError();
}

/* One block: each thread sums a fixed strided subset, then a fixed tree. */
__global__ void k_mse(const float *y, const float *t, float *dy, double *loss, size_t n,
                      float gscale, double lscale) {
  __shared__ double part[1024];
  double acc = 0.0;
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
    float d = y[i] - t[i];
    dy[i] = gscale * d;
    acc += (double)d * (double)d;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = part[0] * lscale;
}

extern "C" cudaError_t mlp_mse(const float *y, const float *t, float *dy, double *loss, int width,
                               int batch, cudaStream_t s) {
  size_t n = (size_t)width * batch;
  k_mse<<<1, 1024, 0, s>>>(y, t, dy, loss, n, (float)(2.0 / (double)n), 1.0 / (double)n);
  return cudaGetLastError();
}

__global__ void k_bias_grad(const float *dz, float *db, int width, int batch) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= width) return;
  float acc = 0.f;
  for (int j = 0; j < batch; j++) acc += dz[o + (size_t)width * j];
  db[o] = acc;
}

extern "C" cudaError_t mlp_bias_grad(const float *dz, float *db, int width, int batch,
                                     cudaStream_t s) {
  k_bias_grad<<<(width + 127) / 128, 128, 0, s>>>(dz, db, width, batch);
  return cudaGetLastError();
}

__global__ void k_relu_bwd(float *da, const float *h, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    if (!(h[i] > 0.f)) da[i] = 0.f;
}

extern "C" cudaError_t mlp_relu_bwd(float *da, const float *h, size_t n, cudaStream_t s) {
  k_relu_bwd<<<blocks_for(n, 256), 256, 0, s>>>(da, h, n);
  return cudaGetLastError();
}

__global__ void k_sgd(float *p, const float *g, size_t n, float lr) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    p[i] -= lr * g[i];
}

extern "C" cudaError_t mlp_sgd(float *p, const float *g, size_t n, float lr, cudaStream_t s) {
  k_sgd<<<blocks_for(n, 256), 256, 0, s>>>(p, g, n, lr);
  return cudaGetLastError();
}

__global__ void k_mismatch(const int32_t *hi, const int32_t *lo, size_t n,
                           unsigned long long *count, unsigned long long *first) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    if (hi[i] != lo[i]) {
      atomicAdd(count, 1ull);
      atomicMin(first, (unsigned long long)i);
    }
}

extern "C" cudaError_t mlp_mismatch(const int32_t *hi, const int32_t *lo, size_t n,
                                    unsigned long long *count_p, unsigned long long *first_p,
                                    cudaStream_t s) {
  unsigned long long none = n;
  cudaError_t e = cudaMemsetAsync(count_p, 0, sizeof *count_p, s);
  if (e == cudaSuccess) e = cudaMemcpyAsync(first_p, &none, sizeof none, cudaMemcpyHostToDevice, s);
  if (e != cudaSuccess) return e;
  k_mismatch<<<blocks_for(n, 256), 256, 0, s>>>(hi, lo, n, count_p, first_p);
  return cudaGetLastError();
}
