// Memory64 build only: long double (IEEE binary128) comparisons with the signature libc expects.
//
// In Emscripten 3.1.6's wasm64 libraries, compiler-rt defines __eqtf2 and friends returning
// `long` (i64 on wasm64) while musl (strtod's floatscan, fmodl) calls them as returning `int`.
// wasm-ld reports "function signature mismatch" and links a stub that traps, so strtod traps.
// Defining them here, returning int, keeps compiler-rt's versions out of the link. Semantics
// as compiler-rt's comparetf2.c: -1 less, 0 equal, 1 greater; unordered (a NaN) gives 1 for
// le/lt/eq/ne and -1 for ge/gt.
#include <cstdint>
#include <cstring>

namespace {

using i128 = __int128;
using u128 = unsigned __int128;

u128 bits(long double x) {
  static_assert(sizeof(long double) == 16, "binary128 expected");
  u128 r;
  std::memcpy(&r, &x, 16);
  return r;
}

int compare(long double a, long double b, int unordered) {
  const u128 sign = u128(1) << 127, inf = u128(0x7fff) << 112;
  const u128 ai = bits(a), bi = bits(b);
  const u128 aabs = ai & ~sign, babs = bi & ~sign;
  if (aabs > inf || babs > inf) return unordered;
  if ((aabs | babs) == 0) return 0;  // +0 == -0
  const i128 as = i128(ai), bs = i128(bi);
  if ((as & bs) >= 0) return as < bs ? -1 : as == bs ? 0 : 1;  // at least one is positive
  return as > bs ? -1 : as == bs ? 0 : 1;                      // both negative
}

}  // namespace

extern "C" {
int __letf2(long double a, long double b) { return compare(a, b, 1); }
int __lttf2(long double a, long double b) { return compare(a, b, 1); }
int __eqtf2(long double a, long double b) { return compare(a, b, 1); }
int __netf2(long double a, long double b) { return compare(a, b, 1); }
int __cmptf2(long double a, long double b) { return compare(a, b, 1); }
int __getf2(long double a, long double b) { return compare(a, b, -1); }
int __gttf2(long double a, long double b) { return compare(a, b, -1); }
int __unordtf2(long double a, long double b) {
  const u128 sign = u128(1) << 127, inf = u128(0x7fff) << 112;
  return (bits(a) & ~sign) > inf || (bits(b) & ~sign) > inf;
}
}

// sbrk past 4 GiB. Emscripten 3.1.6's sbrk (system/lib/sbrk.c) refuses any increment whose new
// break has smaller low 32 bits than the old one ("a 32-bit overflow ... never possible in
// wasm32"), so on wasm64 malloc fails as soon as the heap's break crosses a multiple of 4 GiB,
// with memory to spare (found by tests/browser/memory64.slow.mjs in Chromium, where a 64-bit
// memory may exceed 4 GiB). The same three functions as sbrk.c (so its object is never linked),
// single-threaded like this build, with a real overflow check instead.
#include <emscripten/heap.h>

#include <cerrno>

extern "C" {
extern size_t __heap_base;
static uintptr_t ptl_sbrk_val = reinterpret_cast<uintptr_t>(&__heap_base);

uintptr_t* emscripten_get_sbrk_ptr() { return &ptl_sbrk_val; }

void* sbrk(intptr_t increment_) {
  uintptr_t increment = (static_cast<uintptr_t>(increment_) + 3) & ~uintptr_t(3);
  const uintptr_t old_brk = ptl_sbrk_val;
  const uintptr_t new_brk = old_brk + increment;
  const bool overflow = increment_ > 0 ? new_brk < old_brk : new_brk > old_brk;
  if (overflow || (new_brk > emscripten_get_heap_size() && !emscripten_resize_heap(new_brk))) {
    errno = ENOMEM;
    return reinterpret_cast<void*>(-1);
  }
  ptl_sbrk_val = new_brk;
  return reinterpret_cast<void*>(old_brk);
}

int brk(void* ptr) {
  const uintptr_t last = reinterpret_cast<uintptr_t>(sbrk(0));
  return sbrk(static_cast<intptr_t>(reinterpret_cast<uintptr_t>(ptr) - last)) == reinterpret_cast<void*>(-1) ? -1 : 0;
}
}
