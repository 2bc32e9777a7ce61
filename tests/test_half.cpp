// F16 and BF16: the conversions of engine/half.h (exact for every representable value, round to
// nearest even on every tie, infinities and NaNs kept) and half-precision tensors in the
// safetensors container (written narrowed, read widened to F32, errors naming tensor and dtype).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/half.h"
#include "engine/safetensors.h"

using namespace ptl;

namespace {

float bits(uint32_t u) { return std::bit_cast<float>(u); }
bool is_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool is_nan_bf16(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f) != 0; }

}  // namespace

TEST(Half, F16KnownValues) {
  EXPECT_EQ(f32_to_f16(0.0f), 0x0000);
  EXPECT_EQ(f32_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(f32_to_f16(0.5f), 0x3800);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);                  // the largest finite F16
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);     // the smallest normal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);     // the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1023.0f, -24)), 0x03ff);  // the largest subnormal
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(std::bit_cast<uint32_t>(f16_to_f32(0x8000)), 0x80000000u);  // -0 keeps its sign
}

TEST(Half, BF16KnownValues) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(f32_to_bf16(bits(0x00000001)), 0x0000);  // an F32 subnormal below BF16's half step
  EXPECT_EQ(f32_to_bf16(bits(0x00010000)), 0x0001);  // BF16 keeps F32's subnormals' high bits
  EXPECT_EQ(f32_to_bf16(bits(0x7f7f0000)), 0x7f7f);  // the largest finite BF16
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xc0a0), -5.0f);
}

// Every finite F16 / BF16 value survives widening and narrowing back unchanged.
TEST(Half, RoundTripOfEveryRepresentableValueIsExact) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto x = static_cast<uint16_t>(h);
    if (!is_nan16(x)) {
      ASSERT_EQ(f32_to_f16(f16_to_f32(x)), x) << std::hex << h;
    }
    if (!is_nan_bf16(x)) {
      ASSERT_EQ(f32_to_bf16(bf16_to_f32(x)), x) << std::hex << h;
      ASSERT_EQ(std::bit_cast<uint32_t>(bf16_to_f32(x)), h << 16);
    }
  }
  // Widening F16 agrees with the arithmetic value (sign, subnormals, normals).
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const int e = int(h >> 10), m = int(h & 0x3ff);
    const double v = e == 0 ? std::ldexp(double(m), -24) : std::ldexp(double(1024 + m), e - 25);
    ASSERT_EQ(double(f16_to_f32(uint16_t(h))), v) << std::hex << h;
    ASSERT_EQ(double(f16_to_f32(uint16_t(h | 0x8000))), -v) << std::hex << h;
  }
}

// Between every pair of neighbouring values: the midpoint (exact in F32) goes to the even one of
// the two, the F32 just below it down, the F32 just above it up. This covers subnormals, the
// subnormal-normal boundary and every binade, for both signs.
TEST(Half, RoundsToNearestEvenOnEveryTie) {
  auto check_all = [](const char* name, uint16_t (*narrow)(float), float (*widen)(uint16_t), uint32_t last) {
    for (uint32_t h = 0; h < last; ++h) {
      const float lo = widen(uint16_t(h)), hi = widen(uint16_t(h + 1));
      const float mid = lo + (hi - lo) / 2;  // (lo + hi) / 2 would overflow near BF16's top
      ASSERT_TRUE(lo < mid && mid < hi) << name << " " << std::hex << h;
      const uint16_t even = (h & 1) ? uint16_t(h + 1) : uint16_t(h);
      for (const float sign : {1.0f, -1.0f}) {
        const uint16_t s = sign < 0 ? 0x8000 : 0;
        ASSERT_EQ(narrow(sign * mid), even | s) << name << " tie above " << std::hex << h;
        ASSERT_EQ(narrow(sign * std::nextafter(mid, 0.0f)), h | s) << name << " below the tie above " << std::hex << h;
        ASSERT_EQ(narrow(sign * std::nextafter(mid, 2 * hi)), (h + 1) | s)
            << name << " above the tie above " << std::hex << h;
      }
    }
  };
  check_all("F16", f32_to_f16, f16_to_f32, 0x7bff);
  check_all("BF16", f32_to_bf16, bf16_to_f32, 0x7f7f);
  // Named cases, for a reader: 1 + 2^-11 lies halfway between 1 and the next F16 (odd) -> 1;
  // 1 + 3 * 2^-11 between two F16s with the even one above -> up; 2^-25, half the smallest
  // subnormal -> 0; 3 * 2^-25 -> 2 * 2^-24.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(f32_to_f16(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(f32_to_bf16(bits(0x3f808000)), 0x3f80);  // tie, 0x3f80 even
  EXPECT_EQ(f32_to_bf16(bits(0x3f818000)), 0x3f82);  // tie, 0x3f82 even
}

TEST(Half, InfinityOverflowAndNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(f32_to_f16(inf), 0x7c00);
  EXPECT_EQ(f32_to_f16(-inf), 0xfc00);
  EXPECT_EQ(f32_to_f16(65519.996f), 0x7bff);  // below the tie with 2^16: the largest finite
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);    // the tie: 0x7bff is odd, so up, to infinity
  EXPECT_EQ(f32_to_f16(-1e10f), 0xfc00);
  EXPECT_EQ(f32_to_f16(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)) && f16_to_f32(0x7c00) > 0);
  EXPECT_TRUE(std::isinf(f16_to_f32(0xfc00)) && f16_to_f32(0xfc00) < 0);
  EXPECT_EQ(f32_to_bf16(inf), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-inf), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // above BF16's largest + half a step
  EXPECT_TRUE(std::isinf(bf16_to_f32(0x7f80)));

  // NaNs stay NaNs, with their sign, even when the payload lies only in bits that narrowing drops
  // (plain truncation would make those infinities).
  for (const uint32_t nan : {0x7fc00000u, 0x7f800001u, 0x7f802000u, 0xffc00000u, 0xff800001u, 0x7fffffffu}) {
    const float x = bits(nan);
    const uint16_t h = f32_to_f16(x), b = f32_to_bf16(x);
    EXPECT_TRUE(is_nan16(h)) << std::hex << nan << " -> " << h;
    EXPECT_TRUE(is_nan_bf16(b)) << std::hex << nan << " -> " << b;
    EXPECT_EQ(h >> 15, nan >> 31);
    EXPECT_EQ(b >> 15, nan >> 31);
    EXPECT_TRUE(std::isnan(f16_to_f32(h)));
    EXPECT_TRUE(std::isnan(bf16_to_f32(b)));
  }
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7c01)));
  EXPECT_TRUE(std::isnan(bf16_to_f32(0xff81)));
}

TEST(Half, ContainerWritesNarrowAndReadsWide) {
  const std::vector<float> w = {1.0f, -2.5f, 0.1f, 65504.0f, 1e-8f, 3.0e38f};
  const std::vector<int32_t> ids = {7, -1};
  for (const Encoding enc : {Encoding::f16, Encoding::bf16}) {
    const char* name = enc == Encoding::f16 ? "F16" : "BF16";
    SafeTensors st;
    st.metadata["format"] = "tinygpt";
    st.add("w", DType::f32, {2, 3}, w.data());
    st.add("ids", DType::i32, {2}, ids.data());
    st.tensors[0].encoding = enc;
    const auto bytes = encode_safetensors(st);
    const SafeTensors plain_st = [&] {
      SafeTensors p = st;
      p.tensors[0].encoding = Encoding::as_dtype;
      return p;
    }();
    EXPECT_EQ(encode_safetensors(plain_st).size() - bytes.size(), 12u) << name;  // 6 elements, 2 bytes each saved
    uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    const std::string header(reinterpret_cast<const char*>(bytes.data()) + 8, n);
    EXPECT_NE(header.find(std::string(R"("w":{"dtype":")") + name + R"(","shape":[2,3],"data_offsets":[0,12]})"),
              std::string::npos)
        << header;
    EXPECT_NE(header.find(R"("ids":{"dtype":"I32","shape":[2],"data_offsets":[12,20]})"), std::string::npos) << header;

    const SafeTensors back = decode_safetensors(bytes.data(), bytes.size(), "x.tinygpt");
    const StoredTensor* t = back.find("w");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->dtype, DType::f32);
    EXPECT_EQ(t->encoding, enc);
    ASSERT_EQ(t->data.size(), w.size() * 4);
    for (size_t i = 0; i < w.size(); ++i) {
      const float expect = enc == Encoding::f16 ? f16_to_f32(f32_to_f16(w[i])) : bf16_to_f32(f32_to_bf16(w[i]));
      EXPECT_EQ(std::bit_cast<uint32_t>(t->f32()[i]), std::bit_cast<uint32_t>(expect)) << name << " " << i;
    }
    EXPECT_EQ(back.find("ids")->encoding, Encoding::as_dtype);
    EXPECT_EQ(std::memcmp(back.find("ids")->data.data(), ids.data(), 8), 0);
    EXPECT_EQ(encode_safetensors(back), bytes) << name;  // read wide, written narrow again: the same file
  }
  // What the values became, for the record: F16 overflows 3e38 to infinity and flushes 1e-8 to 0.
  SafeTensors st;
  st.add("w", DType::f32, {6}, w.data());
  st.tensors[0].encoding = Encoding::f16;
  const auto bytes = encode_safetensors(st);
  const SafeTensors back = decode_safetensors(bytes.data(), bytes.size());
  const float* x = back.find("w")->f32();
  EXPECT_EQ(x[0], 1.0f);
  EXPECT_EQ(x[1], -2.5f);
  EXPECT_EQ(x[2], 0.0999755859375f);
  EXPECT_EQ(x[3], 65504.0f);
  EXPECT_EQ(x[4], 0.0f);
  EXPECT_TRUE(std::isinf(x[5]));
}

TEST(Half, ContainerErrorsNameTensorAndDtype) {
  // An integer tensor has no half encoding.
  SafeTensors st;
  const std::vector<int32_t> ids = {1, 2};
  st.add("tokens", DType::i32, {2}, ids.data());
  st.tensors[0].encoding = Encoding::bf16;
  try {
    encode_safetensors(st);
    ADD_FAILURE() << "an I32 tensor was stored as BF16";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'tokens' is I32 and cannot be stored as BF16"), std::string::npos)
        << e.what();
  }
  // A half tensor's byte count is 2 per element: 4 per element is a mismatch naming F16.
  auto file = [](const std::string& header, size_t data) {
    std::string h = header;
    h.append((8 - h.size() % 8) % 8, ' ');
    std::vector<uint8_t> out(8 + h.size() + data, 0);
    const uint64_t n = h.size();
    std::memcpy(out.data(), &n, 8);
    std::memcpy(out.data() + 8, h.data(), h.size());
    return out;
  };
  auto message = [](const std::vector<uint8_t>& f) -> std::string {
    try {
      decode_safetensors(f.data(), f.size(), "m.tinygpt");
    } catch (const Error& e) {
      return e.what();
    }
    return "(no error)";
  };
  const auto wrong = file(R"({"ln_f.bias":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})", 16);
  EXPECT_NE(message(wrong).find("m.tinygpt: tensor 'ln_f.bias' data_offsets [0, 16] do not match dtype F16 x shape "
                                "[4] (8 bytes)"),
            std::string::npos)
      << message(wrong);
  const auto ok = file(R"({"ln_f.bias":{"dtype":"BF16","shape":[4],"data_offsets":[0,8]}})", 8);
  EXPECT_EQ(message(ok), "(no error)");
  for (const char* dtype : {"F64", "F8_E4M3", "I16", "U8", "BOOL"}) {
    const auto f =
        file(std::string(R"({"ln_f.bias":{"dtype":")") + dtype + R"(","shape":[4],"data_offsets":[0,8]}})", 8);
    EXPECT_NE(message(f).find(std::string("m.tinygpt: tensor 'ln_f.bias' has dtype ") + dtype +
                              "; only F32, F16, BF16 and I32 are supported"),
              std::string::npos)
        << message(f);
  }
}
