// erf(x) for fp32, faithfully rounded (max error < 1 ulp with exact exp): Norbert Juffa's
// polynomial approximation (the one PyTorch's and MLX's Metal backends use). WGSL has no erf.
// Used by gelu.wgsl and gelu_backward.wgsl (`// #include erf`).
fn erf_f32(a: f32) -> f32 {
  let t = abs(a);
  let s = a * a;
  if (t > 0.927734375) {
    var r = fma(-1.72853470e-5, t, 3.83197126e-4);
    let u = fma(-3.88396438e-3, t, 2.42546219e-2);
    r = fma(r, s, u);
    r = fma(r, t, -1.06777877e-1);
    r = fma(r, t, -6.34846687e-1);
    r = fma(r, t, -1.28717512e-1);
    r = fma(r, t, -t);
    r = 1.0 - exp(r);
    return select(r, -r, a < 0.0);
  }
  var r = -5.96761703e-4;
  r = fma(r, s, 4.99119423e-3);
  r = fma(r, s, -2.67681349e-2);
  r = fma(r, s, 1.12819925e-1);
  r = fma(r, s, -3.76125336e-1);
  r = fma(r, s, 1.28379166e-1);
  return fma(r, a, a);
}
