// Raw bytes into every loader of a file a user may be handed: the safetensors decoder, the
// checkpoint and adapter validation, the config inference of a bare weights file, a trainer
// loading the checkpoint, and the tiny base (fuzz_common.h) loading the bytes as an adapter.
// A rejected file must be a ptl::Error; an accepted one must re-encode to a file that decodes
// to the same tensors. Also checks F16 / BF16 widening against narrowing on the input's bytes.
#include <cmath>
#include <cstring>
#include <memory>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/lora.h"
#include "engine/safetensors.h"
#include "tests/fuzz/fuzz_common.h"

using namespace ptl;

namespace {

std::unique_ptr<Trainer> g_base;  // the tiny base checkpoint, loaded once: adapters apply to it

void check_half(const uint8_t* data, size_t size) {
  // Every F16 and BF16 value widens exactly, so narrowing it again gives the same bits (NaNs:
  // the quiet NaN of the same sign and payload).
  for (size_t i = 0; i + 2 <= size && i < 64; i += 2) {
    uint16_t h;
    std::memcpy(&h, data + i, 2);
    const bool f16_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    const uint16_t back16 = f32_to_f16(f16_to_f32(h));
    if (back16 != (f16_nan ? uint16_t(h | 0x200) : h)) fuzz::fail_property("F16 widen/narrow round trip");
    const bool bf16_nan = (h & 0x7f80) == 0x7f80 && (h & 0x7f);
    const uint16_t back_bf = f32_to_bf16(bf16_to_f32(h));
    if (back_bf != (bf16_nan ? uint16_t(h | 0x40) : h)) fuzz::fail_property("BF16 widen/narrow round trip");
  }
}

template <class F>
void refused_or_ok(F&& f) {
  try {
    f();
  } catch (const Error&) {
    // a clear refusal: what the loaders must do with a bad file
  }
}

bool same_tensors(const SafeTensors& a, const SafeTensors& b) {
  if (a.metadata != b.metadata || a.tensors.size() != b.tensors.size()) return false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto &x = a.tensors[i], &y = b.tensors[i];
    if (x.name != y.name || x.dtype != y.dtype || x.shape != y.shape || x.encoding != y.encoding) return false;
    if (x.data.size() != y.data.size()) return false;
    if (x.encoding == Encoding::as_dtype) {
      if (x.data != y.data) return false;
      continue;
    }
    // F16 / BF16 arrive widened; narrowing them again is exact, except that a signalling NaN
    // comes back quiet.
    for (size_t k = 0; k < x.data.size() / 4; ++k) {
      float u, v;
      std::memcpy(&u, x.data.data() + 4 * k, 4);
      std::memcpy(&v, y.data.data() + 4 * k, 4);
      if (std::isnan(u) ? !std::isnan(v) : std::memcmp(&u, &v, 4) != 0) return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cpu::set_num_threads(1);
  g_base = Trainer::from_checkpoint(fuzz::base_checkpoint(true), "base");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_half(data, size);
  SafeTensors file;
  try {
    file = decode_safetensors(data, size, "fuzz");
  } catch (const Error&) {
    return 0;
  }
  // What decodes re-encodes, and decodes to the same thing.
  refused_or_ok([&] {
    const std::vector<uint8_t> again = encode_safetensors(file);  // may refuse a name that is not UTF-8
    const SafeTensors back = decode_safetensors(again.data(), again.size(), "re-encoded");
    if (!same_tensors(file, back)) fuzz::fail_property("decode(encode(decode(x))) != decode(x)");
  });
  for (const auto& t : file.tensors)
    if (t.data.size() != size_t(t.numel()) * 4) fuzz::fail_property("tensor bytes do not match its shape");
  refused_or_ok([&] { inspect_checkpoint(file, "fuzz"); });
  refused_or_ok([&] { inspect_adapter(file, "fuzz"); });
  refused_or_ok([&] { infer_model_config(file, 0, "fuzz"); });
  refused_or_ok([&] { infer_model_config(file, 2, "fuzz"); });
  const std::vector<uint8_t> bytes(data, data + size);
  refused_or_ok([&] { Trainer::from_checkpoint(bytes, "fuzz"); });
  refused_or_ok([&] {
    g_base->load_adapter(bytes, "fuzz");
    g_base->disable_lora();
  });
  return 0;
}
