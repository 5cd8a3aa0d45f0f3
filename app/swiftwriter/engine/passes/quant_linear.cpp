// Linear layers on GGUF weights as they are stored (engine/passes/quant.py builds and uses it).
//
// A writer's model file keeps its weights in blocks of small integers with a scale (and an
// offset) per block; decoding those into bfloat16 copies costs 3-4x the memory and, on a CPU,
// the speed of every token. Here the weights stay in their blocks, rearranged once (same bits,
// same size) so that one vector load feeds 16 output rows, and each product is computed in
// integers, as llama.cpp computes it: every input row is quantized to int8 per block (a scale
// per block of 32, or of 256 for the K types), the block's integer dot product is exact, and
// its scales are applied in float32.
//
// Why this makes a tree pass cost about one row: the integer dot products of a weight tile are
// formed from registers that were loaded and unpacked once, then applied to every row of the
// pass (up to 8 rows per unpack); the weights stream from memory once per pass whatever its size.
//
// Why it is exact for speculation: an output row is a function of its own input row only.
// The row's quantization, its integer sums (exact: no order to depend on) and the float32
// steps that follow (one fixed sequence of multiplies and fused multiply-adds per output and
// block) never depend on how many rows share the call, which rows they are, or the thread
// count. The scalar path performs the same float steps, so every path this machine can run
// gives the same bits, and the tests compare them.
//
// Built with -ffp-contract=off: the float steps are exactly the ones written here.

#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define SW_Q512 1
#endif
#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define SW_Q256 1
#endif

namespace {

constexpr int TILE = 16;  // output rows that share one vector of every weight load
constexpr int MAX_R = 8;  // input rows served by one unpacking of a weight group

enum : int { Q4_0 = 2, Q4_1 = 3, Q8_0 = 8, Q4_K = 12, Q5_K = 13, Q6_K = 14 };
enum : int { PATH_BEST = 0, PATH_SCALAR = 1, PATH_256 = 2, PATH_512 = 3 };

// A type's group: the input span one scale of the quantized input covers (32 or 256 values),
// its packed bytes per tile of 16 output rows, the span of each integer sum of the input that
// the corrections need, and the bytes of one stored block (per output row, per group).
struct Spec {
  int group_k, group_bytes, sum_k, block_bytes;
};

Spec spec_of(int type) {
  switch (type) {
    case Q4_0: return {32, 288, 32, 18};
    case Q4_1: return {32, 320, 32, 20};
    case Q8_0: return {32, 544, 32, 34};
    case Q4_K: return {256, 2496, 32, 144};
    case Q5_K: return {256, 3008, 32, 176};
    case Q6_K: return {256, 3360, 16, 210};
  }
  TORCH_CHECK(false, "unsupported GGUF type ", type);
}

// Byte offsets inside a packed group (see pack_row below for what each holds).
namespace off {
constexpr int K_SC = 2048, K_MN = 2176, K_D = 2432, K_DMIN = 2464;        // Q4_K
constexpr int K5_QH = 2048, K5_SC = 2560, K5_MN = 2688, K5_D = 2944, K5_DMIN = 2976;  // Q5_K
constexpr int K6_SC = 3072, K6_D = 3328;                                   // Q6_K
}  // namespace off

inline float half(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return c10::detail::fp16_ieee_to_fp32_value(bits);
}

// --- Packing: the stored blocks, rearranged -----------------------------------------------
//
// Within a group, the integers of 4 consecutive inputs for 16 output rows fill one 64-byte
// vector: byte [lane * 4 + j] holds row `lane`'s value for input 4 * kg + j ("k-group" kg).
// 4-bit values keep two k-groups per vector (kg even in the low nibbles, the next odd one in
// the high nibbles); Q5_K's fifth bits and Q6_K's two high bits sit in a vector of their own
// per sub-block. Scales keep their stored fp16 bits, 16 rows side by side.

inline void put_nibble(uint8_t* chunk, int lane, int i, int q) {
  // value i (0..31) of a 32-input chunk whose nibble vectors start at `chunk`
  const int kg = i / 4, j = i % 4;
  uint8_t& b = chunk[(kg / 2) * 64 + lane * 4 + j];
  b |= (kg % 2) ? uint8_t(q << 4) : uint8_t(q & 0x0F);
}

inline void scale_min_k4(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 63;
    mn = s[j + 4] & 63;
  } else {
    sc = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

void pack_block(int type, const uint8_t* src, uint8_t* dst, int lane) {
  switch (type) {
    case Q4_0:
    case Q4_1: {
      const uint8_t* qs = src + (type == Q4_0 ? 2 : 4);
      for (int v = 0; v < 32; ++v) put_nibble(dst, lane, v, v < 16 ? qs[v] & 15 : qs[v - 16] >> 4);
      std::memcpy(dst + 256 + lane * 2, src, 2);
      if (type == Q4_1) std::memcpy(dst + 288 + lane * 2, src + 2, 2);
      return;
    }
    case Q8_0:
      for (int v = 0; v < 32; ++v) dst[(v / 4) * 64 + lane * 4 + v % 4] = src[2 + v];
      std::memcpy(dst + 512 + lane * 2, src, 2);
      return;
    case Q4_K:
    case Q5_K: {
      const bool five = type == Q5_K;
      const uint8_t* scales = src + 4;
      const uint8_t* qh = src + 16;
      const uint8_t* qs = src + (five ? 48 : 16);
      for (int s = 0; s < 8; ++s) {
        for (int i = 0; i < 32; ++i) {
          const uint8_t byte = qs[(s / 2) * 32 + i];
          put_nibble(dst + s * 256, lane, i, (s % 2) ? byte >> 4 : byte & 15);
          if (five && ((qh[i] >> s) & 1))
            dst[off::K5_QH + s * 64 + lane * 4 + i % 4] |= uint8_t(1 << (i / 4));
        }
        int sc, mn;
        scale_min_k4(scales, s, sc, mn);
        dst[(five ? off::K5_SC : off::K_SC) + s * 16 + lane] = uint8_t(sc);
        const int16_t mn16 = int16_t(mn);
        std::memcpy(dst + (five ? off::K5_MN : off::K_MN) + (s / 2) * 64 + lane * 4 + (s % 2) * 2,
                    &mn16, 2);
      }
      std::memcpy(dst + (five ? off::K5_D : off::K_D) + lane * 2, src, 2);
      std::memcpy(dst + (five ? off::K5_DMIN : off::K_DMIN) + lane * 2, src + 2, 2);
      return;
    }
    case Q6_K: {
      const uint8_t* ql = src;
      const uint8_t* qh = src + 128;
      const int8_t* scales = reinterpret_cast<const int8_t*>(src + 192);
      static const int high_shift[4] = {4, 6, 0, 2};
      for (int v = 0; v < 256; ++v) {
        const int h = v / 128, r = v % 128;
        const int low = (ql[h * 64 + r % 64] >> (4 * (r / 64))) & 15;
        const int high = (qh[h * 32 + r % 32] >> (2 * (r / 32))) & 3;
        const int s = v / 16, i = v % 16, kg = i / 4, j = i % 4;
        uint8_t* sub = dst + s * 192;
        sub[(kg / 2) * 64 + lane * 4 + j] |= (kg % 2) ? uint8_t(low << 4) : uint8_t(low);
        sub[128 + lane * 4 + j] |= uint8_t(high << high_shift[kg]);
      }
      for (int s = 0; s < 16; ++s) dst[off::K6_SC + s * 16 + lane] = uint8_t(scales[s]);
      std::memcpy(dst + off::K6_D + lane * 2, src + 208, 2);
      return;
    }
  }
}

// --- Reading one packed value back (the scalar path and dequantization) --------------------

inline int nibble_at(const uint8_t* chunk, int lane, int i) {
  const int kg = i / 4;
  const uint8_t b = chunk[(kg / 2) * 64 + lane * 4 + i % 4];
  return (kg % 2) ? b >> 4 : b & 15;
}

inline int q6_at(const uint8_t* group, int lane, int s, int i) {
  static const int high_shift[4] = {4, 6, 0, 2};
  const uint8_t* sub = group + s * 192;
  const int kg = i / 4, j = i % 4;
  const uint8_t lo = sub[(kg / 2) * 64 + lane * 4 + j];
  const int low = (kg % 2) ? lo >> 4 : lo & 15;
  return low | (((sub[128 + lane * 4 + j] >> high_shift[kg]) & 3) << 4);
}

inline int q5_at(const uint8_t* group, int lane, int s, int i) {
  const int high = (group[off::K5_QH + s * 64 + lane * 4 + i % 4] >> (i / 4)) & 1;
  return nibble_at(group + s * 256, lane, i) | (high << 4);
}

inline int16_t mn_at(const uint8_t* group, int base, int lane, int s) {
  int16_t v;
  std::memcpy(&v, group + base + (s / 2) * 64 + lane * 4 + (s % 2) * 2, 2);
  return v;
}

// One group of row `lane` as float32, with the same float steps as the gguf package's
// reference dequantization (so the values agree bit for bit).
void dequant_group(int type, const uint8_t* g, int lane, float* out) {
  switch (type) {
    case Q4_0: {
      const float d = half(g + 256 + lane * 2);
      for (int v = 0; v < 32; ++v) out[v] = d * float(nibble_at(g, lane, v) - 8);
      return;
    }
    case Q4_1: {
      const float d = half(g + 256 + lane * 2), m = half(g + 288 + lane * 2);
      for (int v = 0; v < 32; ++v) out[v] = d * float(nibble_at(g, lane, v)) + m;
      return;
    }
    case Q8_0: {
      const float d = half(g + 512 + lane * 2);
      for (int v = 0; v < 32; ++v) out[v] = float(int8_t(g[(v / 4) * 64 + lane * 4 + v % 4])) * d;
      return;
    }
    case Q4_K:
    case Q5_K: {
      const bool five = type == Q5_K;
      const float d = half(g + (five ? off::K5_D : off::K_D) + lane * 2);
      const float dmin = half(g + (five ? off::K5_DMIN : off::K_DMIN) + lane * 2);
      for (int s = 0; s < 8; ++s) {
        const float dd = d * float(g[(five ? off::K5_SC : off::K_SC) + s * 16 + lane]);
        const float dm = dmin * float(mn_at(g, five ? off::K5_MN : off::K_MN, lane, s));
        for (int i = 0; i < 32; ++i) {
          const int q = five ? q5_at(g, lane, s, i) : nibble_at(g + s * 256, lane, i);
          out[s * 32 + i] = dd * float(q) - dm;
        }
      }
      return;
    }
    case Q6_K: {
      const float d = half(g + off::K6_D + lane * 2);
      for (int s = 0; s < 16; ++s) {
        const float dd = d * float(int8_t(g[off::K6_SC + s * 16 + lane]));
        for (int i = 0; i < 16; ++i) out[s * 16 + i] = dd * float(q6_at(g, lane, s, i) - 32);
      }
      return;
    }
  }
}

// --- The quantized input ---------------------------------------------------------------------

struct Input {
  int64_t rows = 0, k = 0, groups = 0, sums = 0;
  std::vector<int8_t> q;     // [rows][k]
  std::vector<float> d;      // [rows][groups]
  std::vector<int32_t> s;    // [rows][k / sum_k]
  const int8_t* qrow(int64_t r) const { return q.data() + r * k; }
  const float* drow(int64_t r) const { return d.data() + r * groups; }
  const int32_t* srow(int64_t r) const { return s.data() + r * sums; }
};

// x * id rounded half away from zero (std::round), clamped to +-127, NaN as 0: the scalar
// steps of quantize_row, which the vector form below repeats exactly
inline int8_t to_q8(float v) {
  v = std::round(v);
  v = v > 127.0f ? 127.0f : (v < -127.0f ? -127.0f : v);
  return v == v ? int8_t(v) : int8_t(0);
}

inline float as_float(float v) { return v; }
inline float as_float(c10::BFloat16 v) { return float(v); }

#if defined(__AVX512F__) && defined(__AVX512BW__)
// 16 inputs as float32 (bfloat16 widened by its bits, as float(c10::BFloat16) does)
inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
inline __m512 load16(const c10::BFloat16* p) {
  const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// to_q8 on 16 lanes: truncate, then step away from zero where the dropped part is >= 0.5
// (x - trunc(x) is exact), which is std::round's half-away-from-zero
inline __m128i to_q8x16(__m512 v) {
  const __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m512 frac = _mm512_sub_ps(v, t);
  const __m512 absfrac = _mm512_abs_ps(frac);
  const __mmask16 up = _mm512_cmp_ps_mask(absfrac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  const __m512 one = _mm512_or_ps(_mm512_set1_ps(1.0f),
                                  _mm512_and_ps(v, _mm512_set1_ps(-0.0f)));  // copysign(1, v)
  __m512 r = _mm512_mask_add_ps(t, up, t, one);
  r = _mm512_min_ps(r, _mm512_set1_ps(127.0f));
  r = _mm512_max_ps(r, _mm512_set1_ps(-127.0f));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_maskz_mov_ps(static_cast<__mmask16>(~nan), r);
  return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r));
}
#endif

// One input row quantized per group: d = max |x| / 127, q = round(x / d) (as x * (1 / d)),
// and the integer sums the corrections need. The vector form computes the same values.
template <typename T>
void quantize_row(const T* x, int64_t k, const Spec& sp, int8_t* q, float* d, int32_t* s) {
  for (int64_t g = 0; g * sp.group_k < k; ++g) {
    const T* xg = x + g * sp.group_k;
    int8_t* qg = q + g * sp.group_k;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    __m512 vmax = _mm512_setzero_ps();
    for (int i = 0; i < sp.group_k; i += 16)
      vmax = _mm512_max_ps(_mm512_abs_ps(load16(xg + i)), vmax);  // a NaN lane keeps vmax
    const float amax = _mm512_reduce_max_ps(vmax);
#else
    float amax = 0.0f;
    for (int i = 0; i < sp.group_k; ++i) amax = std::max(amax, std::fabs(as_float(xg[i])));
#endif
    const float dg = amax / 127.0f;
    const float id = dg != 0.0f ? 1.0f / dg : 0.0f;
    d[g] = dg;
#if defined(__AVX512F__) && defined(__AVX512BW__)
    const __m512 vid = _mm512_set1_ps(id);
    for (int i = 0; i < sp.group_k; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qg + i),
                       to_q8x16(_mm512_mul_ps(load16(xg + i), vid)));
#else
    for (int i = 0; i < sp.group_k; ++i) qg[i] = to_q8(as_float(xg[i]) * id);
#endif
  }
  for (int64_t j = 0; j * sp.sum_k < k; ++j) {
    int32_t sum = 0;
    for (int i = 0; i < sp.sum_k; ++i) sum += q[j * sp.sum_k + i];
    s[j] = sum;
  }
}

Input quantize_input(const at::Tensor& x, const Spec& sp) {
  Input in;
  in.rows = x.size(0);
  in.k = x.size(1);
  in.groups = in.k / sp.group_k;
  in.sums = in.k / sp.sum_k;
  in.q.resize(in.rows * in.k);
  in.d.resize(in.rows * in.groups);
  in.s.resize(in.rows * in.sums);
  auto one = [&](int64_t r) {
    int8_t* q = in.q.data() + r * in.k;
    float* d = in.d.data() + r * in.groups;
    int32_t* s = in.s.data() + r * in.sums;
    if (x.scalar_type() == at::kFloat)
      quantize_row(x.data_ptr<float>() + r * in.k, in.k, sp, q, d, s);
    else
      quantize_row(x.data_ptr<c10::BFloat16>() + r * in.k, in.k, sp, q, d, s);
  };
  if (in.rows >= 16) {
    at::parallel_for(0, in.rows, 4, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) one(r);
    });
  } else {
    for (int64_t r = 0; r < in.rows; ++r) one(r);
  }
  return in;
}

// --- The scalar path (every machine; the reference the vector paths are held to) ------------

float scalar_output(int type, const uint8_t* tile, int64_t groups, int gbytes, int lane,
                    const Input& in, int64_t r) {
  const int8_t* x = in.qrow(r);
  const float* xd = in.drow(r);
  const int32_t* xs = in.srow(r);
  float acc = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* w = tile + g * gbytes;
    switch (type) {
      case Q4_0:
      case Q4_1:
      case Q8_0: {
        const int8_t* xg = x + g * 32;
        int32_t sum = 0;
        for (int v = 0; v < 32; ++v) {
          const int q = type == Q8_0 ? int(int8_t(w[(v / 4) * 64 + lane * 4 + v % 4]))
                                     : nibble_at(w, lane, v);
          sum += q * int(xg[v]);
        }
        const int dpos = type == Q8_0 ? 512 : 256;
        const float scale = half(w + dpos + lane * 2) * xd[g];
        if (type == Q4_0) sum -= 8 * xs[g];
        acc = std::fma(float(sum), scale, acc);
        if (type == Q4_1) acc = std::fma(half(w + 288 + lane * 2), xd[g] * float(xs[g]), acc);
        break;
      }
      case Q4_K:
      case Q5_K: {
        const bool five = type == Q5_K;
        const int8_t* xg = x + g * 256;
        int32_t isc = 0, imn = 0;
        for (int s = 0; s < 8; ++s) {
          int32_t sum = 0;
          for (int i = 0; i < 32; ++i) {
            const int q = five ? q5_at(w, lane, s, i) : nibble_at(w + s * 256, lane, i);
            sum += q * int(xg[s * 32 + i]);
          }
          isc += sum * int(w[(five ? off::K5_SC : off::K_SC) + s * 16 + lane]);
          imn += int(mn_at(w, five ? off::K5_MN : off::K_MN, lane, s)) * xs[g * 8 + s];
        }
        const float d = half(w + (five ? off::K5_D : off::K_D) + lane * 2);
        const float dmin = half(w + (five ? off::K5_DMIN : off::K_DMIN) + lane * 2);
        acc = std::fma(float(isc), d * xd[g], acc);
        acc = std::fma(-float(imn), dmin * xd[g], acc);
        break;
      }
      case Q6_K: {
        const int8_t* xg = x + g * 256;
        int32_t isc = 0;
        for (int s = 0; s < 16; ++s) {
          int32_t sum = 0;
          for (int i = 0; i < 16; ++i) sum += q6_at(w, lane, s, i) * int(xg[s * 16 + i]);
          sum -= 32 * xs[g * 16 + s];
          isc += sum * int(int8_t(w[off::K6_SC + s * 16 + lane]));
        }
        acc = std::fma(float(isc), half(w + off::K6_D + lane * 2) * xd[g], acc);
        break;
      }
    }
  }
  return acc;
}

void scalar_tile(int type, const uint8_t* tile, int64_t groups, int gbytes, const Input& in,
                 int64_t r0, int rows, float* acc /* [rows][16] */) {
  for (int r = 0; r < rows; ++r)
    for (int lane = 0; lane < TILE; ++lane)
      acc[r * TILE + lane] = scalar_output(type, tile, groups, gbytes, lane, in, r0 + r);
}

// --- 512-bit vectors (AVX-512 BW; VNNI where the CPU has it) --------------------------------
#ifdef SW_Q512

inline __m512i ld512(const uint8_t* p) { return _mm512_loadu_si512(reinterpret_cast<const void*>(p)); }
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512 halves16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// acc + the sum over each lane's 4 byte products (unsigned weight bytes x signed input bytes);
// the operands never reach the saturation of the non-VNNI pair sums (weights < 64 here)
inline __m512i dot4(__m512i acc, __m512i u8, __m512i s8) {
#ifdef __AVX512VNNI__
  return _mm512_dpbusd_epi32(acc, u8, s8);
#else
  const __m512i pairs = _mm512_maddubs_epi16(u8, s8);
  return _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
#endif
}

inline __m512i dot_pairs16(__m512i acc, __m512i a, __m512i b) {
#ifdef __AVX512VNNI__
  return _mm512_dpwssd_epi32(acc, a, b);
#else
  return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

inline void unpack_nibbles512(const uint8_t* chunk, __m512i* w, int pairs) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  for (int p = 0; p < pairs; ++p) {
    const __m512i v = ld512(chunk + p * 64);
    w[2 * p] = _mm512_and_si512(v, m4);
    w[2 * p + 1] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// signed weight bytes against signed inputs: VNNI takes them offset by 128 (the offset's share,
// 128 times the input sum, is taken off after); without VNNI the pair sums could saturate, so
// the weight's sign moves onto the input (|w| <= 128, |x| <= 127)
struct SignedQ8 {
  __m512i w[8];
#ifndef __AVX512VNNI__
  __mmask64 neg[8];
#endif
  void load(const uint8_t* g) {
    for (int i = 0; i < 8; ++i) {
      const __m512i v = ld512(g + i * 64);
#ifdef __AVX512VNNI__
      w[i] = _mm512_xor_si512(v, _mm512_set1_epi8(char(0x80)));
#else
      neg[i] = _mm512_movepi8_mask(v);
      w[i] = _mm512_abs_epi8(v);
#endif
    }
  }
  __m512i sum(const int8_t* x, int32_t xsum) const {
    __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();  // two chains, as dot_row
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      __m512i xv = bcast4(x + 4 * i);
#ifndef __AVX512VNNI__
      xv = _mm512_mask_sub_epi8(xv, neg[i], _mm512_setzero_si512(), xv);
#endif
      if (i % 2) b = dot4(b, w[i], xv); else a = dot4(a, w[i], xv);
    }
    __m512i acc = _mm512_add_epi32(a, b);
#ifdef __AVX512VNNI__
    acc = _mm512_sub_epi32(acc, _mm512_set1_epi32(128 * xsum));
#else
    (void)xsum;
#endif
    return acc;
  }
};

// The input rows' pointers, fetched once per tile (not per group and row).
template <int R>
struct RowPtrs {
  const int8_t* q[R];
  const float* d[R];
  const int32_t* s[R];
  RowPtrs(const Input& in, int64_t r0) {
    for (int r = 0; r < R; ++r) {
      q[r] = in.qrow(r0 + r);
      d[r] = in.drow(r0 + r);
      s[r] = in.srow(r0 + r);
    }
  }
};

// One row's integer sum over 4 * N inputs against N weight vectors, in two chains (even and
// odd k-groups) so that a row's multiply-adds overlap instead of waiting on each other: the
// sums are integers, so how they are grouped changes no bit.
template <int N>
inline __m512i dot_row(const __m512i* wv, const int8_t* x) {
  __m512i a = _mm512_setzero_si512(), b = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int i = 0; i < N; i += 2) {
    a = dot4(a, wv[i], bcast4(x + 4 * i));
    b = dot4(b, wv[i + 1], bcast4(x + 4 * i + 4));
  }
  return _mm512_add_epi32(a, b);
}

// Bytes [p, p + bytes) asked into the cache ahead of their loads (a prefetch changes no value,
// and one past the weight's end cannot fault). Two uses, each measured in one process,
// alternating:
// - The K types' next group (2.5-3.4 KB) while this group's products run, in passes of several
//   rows: with the hardware prefetcher alone, 8 rows of Q4_K blocks spent about half their time
//   waiting on these loads (with it, 8 rows of a 1.7B model's pass 116 ms against 133). One row
//   streams faster without it, and the small groups of Q4_0, Q4_1 and Q8_0 gained nothing.
// - One row of Q6_K, whose unpacking leaves the loads little room to overlap: with the hardware
//   prefetcher alone its 12 down projections of a 1.7B model read 26 GB/s against 34 for
//   Q4_K's. Each sub-block's three lines are asked for one group ahead: those products 8.2 ms
//   -> 6.8, the output head 4.9 -> 4.2 ms (3,072 bytes ahead, in a quicker hour: 6.3 -> 5.0,
//   the head 2.9 -> 2.7, a whole one-row pass after 400 tokens 43.8 -> 43.2 ms). Two to eight
//   sub-blocks ahead gained little.
inline void prefetch(const uint8_t* p, int bytes) {
  for (int off = 0; off < bytes; off += 64)
    _mm_prefetch(reinterpret_cast<const char*>(p + off), _MM_HINT_T0);
}

template <int TYPE, int R>
void tile512(const uint8_t* tile, int64_t groups, int gbytes, const Input& in, int64_t r0,
             float* out /* [R][16] */) {
  const RowPtrs<R> rp(in, r0);
  __m512 acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* w = tile + g * gbytes;
    if constexpr (R > 1 && (TYPE == Q4_K || TYPE == Q5_K || TYPE == Q6_K))
      prefetch(w + gbytes, gbytes);
    if constexpr (TYPE == Q4_0 || TYPE == Q4_1) {
      __m512i wv[8];
      unpack_nibbles512(w, wv, 4);
      const __m512 dw = halves16(w + 256);
      const __m512 mw = TYPE == Q4_1 ? halves16(w + 288) : _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        __m512i sum = dot_row<8>(wv, rp.q[r] + g * 32);
        const int32_t xs = rp.s[r][g];
        const float xd = rp.d[r][g];
        if constexpr (TYPE == Q4_0) sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(8 * xs));
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(dw, _mm512_set1_ps(xd)),
                                 acc[r]);
        if constexpr (TYPE == Q4_1)
          acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xd * float(xs)), acc[r]);
      }
    } else if constexpr (TYPE == Q8_0) {
      SignedQ8 q;
      q.load(w);
      const __m512 dw = halves16(w + 512);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512i sum = q.sum(rp.q[r] + g * 32, rp.s[r][g]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum),
                                 _mm512_mul_ps(dw, _mm512_set1_ps(rp.d[r][g])), acc[r]);
      }
    } else if constexpr (TYPE == Q4_K || TYPE == Q5_K) {
      constexpr bool five = TYPE == Q5_K;
      constexpr int sc_at = five ? off::K5_SC : off::K_SC, mn_at = five ? off::K5_MN : off::K_MN;
      __m512i isc[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) isc[r] = _mm512_setzero_si512();
      for (int s = 0; s < 8; ++s) {
        __m512i wv[8];
        unpack_nibbles512(w + s * 256, wv, 4);
        if constexpr (five) {
          const __m512i hv = ld512(w + off::K5_QH + s * 64);
          const __m512i bit = _mm512_set1_epi8(0x10);
          wv[0] = _mm512_or_si512(wv[0], _mm512_and_si512(_mm512_slli_epi16(hv, 4), bit));
          wv[1] = _mm512_or_si512(wv[1], _mm512_and_si512(_mm512_slli_epi16(hv, 3), bit));
          wv[2] = _mm512_or_si512(wv[2], _mm512_and_si512(_mm512_slli_epi16(hv, 2), bit));
          wv[3] = _mm512_or_si512(wv[3], _mm512_and_si512(_mm512_slli_epi16(hv, 1), bit));
          wv[4] = _mm512_or_si512(wv[4], _mm512_and_si512(hv, bit));
          wv[5] = _mm512_or_si512(wv[5], _mm512_and_si512(_mm512_srli_epi16(hv, 1), bit));
          wv[6] = _mm512_or_si512(wv[6], _mm512_and_si512(_mm512_srli_epi16(hv, 2), bit));
          wv[7] = _mm512_or_si512(wv[7], _mm512_and_si512(_mm512_srli_epi16(hv, 3), bit));
        }
        const __m512i sc = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + sc_at + s * 16)));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          const __m512i sum = dot_row<8>(wv, rp.q[r] + g * 256 + s * 32);
          isc[r] = _mm512_add_epi32(isc[r], _mm512_mullo_epi32(sum, sc));
        }
      }
      __m512i mn[4];
      for (int p = 0; p < 4; ++p) mn[p] = ld512(w + mn_at + p * 64);
      const __m512 dw = halves16(w + (five ? off::K5_D : off::K_D));
      const __m512 dmin = halves16(w + (five ? off::K5_DMIN : off::K_DMIN));
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const int32_t* xs = rp.s[r] + g * 8;
        __m512i imn = _mm512_setzero_si512();
        for (int p = 0; p < 4; ++p) {
          const int32_t both = (xs[2 * p] & 0xFFFF) | (int32_t(uint32_t(xs[2 * p + 1]) << 16));
          imn = dot_pairs16(imn, mn[p], _mm512_set1_epi32(both));
        }
        const __m512 xd = _mm512_set1_ps(rp.d[r][g]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isc[r]), _mm512_mul_ps(dw, xd), acc[r]);
        acc[r] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(imn), _mm512_mul_ps(dmin, xd), acc[r]);
      }
    } else if constexpr (TYPE == Q6_K) {
      __m512i isc[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) isc[r] = _mm512_setzero_si512();
      const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
      for (int s = 0; s < 16; ++s) {
        const uint8_t* sub = w + s * 192;
        if constexpr (R == 1) prefetch(sub + gbytes, 192);
        const __m512i l0 = ld512(sub), l1 = ld512(sub + 64), hv = ld512(sub + 128);
        __m512i wv[4];
        wv[0] = _mm512_or_si512(_mm512_and_si512(l0, m4), _mm512_and_si512(hv, m30));
        wv[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l0, 4), m4),
                                _mm512_and_si512(_mm512_srli_epi16(hv, 2), m30));
        wv[2] = _mm512_or_si512(_mm512_and_si512(l1, m4),
                                _mm512_and_si512(_mm512_slli_epi16(hv, 4), m30));
        wv[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l1, 4), m4),
                                _mm512_and_si512(_mm512_slli_epi16(hv, 2), m30));
        const __m512i sc = _mm512_cvtepi8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + off::K6_SC + s * 16)));
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) {
          __m512i sum = dot_row<4>(wv, rp.q[r] + g * 256 + s * 16);
          sum = _mm512_sub_epi32(sum, _mm512_set1_epi32(32 * rp.s[r][g * 16 + s]));
          isc[r] = _mm512_add_epi32(isc[r], _mm512_mullo_epi32(sum, sc));
        }
      }
      const __m512 dw = halves16(w + off::K6_D);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 xd = _mm512_set1_ps(rp.d[r][g]);
        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isc[r]), _mm512_mul_ps(dw, xd), acc[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) _mm512_storeu_ps(out + r * TILE, acc[r]);
}

template <int TYPE>
void rows512(const uint8_t* tile, int64_t groups, int gbytes, const Input& in, int64_t r0,
             int rows, float* out) {
  switch (rows) {
    case 1: return tile512<TYPE, 1>(tile, groups, gbytes, in, r0, out);
    case 2: return tile512<TYPE, 2>(tile, groups, gbytes, in, r0, out);
    case 3: return tile512<TYPE, 3>(tile, groups, gbytes, in, r0, out);
    case 4: return tile512<TYPE, 4>(tile, groups, gbytes, in, r0, out);
    case 5: return tile512<TYPE, 5>(tile, groups, gbytes, in, r0, out);
    case 6: return tile512<TYPE, 6>(tile, groups, gbytes, in, r0, out);
    case 7: return tile512<TYPE, 7>(tile, groups, gbytes, in, r0, out);
    default: return tile512<TYPE, 8>(tile, groups, gbytes, in, r0, out);
  }
}

void vector512_tile(int type, const uint8_t* tile, int64_t groups, int gbytes, const Input& in,
                    int64_t r0, int rows, float* out) {
  switch (type) {
    case Q4_0: return rows512<Q4_0>(tile, groups, gbytes, in, r0, rows, out);
    case Q4_1: return rows512<Q4_1>(tile, groups, gbytes, in, r0, rows, out);
    case Q8_0: return rows512<Q8_0>(tile, groups, gbytes, in, r0, rows, out);
    case Q4_K: return rows512<Q4_K>(tile, groups, gbytes, in, r0, rows, out);
    case Q5_K: return rows512<Q5_K>(tile, groups, gbytes, in, r0, rows, out);
    case Q6_K: return rows512<Q6_K>(tile, groups, gbytes, in, r0, rows, out);
  }
}
#endif  // SW_Q512

// --- 256-bit vectors (AVX2): the tile's 16 lanes as two halves of 8 --------------------------
#ifdef SW_Q256

inline __m256i ld256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}
inline __m256i bcast4_256(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256 halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256i dot4_256(__m256i acc, __m256i u8, __m256i s8) {
  const __m256i pairs = _mm256_maddubs_epi16(u8, s8);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
}

// half h (lanes 8h..8h+7) of a 64-byte tile vector
inline __m256i half_of(const uint8_t* v64, int h) { return ld256(v64 + 32 * h); }

template <int TYPE, int R>
void tile256(const uint8_t* tile, int64_t groups, int gbytes, const Input& in, int64_t r0,
             float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int h = 0; h < 2; ++h) {
    __m256 acc[R];
    for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* w = tile + g * gbytes;
      if constexpr (TYPE == Q4_0 || TYPE == Q4_1 || TYPE == Q8_0) {
        __m256i wv[8];
        if constexpr (TYPE == Q8_0) {
          for (int i = 0; i < 8; ++i) wv[i] = half_of(w + i * 64, h);
        } else {
          for (int p = 0; p < 4; ++p) {
            const __m256i v = half_of(w + p * 64, h);
            wv[2 * p] = _mm256_and_si256(v, m4);
            wv[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          }
        }
        const __m256 dw = halves8(w + (TYPE == Q8_0 ? 512 : 256) + 16 * h);
        for (int r = 0; r < R; ++r) {
          const int8_t* x = in.qrow(r0 + r) + g * 32;
          __m256i sum = _mm256_setzero_si256();
          for (int i = 0; i < 8; ++i) {
            const __m256i xv = bcast4_256(x + 4 * i);
            if constexpr (TYPE == Q8_0)
              sum = dot4_256(sum, _mm256_abs_epi8(wv[i]), _mm256_sign_epi8(xv, wv[i]));
            else
              sum = dot4_256(sum, wv[i], xv);
          }
          const int32_t xs = in.srow(r0 + r)[g];
          const float xd = in.drow(r0 + r)[g];
          if constexpr (TYPE == Q4_0) sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(8 * xs));
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum),
                                   _mm256_mul_ps(dw, _mm256_set1_ps(xd)), acc[r]);
          if constexpr (TYPE == Q4_1)
            acc[r] = _mm256_fmadd_ps(halves8(w + 288 + 16 * h), _mm256_set1_ps(xd * float(xs)),
                                     acc[r]);
        }
      } else if constexpr (TYPE == Q4_K || TYPE == Q5_K) {
        constexpr bool five = TYPE == Q5_K;
        constexpr int sc_at = five ? off::K5_SC : off::K_SC, mn_at = five ? off::K5_MN : off::K_MN;
        __m256i isc[R];
        for (int r = 0; r < R; ++r) isc[r] = _mm256_setzero_si256();
        for (int s = 0; s < 8; ++s) {
          __m256i wv[8];
          for (int p = 0; p < 4; ++p) {
            const __m256i v = half_of(w + s * 256 + p * 64, h);
            wv[2 * p] = _mm256_and_si256(v, m4);
            wv[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
          }
          if constexpr (five) {
            const __m256i hv = half_of(w + off::K5_QH + s * 64, h);
            const __m256i bit = _mm256_set1_epi8(0x10);
            wv[0] = _mm256_or_si256(wv[0], _mm256_and_si256(_mm256_slli_epi16(hv, 4), bit));
            wv[1] = _mm256_or_si256(wv[1], _mm256_and_si256(_mm256_slli_epi16(hv, 3), bit));
            wv[2] = _mm256_or_si256(wv[2], _mm256_and_si256(_mm256_slli_epi16(hv, 2), bit));
            wv[3] = _mm256_or_si256(wv[3], _mm256_and_si256(_mm256_slli_epi16(hv, 1), bit));
            wv[4] = _mm256_or_si256(wv[4], _mm256_and_si256(hv, bit));
            wv[5] = _mm256_or_si256(wv[5], _mm256_and_si256(_mm256_srli_epi16(hv, 1), bit));
            wv[6] = _mm256_or_si256(wv[6], _mm256_and_si256(_mm256_srli_epi16(hv, 2), bit));
            wv[7] = _mm256_or_si256(wv[7], _mm256_and_si256(_mm256_srli_epi16(hv, 3), bit));
          }
          const __m256i sc = _mm256_cvtepu8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + sc_at + s * 16 + 8 * h)));
          for (int r = 0; r < R; ++r) {
            const int8_t* x = in.qrow(r0 + r) + g * 256 + s * 32;
            __m256i sum = _mm256_setzero_si256();
            for (int i = 0; i < 8; ++i) sum = dot4_256(sum, wv[i], bcast4_256(x + 4 * i));
            isc[r] = _mm256_add_epi32(isc[r], _mm256_mullo_epi32(sum, sc));
          }
        }
        __m256i mn[4];
        for (int p = 0; p < 4; ++p) mn[p] = half_of(w + mn_at + p * 64, h);
        const __m256 dw = halves8(w + (five ? off::K5_D : off::K_D) + 16 * h);
        const __m256 dmin = halves8(w + (five ? off::K5_DMIN : off::K_DMIN) + 16 * h);
        for (int r = 0; r < R; ++r) {
          const int32_t* xs = in.srow(r0 + r) + g * 8;
          __m256i imn = _mm256_setzero_si256();
          for (int p = 0; p < 4; ++p) {
            const int32_t both = (xs[2 * p] & 0xFFFF) | (int32_t(uint32_t(xs[2 * p + 1]) << 16));
            imn = _mm256_add_epi32(imn, _mm256_madd_epi16(mn[p], _mm256_set1_epi32(both)));
          }
          const __m256 xd = _mm256_set1_ps(in.drow(r0 + r)[g]);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isc[r]), _mm256_mul_ps(dw, xd), acc[r]);
          acc[r] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(imn), _mm256_mul_ps(dmin, xd), acc[r]);
        }
      } else if constexpr (TYPE == Q6_K) {
        __m256i isc[R];
        for (int r = 0; r < R; ++r) isc[r] = _mm256_setzero_si256();
        const __m256i m30 = _mm256_set1_epi8(0x30);
        for (int s = 0; s < 16; ++s) {
          const uint8_t* sub = w + s * 192;
          const __m256i l0 = half_of(sub, h), l1 = half_of(sub + 64, h), hv = half_of(sub + 128, h);
          __m256i wv[4];
          wv[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(hv, m30));
          wv[1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                  _mm256_and_si256(_mm256_srli_epi16(hv, 2), m30));
          wv[2] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                  _mm256_and_si256(_mm256_slli_epi16(hv, 4), m30));
          wv[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                  _mm256_and_si256(_mm256_slli_epi16(hv, 2), m30));
          const __m256i sc = _mm256_cvtepi8_epi32(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w + off::K6_SC + s * 16 + 8 * h)));
          for (int r = 0; r < R; ++r) {
            const int8_t* x = in.qrow(r0 + r) + g * 256 + s * 16;
            __m256i sum = _mm256_setzero_si256();
            for (int i = 0; i < 4; ++i) sum = dot4_256(sum, wv[i], bcast4_256(x + 4 * i));
            sum = _mm256_sub_epi32(sum, _mm256_set1_epi32(32 * in.srow(r0 + r)[g * 16 + s]));
            isc[r] = _mm256_add_epi32(isc[r], _mm256_mullo_epi32(sum, sc));
          }
        }
        const __m256 dw = halves8(w + off::K6_D + 16 * h);
        for (int r = 0; r < R; ++r) {
          const __m256 xd = _mm256_set1_ps(in.drow(r0 + r)[g]);
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isc[r]), _mm256_mul_ps(dw, xd), acc[r]);
        }
      }
    }
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(out + r * TILE + 8 * h, acc[r]);
  }
}

template <int TYPE>
void rows256(const uint8_t* tile, int64_t groups, int gbytes, const Input& in, int64_t r0,
             int rows, float* out) {
  switch (rows) {
    case 1: return tile256<TYPE, 1>(tile, groups, gbytes, in, r0, out);
    case 2: return tile256<TYPE, 2>(tile, groups, gbytes, in, r0, out);
    case 3: return tile256<TYPE, 3>(tile, groups, gbytes, in, r0, out);
    default: return tile256<TYPE, 4>(tile, groups, gbytes, in, r0, out);
  }
}

void vector256_tile(int type, const uint8_t* tile, int64_t groups, int gbytes, const Input& in,
                    int64_t r0, int rows, float* out) {
  switch (type) {
    case Q4_0: return rows256<Q4_0>(tile, groups, gbytes, in, r0, rows, out);
    case Q4_1: return rows256<Q4_1>(tile, groups, gbytes, in, r0, rows, out);
    case Q8_0: return rows256<Q8_0>(tile, groups, gbytes, in, r0, rows, out);
    case Q4_K: return rows256<Q4_K>(tile, groups, gbytes, in, r0, rows, out);
    case Q5_K: return rows256<Q5_K>(tile, groups, gbytes, in, r0, rows, out);
    case Q6_K: return rows256<Q6_K>(tile, groups, gbytes, in, r0, rows, out);
  }
}
#endif  // SW_Q256

int best_path() {
#ifdef SW_Q512
  return PATH_512;
#elif defined(SW_Q256)
  return PATH_256;
#else
  return PATH_SCALAR;
#endif
}

// Input rows per unpacking of a weight tile. In a tree pass (8 rows or fewer) the K types'
// per-row state (a sum per sub-block scale) spills registers at 8 rows, so they take 4 at a
// time (8 rows of a 1.7B model's Q4_K pass: 116 ms against 130, with the prefetch above); a
// prompt's hundreds of rows go faster unpacked once per 8 (373 rows: 3.88 s against 4.24).
// Measured in one process, alternating. A row's sums are the same whichever rows share them.
int rows_per_unpack(int path, int type, int64_t rows) {
  const bool k_type = type == Q4_K || type == Q5_K || type == Q6_K;
  if (path == PATH_512) return k_type && rows <= MAX_R ? 4 : MAX_R;
  return path == PATH_256 ? 4 : 1;
}

void run_tile(int path, int type, const uint8_t* tile, int64_t groups, int gbytes,
              const Input& in, int64_t r0, int rows, float* out) {
#ifdef SW_Q512
  if (path == PATH_512) return vector512_tile(type, tile, groups, gbytes, in, r0, rows, out);
#endif
#ifdef SW_Q256
  if (path == PATH_256) return vector256_tile(type, tile, groups, gbytes, in, r0, rows, out);
#endif
  scalar_tile(type, tile, groups, gbytes, in, r0, rows, out);
}

}  // namespace

std::vector<int64_t> paths();

// packed [tiles, groups, group_bytes] from the stored blocks [n, k / block_k * block_bytes]
at::Tensor pack(const at::Tensor& blocks, int64_t type, int64_t k) {
  const Spec sp = spec_of(int(type));
  TORCH_CHECK(blocks.scalar_type() == at::kByte && blocks.dim() == 2 && blocks.is_contiguous(),
              "blocks: a contiguous uint8 [rows, bytes] tensor");
  TORCH_CHECK(k > 0 && k % sp.group_k == 0, "k=", k, " is not a whole number of blocks");
  const int64_t n = blocks.size(0), groups = k / sp.group_k;
  TORCH_CHECK(blocks.size(1) == groups * sp.block_bytes, "blocks: ", blocks.size(1),
              " bytes a row, expected ", groups * sp.block_bytes);
  const int64_t tiles = (n + TILE - 1) / TILE;
  auto out = at::zeros({tiles, groups, sp.group_bytes}, at::kByte);
  const uint8_t* src = blocks.data_ptr<uint8_t>();
  uint8_t* dst = out.data_ptr<uint8_t>();
  at::parallel_for(0, n, 64, [&](int64_t b, int64_t e) {
    for (int64_t row = b; row < e; ++row)
      for (int64_t g = 0; g < groups; ++g)
        pack_block(int(type), src + (row * groups + g) * sp.block_bytes,
                   dst + ((row / TILE) * groups + g) * sp.group_bytes, int(row % TILE));
  });
  return out;
}

// float32 [len(rows), k]: the given output rows' weights, as the gguf package decodes them
at::Tensor dequantize(const at::Tensor& packed, int64_t type, const at::Tensor& rows) {
  const Spec sp = spec_of(int(type));
  const int64_t groups = packed.size(1);
  auto idx = rows.to(at::kLong).contiguous();
  auto out = at::empty({idx.size(0), groups * sp.group_k}, at::kFloat);
  const uint8_t* base = packed.data_ptr<uint8_t>();
  const int64_t* r = idx.data_ptr<int64_t>();
  float* o = out.data_ptr<float>();
  const int64_t limit = packed.size(0) * TILE;
  for (int64_t i = 0; i < idx.size(0); ++i) {
    TORCH_CHECK(r[i] >= 0 && r[i] < limit, "row ", r[i], " out of range");
    const uint8_t* tile = base + (r[i] / TILE) * groups * sp.group_bytes;
    for (int64_t g = 0; g < groups; ++g)
      dequant_group(int(type), tile + g * sp.group_bytes, int(r[i] % TILE),
                    o + i * groups * sp.group_k + g * sp.group_k);
  }
  return out;
}

// x [m, k] (float32 or bfloat16) times the packed weight's transpose: [m, n] in x's dtype or
// float32; `path` 0 takes the fastest this build has (for tests: 1 scalar, 2 AVX2, 3 AVX-512)
namespace {

// The products of the quantized rows `in` with a packed weight: out[r * ldo + j] (+ bias[j]),
// float32; tiles of 16 outputs spread over PyTorch's threads (each output computed by one).
void product(int run, int type, const Input& in, const uint8_t* w, int64_t groups, int64_t n,
             const float* bias, float* out, int64_t ldo) {
  const Spec sp = spec_of(type);
  const int64_t tiles = (n + TILE - 1) / TILE, m = in.rows;
  const int per = rows_per_unpack(run, type, m);
  at::parallel_for(0, tiles, 1, [&](int64_t t0, int64_t t1) {
    float acc[MAX_R * TILE];
    for (int64_t t = t0; t < t1; ++t) {
      const uint8_t* tile = w + t * groups * sp.group_bytes;
      const int lanes = int(std::min<int64_t>(TILE, n - t * TILE));
      for (int64_t r0 = 0; r0 < m; r0 += per) {
        const int rows = int(std::min<int64_t>(per, m - r0));
        run_tile(run, type, tile, groups, sp.group_bytes, in, r0, rows, acc);
        for (int r = 0; r < rows; ++r) {
          float* o = out + (r0 + r) * ldo + t * TILE;
          for (int lane = 0; lane < lanes; ++lane)
            o[lane] = bias ? acc[r * TILE + lane] + bias[t * TILE + lane] : acc[r * TILE + lane];
        }
      }
    }
  });
}

int checked_path(int64_t path) {
  const int run = path == PATH_BEST ? best_path() : int(path);
  const std::vector<int64_t> built = paths();
  TORCH_CHECK(std::find(built.begin(), built.end(), run) != built.end(), "path ", run,
              " is not in this build");
  return run;
}

const float* bias_of(const c10::optional<at::Tensor>& bias, int64_t n, at::Tensor& keep) {
  if (!bias.has_value() || !bias->defined()) return nullptr;
  keep = bias->to(at::kFloat).contiguous();
  TORCH_CHECK(keep.numel() == n, "bias: ", n, " values");
  return keep.data_ptr<float>();
}

}  // namespace

// x [m, k] (float32 or bfloat16) times the packed weight's transpose: [m, n] in x's dtype or
// float32; `path` 0 takes the fastest this build has (for tests: 1 scalar, 2 AVX2, 3 AVX-512)
at::Tensor linear(const at::Tensor& x_in, const at::Tensor& packed, int64_t type, int64_t n,
                  const c10::optional<at::Tensor>& bias, bool float_out, int64_t path) {
  const Spec sp = spec_of(int(type));
  TORCH_CHECK(x_in.dim() == 2, "x: [rows, k]");
  TORCH_CHECK(x_in.scalar_type() == at::kFloat || x_in.scalar_type() == at::kBFloat16,
              "x: float32 or bfloat16");
  const at::Tensor x = x_in.contiguous();
  const int64_t m = x.size(0), k = x.size(1), groups = packed.size(1);
  TORCH_CHECK(groups * sp.group_k == k, "x has ", k, " columns, the weight ", groups * sp.group_k);
  TORCH_CHECK(n <= packed.size(0) * TILE, "n too large for the packed weight");
  const int run = checked_path(path);
  const Input in = quantize_input(x, sp);
  at::Tensor keep;
  const float* b = bias_of(bias, n, keep);
  auto out = at::empty({m, n}, at::kFloat);
  product(run, int(type), in, packed.data_ptr<uint8_t>(), groups, n, b, out.data_ptr<float>(), n);
  if (!float_out && x.scalar_type() == at::kBFloat16) return out.to(at::kBFloat16);
  return out;
}

// --- A decoder layer's work around its attention, fused (float32 activations) ---------------
//
// A pass over a few tokens of a small model spends as long in PyTorch's per-op machinery as in
// the products (about 25 small ops a layer); these two calls do a layer's norm, products,
// rotary, activation and residuals each in one. Every row is computed from its own values
// alone, in one fixed order, so a tree row is still exactly the one-token pass's row.

namespace {

#if defined(__AVX512F__)
// e^x, Cephes' expf on 16 lanes (x clamped to [-87.3, 88.3], where 2^n stays a normal float):
// the same steps on every call, so a row's activation never depends on the pass
inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.3f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  const __m512i e = _mm512_slli_epi32(
      _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}
#endif

// y = silu(gate) * up for one row (gate and up side by side in g): 16 lanes at a time where
// the CPU has AVX-512 (the scalar exp cost a pass as long as a row's products), else libm's
inline void silu_times(const float* g, int64_t inner, float* y) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= inner; i += 16) {
    const __m512 gate = _mm512_loadu_ps(g + i);
    const __m512 den = _mm512_add_ps(_mm512_set1_ps(1.0f), exp512(_mm512_sub_ps(_mm512_setzero_ps(), gate)));
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_div_ps(gate, den), _mm512_loadu_ps(g + inner + i)));
  }
#endif
  for (; i < inner; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * g[inner + i];
}

// x * w / rms(x) over one row: squares summed in 16 fixed lanes, then the lanes in order
void rms_row(const float* x, const float* w, float eps, int64_t dim, float* out) {
  float lanes[16] = {0};
  int64_t i = 0;
  for (; i + 16 <= dim; i += 16)
    for (int j = 0; j < 16; ++j) lanes[j] += x[i + j] * x[i + j];
  float sum = 0.0f;
  for (int j = 0; j < 16; ++j) sum += lanes[j];
  for (; i < dim; ++i) sum += x[i] * x[i];
  const float inv = 1.0f / std::sqrt(sum / float(dim) + eps);
  for (int64_t j = 0; j < dim; ++j) out[j] = w[j] * (x[j] * inv);
}

at::Tensor rms_rows(const at::Tensor& h, const at::Tensor& w, double eps) {
  const int64_t m = h.size(0), dim = h.size(1);
  auto out = at::empty({m, dim}, at::kFloat);
  const float* x = h.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  for (int64_t r = 0; r < m; ++r)
    rms_row(x + r * dim, wp, float(eps), dim, out.data_ptr<float>() + r * dim);
  return out;
}

// The parts' products of x [m, k], side by side in out [m, sum of n]: each part a packed
// weight of its own type (a file may give q, k and v different types), x quantized once per
// kind of input block.
void products(int run, const at::Tensor& x, const std::vector<at::Tensor>& packed,
              const std::vector<int64_t>& types, const std::vector<int64_t>& ns,
              const std::vector<c10::optional<at::Tensor>>& biases, float* out, int64_t ldo) {
  std::vector<std::pair<std::pair<int, int>, Input>> inputs;
  int64_t col = 0;
  for (size_t i = 0; i < packed.size(); ++i) {
    const Spec sp = spec_of(int(types[i]));
    TORCH_CHECK(packed[i].size(1) * sp.group_k == x.size(1), "part ", i, ": ",
                packed[i].size(1) * sp.group_k, " inputs, x has ", x.size(1));
    const Input* in = nullptr;
    for (auto& [key, made] : inputs)
      if (key == std::make_pair(sp.group_k, sp.sum_k)) in = &made;
    if (in == nullptr) {
      inputs.emplace_back(std::make_pair(sp.group_k, sp.sum_k), quantize_input(x, sp));
      in = &inputs.back().second;
    }
    at::Tensor keep;
    const float* b = bias_of(biases[i], ns[i], keep);
    product(run, int(types[i]), *in, packed[i].data_ptr<uint8_t>(), packed[i].size(1), ns[i], b,
            out + col, ldo);
    col += ns[i];
  }
}

int64_t total(const std::vector<int64_t>& ns) {
  int64_t n = 0;
  for (int64_t v : ns) n += v;
  return n;
}

}  // namespace

// h [m, D] float32 -> q, k, v side by side [m, (hq + 2 hk) * d]: the input norm, the q/k/v
// products, and q and k rotated by each row's cos and sign-flipped sin [m, d], as the lean pass
// rotates them (invariant.Rotary: x cos + x rolled by d/2 times the signed sin)
at::Tensor attn_in(const at::Tensor& h, const at::Tensor& norm_w, double eps,
                   const std::vector<at::Tensor>& packed, const std::vector<int64_t>& types,
                   const std::vector<int64_t>& ns,
                   const std::vector<c10::optional<at::Tensor>>& biases, const at::Tensor& cos,
                   const at::Tensor& sin, int64_t rotated_heads, int64_t dim, int64_t path) {
  TORCH_CHECK(h.scalar_type() == at::kFloat && h.is_contiguous(), "h: contiguous float32");
  const int run = checked_path(path);
  const at::Tensor x = rms_rows(h, norm_w.contiguous(), eps);
  const int64_t m = h.size(0), n = total(ns);
  auto out = at::empty({m, n}, at::kFloat);
  products(run, x, packed, types, ns, biases, out.data_ptr<float>(), n);
  const at::Tensor c = cos.contiguous().to(at::kFloat), s = sin.contiguous().to(at::kFloat);
  const int64_t half = dim / 2;
  std::vector<float> row(dim);
  for (int64_t r = 0; r < m; ++r) {
    const float* cr = c.data_ptr<float>() + r * dim;
    const float* sr = s.data_ptr<float>() + r * dim;
    for (int64_t head = 0; head < rotated_heads; ++head) {
      float* v = out.data_ptr<float>() + r * n + head * dim;
      std::memcpy(row.data(), v, sizeof(float) * dim);
      for (int64_t i = 0; i < dim - half; ++i) v[i] = row[i] * cr[i] + row[i + half] * sr[i];
      for (int64_t i = dim - half; i < dim; ++i)
        v[i] = row[i] * cr[i] + row[i + half - dim] * sr[i];
    }
  }
  return out;
}

// h [m, D], o [m, hq * d] (the attention's output) -> the layer's output [m, D]: h + o_proj(o),
// then + down(silu(gate) * up) of its post-attention norm
at::Tensor attn_out(const at::Tensor& h, const at::Tensor& o, const at::Tensor& o_packed,
                    int64_t o_type, const at::Tensor& norm_w, double eps,
                    const std::vector<at::Tensor>& gu_packed, const std::vector<int64_t>& gu_types,
                    const std::vector<int64_t>& gu_ns, const at::Tensor& down_packed,
                    int64_t down_type, int64_t path) {
  TORCH_CHECK(h.scalar_type() == at::kFloat && o.scalar_type() == at::kFloat, "float32 rows");
  const int run = checked_path(path);
  const int64_t m = h.size(0), dim = h.size(1), inner = total(gu_ns) / 2;
  auto h1 = at::empty({m, dim}, at::kFloat);
  products(run, o.contiguous(), {o_packed}, {o_type}, {dim}, {c10::nullopt},
           h1.data_ptr<float>(), dim);
  const float* hp = h.contiguous().data_ptr<float>();
  float* h1p = h1.data_ptr<float>();
  for (int64_t i = 0; i < m * dim; ++i) h1p[i] = hp[i] + h1p[i];
  const at::Tensor x = rms_rows(h1, norm_w.contiguous(), eps);
  auto gu = at::empty({m, 2 * inner}, at::kFloat);
  std::vector<c10::optional<at::Tensor>> none(gu_packed.size(), c10::nullopt);
  products(run, x, gu_packed, gu_types, gu_ns, none, gu.data_ptr<float>(), 2 * inner);
  auto y = at::empty({m, inner}, at::kFloat);
  for (int64_t r = 0; r < m; ++r)
    silu_times(gu.data_ptr<float>() + r * 2 * inner, inner, y.data_ptr<float>() + r * inner);
  auto h2 = at::empty({m, dim}, at::kFloat);
  products(run, y, {down_packed}, {down_type}, {dim}, {c10::nullopt}, h2.data_ptr<float>(), dim);
  float* h2p = h2.data_ptr<float>();
  for (int64_t i = 0; i < m * dim; ++i) h2p[i] = h1p[i] + h2p[i];
  return h2;
}

// --- A pass's layers in one call ----------------------------------------------------------
//
// At the default model's size a one-row pass spent about a quarter of its time in Python
// between these calls (slicing, argument conversion, PyTorch's dispatch), with the second
// thread idle. A Stack holds each layer's weights once and runs attn_in, the attention over
// the layer's cache (the tree extension's `attend_entry`) and attn_out for every
// layer in one call, the same functions in the same order, so every row's bits are the
// per-layer calls'. The interpreter's lock is released meanwhile (the app's window keeps
// drawing while a long pass runs).

// q [n, hq, d], k and v [n, hk, d] float32, the layer's cache buffers, the rows' first slot,
// the tree's table -> float32 [n, hq, d] (tree_attention.cpp `attend_layer`)
typedef at::Tensor (*AttendLayer)(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                  int64_t, int64_t, const at::Tensor&, const at::Tensor&, double);

class Stack {
 public:
  Stack(const pybind11::capsule& attend, int64_t hq, int64_t hk, int64_t dim, double scale)
      : hq_(hq), hk_(hk), dim_(dim), scale_(scale) {
    void* fn = PyCapsule_GetPointer(attend.ptr(), "swiftwriter.attend_layer.v1");
    if (fn == nullptr) throw pybind11::error_already_set();
    attend_ = reinterpret_cast<AttendLayer>(fn);
  }

  void add(const at::Tensor& norm1, double eps1, const std::vector<at::Tensor>& qkv,
           const std::vector<int64_t>& qkv_types, const std::vector<int64_t>& qkv_ns,
           const std::vector<c10::optional<at::Tensor>>& qkv_biases, const at::Tensor& o,
           int64_t o_type, const at::Tensor& norm2, double eps2,
           const std::vector<at::Tensor>& gate_up, const std::vector<int64_t>& gu_types,
           const std::vector<int64_t>& gu_ns, const at::Tensor& down, int64_t down_type) {
    TORCH_CHECK(total(qkv_ns) == (hq_ + 2 * hk_) * dim_, "q, k and v: ", (hq_ + 2 * hk_) * dim_,
                " outputs, the parts give ", total(qkv_ns));
    layers_.push_back({norm1.contiguous(), eps1, qkv, qkv_types, qkv_ns, qkv_biases, o, o_type,
                       norm2.contiguous(), eps2, gate_up, gu_types, gu_ns, down, down_type});
  }

  // h [n, D] float32 after the embedding -> the last layer's output; per layer its rotary
  // tables [n, d], its cache's buffers and the slot its rows start at
  at::Tensor run(at::Tensor h, const std::vector<at::Tensor>& cos,
                 const std::vector<at::Tensor>& sin, const std::vector<at::Tensor>& kb,
                 const std::vector<at::Tensor>& vb, const std::vector<at::Tensor>& kt,
                 const std::vector<int64_t>& starts, int64_t prefix, const at::Tensor& paths,
                 const at::Tensor& lens) const {
    const size_t count = layers_.size();
    TORCH_CHECK(cos.size() == count && sin.size() == count && kb.size() == count &&
                vb.size() == count && kt.size() == count && starts.size() == count,
                "one table, cache and start per layer (", count, " layers)");
    const int64_t n = h.size(0), d = dim_;
    for (size_t i = 0; i < count; ++i) {
      const Layer& l = layers_[i];
      const at::Tensor qkv = attn_in(h, l.norm1, l.eps1, l.qkv, l.qkv_types, l.qkv_ns,
                                     l.qkv_biases, cos[i], sin[i], hq_ + hk_, d, 0);
      const at::Tensor q = qkv.narrow(1, 0, hq_ * d).view({n, hq_, d});
      const at::Tensor k = qkv.narrow(1, hq_ * d, hk_ * d).view({n, hk_, d});
      const at::Tensor v = qkv.narrow(1, (hq_ + hk_) * d, hk_ * d).view({n, hk_, d});
      const at::Tensor o = attend_(q, k, v, kb[i], vb[i], kt[i], starts[i], prefix, paths, lens,
                                   scale_).reshape({n, hq_ * d}).contiguous();
      h = attn_out(h, o, l.o, l.o_type, l.norm2, l.eps2, l.gate_up, l.gu_types, l.gu_ns, l.down,
                   l.down_type, 0);
    }
    return h;
  }

 private:
  struct Layer {
    at::Tensor norm1;
    double eps1;
    std::vector<at::Tensor> qkv;
    std::vector<int64_t> qkv_types, qkv_ns;
    std::vector<c10::optional<at::Tensor>> qkv_biases;
    at::Tensor o;
    int64_t o_type;
    at::Tensor norm2;
    double eps2;
    std::vector<at::Tensor> gate_up;
    std::vector<int64_t> gu_types, gu_ns;
    at::Tensor down;
    int64_t down_type;
  };
  int64_t hq_, hk_, dim_;
  double scale_;
  AttendLayer attend_ = nullptr;
  std::vector<Layer> layers_;
};

// x [m, k] (float32 or bfloat16) as the products quantize it for a type: (q int8 [m, k],
// d float32 [m, k / group], s int32 [m, k / sum span]); for tests
std::vector<at::Tensor> quantize(const at::Tensor& x, int64_t type) {
  const Spec sp = spec_of(int(type));
  TORCH_CHECK(x.dim() == 2 && x.size(1) % sp.group_k == 0, "x: [rows, a multiple of ", sp.group_k, "]");
  const Input in = quantize_input(x.contiguous(), sp);
  auto q = at::empty({in.rows, in.k}, at::kChar);
  auto d = at::empty({in.rows, in.groups}, at::kFloat);
  auto s = at::empty({in.rows, in.sums}, at::kInt);
  std::memcpy(q.data_ptr<int8_t>(), in.q.data(), in.q.size());
  std::memcpy(d.data_ptr<float>(), in.d.data(), in.d.size() * sizeof(float));
  std::memcpy(s.data_ptr<int32_t>(), in.s.data(), in.s.size() * sizeof(int32_t));
  return {q, d, s};
}

std::vector<int64_t> paths() {
  std::vector<int64_t> out = {PATH_SCALAR};
#ifdef SW_Q256
  out.push_back(PATH_256);
#endif
#ifdef SW_Q512
  out.push_back(PATH_512);
#endif
  return out;
}

std::string path_name(int64_t path) {
  switch (path == PATH_BEST ? best_path() : int(path)) {
    case PATH_512:
#ifdef __AVX512VNNI__
      return "AVX-512 VNNI";
#else
      return "AVX-512";
#endif
    case PATH_256: return "AVX2";
    default: return "scalar";
  }
}

std::vector<int64_t> group_spec(int64_t type) {
  const Spec sp = spec_of(int(type));
  return {sp.group_k, sp.group_bytes, sp.sum_k, sp.block_bytes};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("pack", &pack);
  m.def("dequantize", &dequantize);
  m.def("linear", &linear);
  m.def("quantize", &quantize);
  m.def("attn_in", &attn_in);
  m.def("attn_out", &attn_out);
  pybind11::class_<Stack>(m, "Stack")
      .def(pybind11::init<const pybind11::capsule&, int64_t, int64_t, int64_t, double>())
      .def("add", &Stack::add)
      .def("run", &Stack::run, pybind11::call_guard<pybind11::gil_scoped_release>());
  m.def("paths", &paths);
  m.def("path_name", &path_name);
  m.def("group_spec", &group_spec);
}
