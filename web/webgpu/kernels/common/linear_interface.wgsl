// The interface every matrix-product kernel shares (linear.wgsl, linear_wide.wgsl,
// linear_nt.wgsl and the generated linear_tiled of src/linear_gen.ts): the uniform with the
// shape, the five bindings and the override flags, so the executor binds and specialises them all
// the same way (executor.ts, matmul()).
struct Params {
  I: u32, J: u32, P: u32, lda: u32,
  ldb: u32, ldc: u32, pchunk: u32, splits: u32,
}
@group(0) @binding(0) var<uniform> U: Params;
@group(0) @binding(1) var<storage, read> A: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> B: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> C: array<f32>;

override TRANS_A: bool = false;   // A(i,p) = A[p*lda + i] if true, A[i*lda + p] if false
override TRANS_B: bool = true;    // B(p,j) = B[j*ldb + p] if true, B[p*ldb + j] if false
override ALIGNED_A: bool = false; // lda % 4 == 0
override ALIGNED_B: bool = false; // ldb % 4 == 0
override HAS_BIAS: bool = false;
override ACC: bool = false;       // C += product (acc<i> = 1) instead of C = product
override SPLIT: bool = false;     // write raw partial products to slice wid.z of C (scratch)
