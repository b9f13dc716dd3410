// bench/gpusum's kernel: dst[i] += src[i] over n floats, grid-stride, four
// at a time where both are 16-byte aligned (the bench's buffers are).
// Compiled to PTX by CMake when the CUDA toolkit is present; the bench loads
// it through the driver API (common/cuda.h).
extern "C" __global__ void sc_sum_f32(float *dst, const float *src, unsigned long long n)
{
	unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long n4 = n / 4;
	float4 *d4 = (float4 *)dst;
	const float4 *s4 = (const float4 *)src;

	for (unsigned long long k = i; k < n4; k += stride) {
		float4 a = d4[k], b = s4[k];
		a.x += b.x;
		a.y += b.y;
		a.z += b.z;
		a.w += b.w;
		d4[k] = a;
	}
	for (unsigned long long k = n4 * 4 + i; k < n; k += stride)
		dst[k] += src[k];
}
