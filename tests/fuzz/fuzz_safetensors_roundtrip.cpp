// The structured round trip: tensors drawn from the input (F32, I32, F16, BF16; up to 4
// dimensions, zero dimensions included; arbitrary values, NaNs and infinities too) and string
// metadata are encoded, decoded and compared. Every value must come back bit for bit (F16 and
// BF16: as the narrowing of engine/half.h makes it), and re-encoding what was decoded must give
// the same bytes. Aborts on any difference.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstring>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace ptl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  SafeTensors st;
  std::vector<std::vector<uint8_t>> expect;  // each tensor's data as decoding must give it
  const int n_meta = in.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < n_meta; ++i) {
    std::string k = in.ConsumeRandomLengthString(16);
    st.metadata[k] = in.ConsumeRandomLengthString(32);
  }
  const int n_tensors = in.ConsumeIntegralInRange(0, 8);
  for (int i = 0; i < n_tensors; ++i) {
    StoredTensor t;
    t.name = in.ConsumeRandomLengthString(12);
    if (in.ConsumeBool()) t.name = "t" + std::to_string(i);  // mostly valid, unique names
    const int kind = in.ConsumeIntegralInRange(0, 3);
    t.dtype = kind == 1 ? DType::i32 : DType::f32;
    t.encoding = kind == 2 ? Encoding::f16 : kind == 3 ? Encoding::bf16 : Encoding::as_dtype;
    const int rank = in.ConsumeIntegralInRange(0, 4);
    size_t numel = 1;
    for (int d = 0; d < rank; ++d) {
      // Mostly small; sometimes a huge dimension next to a zero one (0 elements, shape kept).
      int64_t dim = in.ConsumeIntegralInRange<int64_t>(0, 6);
      if (dim == 6) dim = in.ConsumeIntegralInRange<int64_t>(0, int64_t(1) << 40);
      t.shape.push_back(dim);
    }
    bool zero = false;
    for (int64_t d : t.shape) zero |= d == 0;
    for (int64_t d : t.shape) {
      if (zero) numel = 0;
      // a huge tensor without a zero dimension: not this target's subject
      else if ((numel *= size_t(d)) > 4096)
        return 0;
    }
    t.data.resize(numel * 4);
    for (size_t k = 0; k < t.data.size(); ++k) t.data[k] = in.ConsumeIntegral<uint8_t>();
    std::vector<uint8_t> want = t.data;
    for (size_t k = 0; k < numel && t.encoding != Encoding::as_dtype; ++k) {
      float x;
      std::memcpy(&x, want.data() + 4 * k, 4);
      const float y = t.encoding == Encoding::f16 ? f16_to_f32(f32_to_f16(x)) : bf16_to_f32(f32_to_bf16(x));
      std::memcpy(want.data() + 4 * k, &y, 4);
    }
    st.tensors.push_back(std::move(t));
    expect.push_back(std::move(want));
  }

  std::vector<uint8_t> bytes;
  try {
    bytes = encode_safetensors(st);
  } catch (const Error&) {
    return 0;  // a duplicate or reserved name, or one that is not UTF-8: refused before writing
  }
  SafeTensors back;
  try {
    back = decode_safetensors(bytes.data(), bytes.size(), "round trip");
  } catch (const Error& e) {
    fuzz::fail_property(std::string("the decoder refuses what the encoder wrote: ") + e.what());
  }
  if (back.metadata != st.metadata) fuzz::fail_property("metadata changed");
  if (back.tensors.size() != st.tensors.size()) fuzz::fail_property("tensor count changed");
  for (size_t i = 0; i < st.tensors.size(); ++i) {
    const StoredTensor &a = st.tensors[i], &b = back.tensors[i];
    if (a.name != b.name) fuzz::fail_property("tensor order or name changed: " + a.name + " -> " + b.name);
    if (a.dtype != b.dtype || a.encoding != b.encoding) fuzz::fail_property("dtype changed: " + a.name);
    if (a.shape != b.shape) fuzz::fail_property("shape changed: " + a.name);
    if (b.data != expect[i]) fuzz::fail_property("data changed: " + a.name);
  }
  if (encode_safetensors(back) != bytes) fuzz::fail_property("re-encoding the decoded file gives other bytes");
  return 0;
}
