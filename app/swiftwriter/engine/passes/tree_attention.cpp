// Tree attention for verification passes (engine/native.py builds it on the user's machine).
//
// Every query row attends over the prefix and then its own root-to-row path, and its result
// depends only on that logical key sequence: never on how many other rows share the call,
// where the path's keys sit in the cache, or how many threads run. So a trie row's output is
// bit for bit what the one-token pass computes for the same token after the same prefix (the
// one-token pass runs this same function), and speculation writes plain decoding's text in
// every dtype. What makes it so:
// - scores with keys in vector lanes, each lane summing over the head dimension in order; the
//   keys are read from a transposed float copy in tiles of W keys (kvcache.py);
// - a softmax piece per CHUNK logical keys (max, exp sum in fixed lanes, values added in key
//   order), pieces merged in order; chunks are split across threads, never a row's sum;
// - the shared prefix tiles are read once for all rows and query heads of a group, and so are
//   the tree's own keys (slots after the prefix), whose scores each row then takes in its
//   path's order; values are summed for blocks of queries at once (each query's sum still in
//   key order), which is what makes a pass over many rows cost little more than one;
// - built with OpenMP (native.py), so the chunks do spread over PyTorch's threads: without it
//   at::parallel_for runs serially inside an extension.
// - on CPUs with AMX, bfloat16 scores and value sums go through the tile unit (below), which is
//   what lets eight rows over 8,000 cached keys cost 1.4x one row instead of 1.6x.
// Built with -ffp-contract=off: a multiply-add is never fused in one place and not another
// (the exponential fuses its own explicitly, the same on every call).

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

typedef float v16 __attribute__((vector_size(64)));
constexpr int W = 16;       // keys per tile (one vector of scores)
constexpr int CHUNK = 128;  // logical keys per softmax piece

inline v16 ld(const float* p) { v16 v; std::memcpy(&v, p, sizeof v); return v; }
inline void st(float* p, v16 v) { std::memcpy(p, &v, sizeof v); }
inline v16 splat(float x) { return (v16){x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x}; }

// a * b + c, one rounding where the CPU fuses it (the same on every call, whichever rows)
inline v16 fma(v16 a, v16 b, v16 c) {
#ifdef __AVX512F__
  return (v16)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
#else
  return a * b + c;
#endif
}

inline v16 vexp(v16 v) {  // Cephes' expf polynomial for v <= 0, lane by lane
  v = v < splat(-87.0f) ? splat(-87.0f) : v;
  v16 nf = fma(v, splat(1.44269504088896341f), splat(12582912.0f)) - splat(12582912.0f);
  v16 r = fma(nf, splat(-0.693359375f), v);
  r = fma(nf, splat(2.12194440e-4f), r);
  v16 p = splat(1.9875691500e-4f);
  p = fma(p, r, splat(1.3981999507e-3f));
  p = fma(p, r, splat(8.3334519073e-3f));
  p = fma(p, r, splat(4.1665795894e-2f));
  p = fma(p, r, splat(1.6666665459e-1f));
  p = fma(p, r, splat(5.0000001201e-1f));
  p = fma(p, r * r, r) + splat(1.0f);
  typedef int32_t v16i __attribute__((vector_size(64)));
  v16i e = (__builtin_convertvector(nf, v16i) + 127) << 23;
  v16 s; std::memcpy(&s, &e, sizeof s);
  return p * s;
}

template <typename T> inline void load_row(const T* src, float* dst, int d);
template <> inline void load_row<float>(const float* src, float* dst, int d) {
  std::memcpy(dst, src, sizeof(float) * d);
}
template <> inline void load_row<c10::BFloat16>(const c10::BFloat16* src, float* dst, int d) {
  const uint16_t* s = reinterpret_cast<const uint16_t*>(src);
  for (int i = 0; i < d; ++i) { uint32_t b = uint32_t(s[i]) << 16; std::memcpy(dst + i, &b, 4); }
}
template <> inline void load_row<c10::Half>(const c10::Half* src, float* dst, int d) {
  for (int i = 0; i < d; ++i) dst[i] = static_cast<float>(src[i]);
}

// scores of R queries against one tile, R independent chains (each lane still sequential over d)
struct FloatScores {
  typedef float Q;
  typedef float K;
  template <int R>
  static void block(const float* const* qs, const float* tile, int d, float sc,
                    float* const* outs) {
    v16 acc[R];
    for (int k = 0; k < R; ++k) acc[k] = splat(0.f);
#pragma GCC unroll 8
    for (int i = 0; i < d; ++i) {
      const v16 t = ld(tile + i * W);
      for (int k = 0; k < R; ++k) acc[k] = acc[k] + splat(qs[k][i]) * t;
    }
    for (int k = 0; k < R; ++k) st(outs[k], acc[k] * splat(sc));
  }
};

// `count` queries in blocks of eight, the rest in one block of its size
template <typename S>
inline void scores_many(const typename S::Q* const* qs, int count, const typename S::K* tile,
                        int d, float sc, float* const* outs) {
  for (; count >= 8; count -= 8, qs += 8, outs += 8) S::template block<8>(qs, tile, d, sc, outs);
  switch (count) {
    case 7: S::template block<7>(qs, tile, d, sc, outs); break;
    case 6: S::template block<6>(qs, tile, d, sc, outs); break;
    case 5: S::template block<5>(qs, tile, d, sc, outs); break;
    case 4: S::template block<4>(qs, tile, d, sc, outs); break;
    case 3: S::template block<3>(qs, tile, d, sc, outs); break;
    case 2: S::template block<2>(qs, tile, d, sc, outs); break;
    case 1: S::template block<1>(qs, tile, d, sc, outs); break;
    default: break;
  }
}

// values of a block of QN queries over `len` keys in ascending order (NV vectors per row)
template <int QN, int NV>
inline void pv_block(const float* const* probs, const float* vals, int len, float* const* outs) {
  constexpr int DP = NV * W;
  v16 acc[QN][NV];
  for (int x = 0; x < QN; ++x) for (int kk = 0; kk < NV; ++kk) acc[x][kk] = splat(0.f);
  const float* pr[QN];
  for (int x = 0; x < QN; ++x) pr[x] = probs[x];
  for (int j = 0; j < len; ++j) {
    v16 v[NV];
    for (int kk = 0; kk < NV; ++kk) v[kk] = ld(vals + j * DP + kk * W);
    for (int x = 0; x < QN; ++x) {
      const v16 p = splat(pr[x][j]);
      for (int kk = 0; kk < NV; ++kk) acc[x][kk] = acc[x][kk] + p * v[kk];
    }
  }
  for (int x = 0; x < QN; ++x) for (int kk = 0; kk < NV; ++kk) st(outs[x] + kk * W, acc[x][kk]);
}

template <int NV>
inline void pv_many(const float* const* probs, int count, const float* vals, int len,
                    float* const* outs) {
  constexpr int QN = NV >= 16 ? 1 : (NV >= 8 ? 3 : 6);
  for (; count >= QN; count -= QN, probs += QN, outs += QN)
    pv_block<QN, NV>(probs, vals, len, outs);
  for (; count > 0; --count, ++probs, ++outs) pv_block<1, NV>(probs, vals, len, outs);
}

// what a call covers: each row's key count, the chunks, the tree's slots and their tiles
struct Plan {
  std::vector<int64_t> total;  // keys per row: the prefix and its path
  int64_t longest = 0, chunks = 0, tb0 = 0, tb1 = 0;
  int nt = 0;   // tree slots any path reads: prefix .. prefix + nt - 1
  int tsw = 0;  // tree scores per query: whole tiles from tb0
  Plan(int64_t prefix, const int32_t* P, const int32_t* Ln, int n, int depth, int nblk)
      : total(n) {
    for (int r = 0; r < n; ++r) {
      total[r] = prefix + Ln[r];
      longest = std::max(longest, total[r]);
      for (int i = 0; i < Ln[r]; ++i) nt = std::max(nt, int(P[r * depth + i]) + 1);
    }
    TORCH_CHECK((prefix + nt + W - 1) / W <= nblk, "paths reach past the key tiles");
    chunks = (longest + CHUNK - 1) / CHUNK;
    tb0 = prefix / W;
    tb1 = nt > 0 ? (prefix + nt - 1) / W + 1 : tb0;
    tsw = int(tb1 - tb0) * W;
  }
};

// one softmax piece in place: a row's m_len scores -> exp(score - max), zero past m_len up to
// its tile; (max, sum) out, the sum in fixed lanes
inline void softmax_piece(float* row, int m_len, float& max_out, float& sum_out) {
  v16 mv = splat(-INFINITY);
  int j = 0;
  for (; j + W <= m_len; j += W) { const v16 x = ld(row + j); mv = x > mv ? x : mv; }
  float m = -INFINITY;
  for (int l = 0; l < W; ++l) m = mv[l] > m ? mv[l] : m;
  for (; j < m_len; ++j) m = row[j] > m ? row[j] : m;
  v16 lsum = splat(0.f);
  int t = 0;
  for (; t + W <= m_len; t += W) {  // whole tiles, in registers (no lane-by-lane masking)
    const v16 e = vexp(ld(row + t) - splat(m));
    st(row + t, e);
    lsum = lsum + e;
  }
  if (t < m_len) {  // the last tile's lanes past m_len are zeros
    typedef int32_t v16i __attribute__((vector_size(64)));
    const v16i lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const v16 e = vexp(ld(row + t) - splat(m));
    const v16 kept = lane < (m_len - t) ? e : splat(0.f);
    st(row + t, kept);
    lsum = lsum + kept;
  }
  for (int w = W / 2; w > 0; w /= 2)
    for (int l = 0; l < w; ++l) lsum[l] += lsum[l + w];
  max_out = m; sum_out = lsum[0];
}

// each query's scores of its path's keys in this chunk, taken from the tree's scored tiles
inline void path_scores(const Plan& plan, const float* ts, const int32_t* P, int depth,
                        int64_t prefix, int64_t a, int64_t tail0, int nq, int g, float* const* sp) {
  for (int k = 0; k < nq; ++k) {
    const int r = k / g;
    const int64_t b = std::min(a + CHUNK, plan.total[r]);
    const float* tk = ts + int64_t(k) * plan.tsw + (prefix - plan.tb0 * W);
    for (int64_t j = tail0; j < b; ++j) sp[k][j - a] = tk[P[r * depth + (j - prefix)]];
  }
}

// each row's chunk pieces merged in chunk order, then normalised
inline void merge(int n, int hq, int d, int64_t chunks, const std::vector<int64_t>& total,
                  const std::vector<float>& pm, const std::vector<float>& pl,
                  const std::vector<float>& pa, int DP, at::Tensor& out) {
  float* O = out.data_ptr<float>();
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < hq; ++h) {
      const int64_t base = (int64_t(r) * hq + h) * chunks;
      const int64_t used = (total[r] + CHUNK - 1) / CHUNK;
      float m = pm[base];
      for (int64_t c = 1; c < used; ++c) m = pm[base + c] > m ? pm[base + c] : m;
      float l = 0.f;
      float* o = O + (int64_t(r) * hq + h) * d;
      for (int i = 0; i < d; ++i) o[i] = 0.f;
      for (int64_t c = 0; c < used; ++c) {
        const float w = std::exp(pm[base + c] - m);
        l += pl[base + c] * w;
        const float* acc = pa.data() + (base + c) * DP;
        for (int i = 0; i < d; ++i) o[i] += acc[i] * w;
      }
      const float inv = 1.0f / l;
      for (int i = 0; i < d; ++i) o[i] *= inv;
    }
}

// A call's partial results (max, sum and values per row, head and chunk), kept by the calling
// thread from one call to the next: after 8,000 cached tokens 32 rows hold 4.6 MB of them a
// layer, which a fresh allocation faulted in page by page on every call once large blocks get
// their own mappings (modelstore/heap.py): 2.3x slower passes. Nothing is read before it is
// written: merge reads only the chunks a row has, each of which the call wrote.
struct Partials {
  std::vector<float> pm, pl, pa;
};
inline Partials& partials(int64_t pieces, int DP) {
  thread_local Partials p;
  if (int64_t(p.pm.size()) < pieces) {
    p.pm.resize(pieces);
    p.pl.resize(pieces);
  }
  if (int64_t(p.pa.size()) < pieces * DP) p.pa.resize(pieces * DP);
  return p;
}

// DP: the head size rounded up to whole vectors (values and outputs are zero-padded to it)
template <typename T, int DP>
void run(const at::Tensor& q, const at::Tensor& kt, const at::Tensor& vbuf, int64_t prefix,
         const at::Tensor& paths, const at::Tensor& lens, double scale, at::Tensor& out) {
  constexpr int NV = DP / W;
  const int n = q.size(0), hq = q.size(1), d = q.size(2);
  const int hk = kt.size(0), nblk = kt.size(1), g = hq / hk;
  const int depth = paths.size(1);
  const int64_t sv_h = vbuf.stride(1), sv_t = vbuf.stride(2);
  const float* KT = kt.data_ptr<float>();
  const T* V = vbuf.data_ptr<T>();
  const T* Q = q.data_ptr<T>();
  const int32_t* P = paths.data_ptr<int32_t>();
  const int32_t* Ln = lens.data_ptr<int32_t>();
  const Plan plan(prefix, P, Ln, n, depth, nblk);
  const std::vector<int64_t>& total = plan.total;
  const int64_t longest = plan.longest, chunks = plan.chunks, tb0 = plan.tb0, tb1 = plan.tb1;
  const int nt = plan.nt, tsw = plan.tsw;
  Partials& kept = partials(int64_t(n) * hq * chunks, DP);
  std::vector<float>&pm = kept.pm, &pl = kept.pl, &pa = kept.pa;
  std::vector<float> qf(int64_t(n) * hq * d);
  const float sc = float(scale);
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < hq; ++h)
      load_row<T>(Q + r * q.stride(0) + h * q.stride(1), qf.data() + (int64_t(r) * hq + h) * d, d);
  const int nq = n * g;
  at::parallel_for(0, hk * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> vals(CHUNK * DP, 0.f), tv(std::max(nt, 1) * DP, 0.f),
        s(int64_t(nq) * CHUNK + W), ts(int64_t(nq) * std::max(tsw, W));
    std::vector<const float*> qp(nq);
    std::vector<float*> sp(nq), sq(nq), op(nq);
    for (int64_t task = begin; task < end; ++task) {
      const int kh = task / chunks;
      const int64_t c = task % chunks, a = c * CHUNK;
      const float* Kh = KT + int64_t(kh) * nblk * d * W;
      const T* Vh = V + kh * sv_h;
      const int64_t shared_end = std::min(a + CHUNK, prefix);
      for (int64_t j = a; j < shared_end; ++j)
        load_row<T>(Vh + j * sv_t, vals.data() + (j - a) * DP, d);
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        qp[k] = qf.data() + (int64_t(r) * hq + h) * d;
        sp[k] = s.data() + int64_t(k) * CHUNK;
      }
      // scores over the shared prefix: every tile once for all rows and heads of the group
      for (int64_t t0 = a; t0 < shared_end; t0 += W) {
        for (int k = 0; k < nq; ++k) sq[k] = sp[k] + (t0 - a);
        scores_many<FloatScores>(qp.data(), nq, Kh + (t0 / W) * d * W, d, sc, sq.data());
      }
      // the tree's own keys (slots after the prefix): scored once, then laid out per path
      const int64_t tail0 = std::max(a, prefix);
      const bool tail = nt > 0 && tail0 < std::min(a + CHUNK, longest);
      if (tail) {
        for (int64_t b = tb0; b < tb1; ++b) {
          for (int k = 0; k < nq; ++k) sq[k] = ts.data() + int64_t(k) * tsw + (b - tb0) * W;
          scores_many<FloatScores>(qp.data(), nq, Kh + b * d * W, d, sc, sq.data());
        }
        for (int i = 0; i < nt; ++i) load_row<T>(Vh + (prefix + i) * sv_t, tv.data() + i * DP, d);
        path_scores(plan, ts.data(), P, depth, prefix, a, tail0, nq, g, sp.data());
      }
      // softmax pieces
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        const int64_t b = std::min(a + CHUNK, total[r]);
        const int64_t idx = (int64_t(r) * hq + h) * chunks + c;
        if (b <= a) { pm[idx] = -INFINITY; pl[idx] = 0.f; continue; }
        softmax_piece(sp[k], int(b - a), pm[idx], pl[idx]);
      }
      // weighted values in ascending key order: the shared keys for blocks of queries, then
      // each query's own path
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        op[k] = pa.data() + ((int64_t(r) * hq + h) * chunks + c) * DP;
      }
      const int shared_len = int(std::max<int64_t>(shared_end - a, 0));
      pv_many<NV>(sp.data(), nq, vals.data(), shared_len, op.data());
      for (int k = 0; k < nq; ++k) {
        const int r = k / g;
        const int64_t b = std::min(a + CHUNK, total[r]);
        float* acc = op[k];
        if (b <= a) { std::memset(acc, 0, 4 * DP); continue; }
        if (!tail || b <= tail0) continue;
        v16 o[NV];
        for (int kk = 0; kk < NV; ++kk) o[kk] = ld(acc + kk * W);
        for (int64_t j = tail0; j < b; ++j) {
          const float* vr = tv.data() + int64_t(P[r * depth + (j - prefix)]) * DP;
          const v16 p = splat(sp[k][j - a]);
          for (int kk = 0; kk < NV; ++kk) o[kk] = o[kk] + p * ld(vr + kk * W);
        }
        for (int kk = 0; kk < NV; ++kk) st(acc + kk * W, o[kk]);
      }
    }
  });
  merge(n, hq, d, chunks, total, pm, pl, pa, DP, out);
}


// Several generations' rows in one call (runs written together: decoding/together.py). Each
// part's cache starts with the same prompt, so the keys of its first `shared` slots (a whole
// number of tiles) are read from the first part's buffers once for every row of every part,
// and each part's own keys (slots `shared` to its prefix, then its tree) from its own. A
// row's result is `run`'s for its own part alone, bit for bit: the same scores (a key's score
// never depends on its tile or the other queries), the same softmax pieces per logical chunk,
// and its values summed in the same key order (the shared keys as pv_many sums them, then its
// own keys continuing that sum one by one, as `run` continues it with its path).
template <int DP>
void run_forest(const at::Tensor& q, const at::Tensor& skt, const at::Tensor& svb, int64_t shared,
                const std::vector<at::Tensor>& kts, const std::vector<at::Tensor>& vbs,
                const std::vector<int64_t>& prefixes, const std::vector<int64_t>& rows,
                const at::Tensor& paths, const at::Tensor& lens, double scale, at::Tensor& out) {
  constexpr int NV = DP / W;
  const int n = q.size(0), hq = q.size(1), d = q.size(2);
  const int hk = skt.size(0), g = hq / hk, depth = paths.size(1);
  const int parts = int(kts.size());
  const int32_t* P = paths.data_ptr<int32_t>();
  const int32_t* Ln = lens.data_ptr<int32_t>();
  std::vector<int> first(parts + 1, 0);
  std::vector<Plan> plans;
  plans.reserve(parts);
  std::vector<int64_t> total(n);
  int64_t chunks = 0;
  for (int p = 0; p < parts; ++p) {
    first[p + 1] = first[p] + int(rows[p]);
    plans.emplace_back(prefixes[p], P + int64_t(first[p]) * depth, Ln + first[p], int(rows[p]),
                       depth, int(kts[p].size(1)));
    chunks = std::max(chunks, plans[p].chunks);
    for (int r = 0; r < rows[p]; ++r) total[first[p] + r] = plans[p].total[r];
  }
  const float* SKT = skt.data_ptr<float>();
  const float* SV = svb.data_ptr<float>();
  const int snblk = skt.size(1);
  const int64_t ssv_h = svb.stride(1), ssv_t = svb.stride(2);
  Partials& kept = partials(int64_t(n) * hq * chunks, DP);
  std::vector<float>&pm = kept.pm, &pl = kept.pl, &pa = kept.pa;
  std::vector<float> qf(int64_t(n) * hq * d);
  const float sc = float(scale);
  const float* Q = q.data_ptr<float>();
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < hq; ++h)
      load_row<float>(Q + r * q.stride(0) + h * q.stride(1), qf.data() + (int64_t(r) * hq + h) * d, d);
  const int nq = n * g;
  int most = 1, widest = W;
  for (int p = 0; p < parts; ++p) {
    most = std::max(most, plans[p].nt);
    widest = std::max(widest, plans[p].tsw);
  }
  at::parallel_for(0, hk * chunks, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> vals(CHUNK * DP, 0.f), own(int64_t(parts) * CHUNK * DP, 0.f),
        tv(int64_t(parts) * most * DP, 0.f), s(int64_t(nq) * CHUNK + W), ts(int64_t(nq) * widest);
    std::vector<const float*> qp(nq);
    std::vector<float*> sp(nq), sq(nq), op(nq);
    for (int64_t task = begin; task < end; ++task) {
      const int kh = task / chunks;
      const int64_t c = task % chunks, a = c * CHUNK;
      const int64_t shared_end = std::min(a + CHUNK, shared);
      const float* Sh = SKT + int64_t(kh) * snblk * d * W;
      for (int64_t j = a; j < shared_end; ++j)
        load_row<float>(SV + kh * ssv_h + j * ssv_t, vals.data() + (j - a) * DP, d);
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        qp[k] = qf.data() + (int64_t(r) * hq + h) * d;
        sp[k] = s.data() + int64_t(k) * CHUNK;
        op[k] = pa.data() + ((int64_t(r) * hq + h) * chunks + c) * DP;
      }
      // the shared keys: every tile once for all rows of all parts
      for (int64_t t0 = a; t0 < shared_end; t0 += W) {
        for (int k = 0; k < nq; ++k) sq[k] = sp[k] + (t0 - a);
        scores_many<FloatScores>(qp.data(), nq, Sh + (t0 / W) * d * W, d, sc, sq.data());
      }
      for (int p = 0; p < parts; ++p) {  // each part's own keys, then its tree
        const Plan& plan = plans[p];
        const int k0 = first[p] * g, kn = int(rows[p]) * g;
        const int nblk = kts[p].size(1);
        const float* Kh = kts[p].data_ptr<float>() + int64_t(kh) * nblk * d * W;
        const float* Vh = vbs[p].data_ptr<float>() + kh * vbs[p].stride(1);
        const int64_t sv_t = vbs[p].stride(2);
        const int64_t own0 = std::max(a, shared), own1 = std::min(a + CHUNK, prefixes[p]);
        for (int64_t t0 = own0; t0 < own1; t0 += W) {
          for (int k = 0; k < kn; ++k) sq[k0 + k] = sp[k0 + k] + (t0 - a);
          scores_many<FloatScores>(qp.data() + k0, kn, Kh + (t0 / W) * d * W, d, sc, sq.data() + k0);
        }
        float* ov = own.data() + int64_t(p) * CHUNK * DP;
        for (int64_t j = own0; j < own1; ++j)
          load_row<float>(Vh + j * sv_t, ov + (j - own0) * DP, d);
        const int64_t tail0 = std::max(a, prefixes[p]);
        const bool tail = plan.nt > 0 && tail0 < std::min(a + CHUNK, plan.longest);
        if (tail) {
          for (int64_t b = plan.tb0; b < plan.tb1; ++b) {
            for (int k = 0; k < kn; ++k)
              sq[k0 + k] = ts.data() + int64_t(k0 + k) * plan.tsw + (b - plan.tb0) * W;
            scores_many<FloatScores>(qp.data() + k0, kn, Kh + b * d * W, d, sc, sq.data() + k0);
          }
          float* t = tv.data() + int64_t(p) * most * DP;
          for (int i = 0; i < plan.nt; ++i)
            load_row<float>(Vh + (prefixes[p] + i) * sv_t, t + i * DP, d);
          const float* tsp = ts.data() + int64_t(k0) * plan.tsw;
          path_scores(plan, tsp, P + int64_t(first[p]) * depth, depth, prefixes[p], a, tail0, kn,
                      g, sp.data() + k0);
        }
        for (int k = 0; k < kn; ++k) {
          const int r = (k0 + k) / g, h = kh * g + (k0 + k) % g;
          const int64_t b = std::min(a + CHUNK, total[r]);
          const int64_t idx = (int64_t(r) * hq + h) * chunks + c;
          if (b <= a) { pm[idx] = -INFINITY; pl[idx] = 0.f; continue; }
          softmax_piece(sp[k0 + k], int(b - a), pm[idx], pl[idx]);
        }
      }
      const int shared_len = int(std::max<int64_t>(shared_end - a, 0));
      pv_many<NV>(sp.data(), nq, vals.data(), shared_len, op.data());
      for (int p = 0; p < parts; ++p) {
        const Plan& plan = plans[p];
        const int k0 = first[p] * g, kn = int(rows[p]) * g;
        const int64_t own0 = std::max(a, shared), own1 = std::min(a + CHUNK, prefixes[p]);
        const int64_t tail0 = std::max(a, prefixes[p]);
        const bool tail = plan.nt > 0 && tail0 < std::min(a + CHUNK, plan.longest);
        const float* ov = own.data() + int64_t(p) * CHUNK * DP;
        const float* t = tv.data() + int64_t(p) * most * DP;
        const int32_t* Pp = P + int64_t(first[p]) * depth;
        for (int k = k0; k < k0 + kn; ++k) {
          const int r = k / g;
          const int64_t b = std::min(a + CHUNK, total[r]);
          float* acc = op[k];
          if (b <= a) { std::memset(acc, 0, 4 * DP); continue; }
          v16 o[NV];
          for (int kk = 0; kk < NV; ++kk) o[kk] = ld(acc + kk * W);
          for (int64_t j = own0; j < std::min(own1, b); ++j) {
            const float* vr = ov + (j - own0) * DP;
            const v16 pr = splat(sp[k][j - a]);
            for (int kk = 0; kk < NV; ++kk) o[kk] = o[kk] + pr * ld(vr + kk * W);
          }
          if (tail && b > tail0)
            for (int64_t j = tail0; j < b; ++j) {
              const float* vr = t + int64_t(Pp[(r - first[p]) * depth + (j - prefixes[p])]) * DP;
              const v16 pr = splat(sp[k][j - a]);
              for (int kk = 0; kk < NV; ++kk) o[kk] = o[kk] + pr * ld(vr + kk * W);
            }
          for (int kk = 0; kk < NV; ++kk) st(acc + kk * W, o[kk]);
        }
      }
    }
  });
  merge(n, hq, d, chunks, total, pm, pl, pa, DP, out);
}


#if defined(__AVX512BF16__) && defined(__AVX512BW__)
// bfloat16 models on CPUs with AVX512-BF16: keys kept as bfloat16 pairs [d/2][W][2] per tile,
// scores by pair dot products (vdpbf16ps: each lane adds its pairs of dims in order), and the
// probabilities rounded to bfloat16 for the values' sums, pairs of keys in logical order (what
// PyTorch's own bfloat16 attention does); half the bytes and half the instructions of the
// float path. Still a function of each row's own keys alone: a pair is always (2m, 2m + 1)
// counted from the chunk's start, whichever buffer its keys come from.
#define SW_PAIRS 1

typedef uint16_t bf;

struct PairScores {  // d here: the pairs per key (the head size / 2)
  typedef uint32_t Q;
  typedef bf K;
  template <int R>
  static void block(const uint32_t* const* qs, const bf* tile, int d2, float sc,
                    float* const* outs) {
    __m512 acc[R];
    for (int k = 0; k < R; ++k) acc[k] = _mm512_setzero_ps();
    for (int i = 0; i < d2; ++i) {
      const __m512bh t = (__m512bh)_mm512_loadu_si512(tile + i * 2 * W);
      for (int k = 0; k < R; ++k)
        acc[k] = _mm512_dpbf16_ps(acc[k], (__m512bh)_mm512_set1_epi32(int(qs[k][i])), t);
    }
    for (int k = 0; k < R; ++k)
      _mm512_storeu_ps(outs[k], _mm512_mul_ps(acc[k], _mm512_set1_ps(sc)));
  }
};

// two value rows (r1 may be null: zeros) -> NV vectors of 16 dims x (row 0, row 1)
template <int NV>
inline void interleave(const bf* r0, const bf* r1, int d, bf* out) {
  alignas(64) static const uint16_t lo[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38,
                                              7, 39, 8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13,
                                              45, 14, 46, 15, 47};
  alignas(64) static const uint16_t hi[32] = {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53,
                                              22, 54, 23, 55, 24, 56, 25, 57, 26, 58, 27, 59,
                                              28, 60, 29, 61, 30, 62, 31, 63};
  const __m512i il = _mm512_load_si512(lo), ih = _mm512_load_si512(hi);
  for (int blk = 0; blk < (NV + 1) / 2; ++blk) {
    const int base = blk * 32, left = d - base;
    const __mmask32 m = left >= 32 ? ~__mmask32(0) : (left > 0 ? (__mmask32(1) << left) - 1 : 0);
    const __m512i a = _mm512_maskz_loadu_epi16(m, r0 + base);
    const __m512i b = r1 ? _mm512_maskz_loadu_epi16(m, r1 + base) : _mm512_setzero_si512();
    _mm512_storeu_si512(out + 2 * base, _mm512_permutex2var_epi16(a, il, b));
    if (2 * blk + 1 < NV) _mm512_storeu_si512(out + 2 * base + 32, _mm512_permutex2var_epi16(a, ih, b));
  }
}

// Two value rows as NV vectors of pairs, straight from the cache into registers (the shared
// keys' values used to be interleaved into a buffer first, on every call: half of a one-row
// pass's attention). Each whole block of 32 dims takes the lane-wise unpacks, whose lanes hold
// the block's dims 0-3, 8-11, 16-19, 24-27, then 4-7, 12-15, 20-23, 28-31; a last half block
// (an odd NV) takes its 16 dims zero-extended, in order. Which lane sums a dim changes nothing
// in its sum (the same pairs in the same key order), and `unshuffle` puts the dims back.
template <int NV>
inline void value_pairs(const bf* r0, const bf* r1, int d, __m512bh* v) {
  for (int blk = 0; blk < NV / 2; ++blk) {
    const int base = blk * 32, left = d - base;
    const __mmask32 m = left >= 32 ? ~__mmask32(0) : (left > 0 ? (__mmask32(1) << left) - 1 : 0);
    const __m512i a = _mm512_maskz_loadu_epi16(m, r0 + base);
    const __m512i b = r1 ? _mm512_maskz_loadu_epi16(m, r1 + base) : _mm512_setzero_si512();
    v[2 * blk] = (__m512bh)_mm512_unpacklo_epi16(a, b);
    v[2 * blk + 1] = (__m512bh)_mm512_unpackhi_epi16(a, b);
  }
  if (NV % 2) {
    const int base = (NV - 1) * 16, left = d - base;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : (left > 0 ? __mmask16((1u << left) - 1) : 0);
    const __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r0 + base));
    const __m512i b = r1 ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, r1 + base))
                         : _mm512_setzero_si512();
    v[NV - 1] = (__m512bh)_mm512_or_si512(a, _mm512_slli_epi32(b, 16));
  }
}

// a query's DP sums from value_pairs' lane order back to the dims' order
template <int NV>
inline void unshuffle(float* acc) {
  const __m512i i0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i i1 = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int blk = 0; blk < NV / 2; ++blk) {
    const __m512 lo = _mm512_loadu_ps(acc + 32 * blk), hi = _mm512_loadu_ps(acc + 32 * blk + 16);
    _mm512_storeu_ps(acc + 32 * blk, _mm512_permutex2var_ps(lo, i0, hi));
    _mm512_storeu_ps(acc + 32 * blk + 16, _mm512_permutex2var_ps(lo, i1, hi));
  }
}

// values of QN queries over `np` key pairs from V (rows sv_t apart) in ascending order, sums in
// value_pairs' lane order
template <int QN, int NV>
inline void direct_pv_block(const uint32_t* const* probs, const bf* V, int64_t sv_t, int d,
                            int np, float* const* outs) {
  __m512 acc[QN][NV];
  for (int x = 0; x < QN; ++x) for (int kk = 0; kk < NV; ++kk) acc[x][kk] = _mm512_setzero_ps();
  for (int j = 0; j < np; ++j) {
    __m512bh v[NV];
    value_pairs<NV>(V + 2 * j * sv_t, V + (2 * j + 1) * sv_t, d, v);
    for (int x = 0; x < QN; ++x) {
      const __m512bh p = (__m512bh)_mm512_set1_epi32(int(probs[x][j]));
      for (int kk = 0; kk < NV; ++kk) acc[x][kk] = _mm512_dpbf16_ps(acc[x][kk], p, v[kk]);
    }
  }
  for (int x = 0; x < QN; ++x)
    for (int kk = 0; kk < NV; ++kk) _mm512_storeu_ps(outs[x] + kk * W, acc[x][kk]);
}

template <int NV>
inline void direct_pv_many(const uint32_t* const* probs, int count, const bf* V, int64_t sv_t,
                           int d, int np, float* const* outs) {
  constexpr int QN = NV >= 16 ? 1 : (NV >= 8 ? 3 : 6);
  for (; count >= QN; count -= QN, probs += QN, outs += QN)
    direct_pv_block<QN, NV>(probs, V, sv_t, d, np, outs);
  for (; count > 0; --count, ++probs, ++outs) direct_pv_block<1, NV>(probs, V, sv_t, d, np, outs);
}

// a row's m_len probabilities (float, zero past m_len up to its tile) -> bf16 pairs
inline void to_pairs(const float* row, int m_len, uint32_t* out) {
  for (int t = 0; t < m_len; t += 2 * W) {
    const __m512 lo = _mm512_loadu_ps(row + t);
    const __m512 hi = t + W < m_len ? _mm512_loadu_ps(row + t + W) : _mm512_setzero_ps();
    _mm512_storeu_si512(out + t / 2, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

constexpr int TR = 16;  // AMX: rows per tile, and key pairs per block (a tile row is 64 bytes)

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && !defined(SW_NO_AMX)
// CPUs with AMX: the same pairs, summed by the tile unit (tdpbf16ps), for scores and values
// alike, a head size of whole 32s. Each row of a tile is computed from its own row of queries
// or probabilities alone, and every logical key pair goes through the same instruction at the
// same place of its block of 16 pairs (32 keys from the chunk's start), whichever rows share
// the call and whichever buffer holds its keys: the shared prefix's whole blocks for all rows
// at once, the rest gathered per row. So a row's sums still do not depend on the call. Every
// call on a machine takes this path (the one-token pass too), decided once: Linux lends the
// tile registers to a process that asks (`amx_granted`), else the pair path above runs.
#define SW_AMX 1
#include <sys/syscall.h>
#include <unistd.h>

bool amx_granted() {
  static const bool granted = [] {
    constexpr long ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
  }();
  return granted;
}

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// every tile 16 rows of 64 bytes: queries or probabilities (0), keys or values (2, 3), sums
// (4-7); configured per thread for the call, released after it
struct Tiles {
  Tiles() {
    TileConfig cfg;
    for (int t = 0; t < 8; ++t) { cfg.colsb[t] = 64; cfg.rows[t] = TR; }
    _tile_loadconfig(&cfg);
  }
  ~Tiles() { _tile_release(); }
};

// scores of nq queries (rows of qa, d bf16 each, whole tiles of rows) against `count` (1-4)
// tiles of 16 keys in the pair layout, `tile_len` apart, into outs[k] + 16 t; four tiles at a
// time keep four sums in flight; d a multiple of 32; scr: 4 x 16 x 16 floats
inline void amx_scores(const bf* qa, int nq, const bf* tile, int64_t tile_len, int count, int d,
                       float sc, float* const* outs, float* scr) {
  for (int q0 = 0; q0 < nq; q0 += TR) {
    _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    for (int s = 0; s < d / 32; ++s) {
      _tile_loadd(0, qa + int64_t(q0) * d + s * 32, d * 2);
      const bf* b = tile + s * TR * 2 * W;
      _tile_loadd(2, b, 64);
      _tile_dpbf16ps(4, 0, 2);
      if (count > 1) { _tile_loadd(3, b + tile_len, 64); _tile_dpbf16ps(5, 0, 3); }
      if (count > 2) { _tile_loadd(2, b + 2 * tile_len, 64); _tile_dpbf16ps(6, 0, 2); }
      if (count > 3) { _tile_loadd(3, b + 3 * tile_len, 64); _tile_dpbf16ps(7, 0, 3); }
    }
    _tile_stored(4, scr, 64);
    if (count > 1) _tile_stored(5, scr + TR * W, 64);
    if (count > 2) _tile_stored(6, scr + 2 * TR * W, 64);
    if (count > 3) _tile_stored(7, scr + 3 * TR * W, 64);
    const int rows = std::min(TR, nq - q0);
    for (int m = 0; m < rows; ++m)
      for (int t = 0; t < count; ++t)
        st(outs[q0 + m] + t * W, ld(scr + (t * TR + m) * W) * splat(sc));
  }
}

// sums c (NV vectors of [16 rows][16 dims], floats; zeros first when `fresh`) += probabilities x values over nblk blocks
// of 16 pairs: probabilities as bf16 pairs, 16 rows `astride` pairs apart from a (block k at
// a + 16k); values interleaved [pair][NV][32] from b (block k at b + k * bstride)
template <int NV>
inline void amx_pv(const uint32_t* a, int astride, const bf* b, int64_t bstride, int nblk,
                   bool fresh, float* c) {
  constexpr int VS = NV * 64;  // bytes from one pair's values to the next
  for (int g0 = 0; g0 < NV; g0 += 4) {
    const int gn = std::min(4, NV - g0);
    float* cg = c + g0 * TR * W;
    if (fresh) {
      _tile_zero(4); _tile_zero(5); _tile_zero(6); _tile_zero(7);
    } else {
      _tile_loadd(4, cg, 64);
      if (gn > 1) _tile_loadd(5, cg + TR * W, 64);
      if (gn > 2) _tile_loadd(6, cg + 2 * TR * W, 64);
      if (gn > 3) _tile_loadd(7, cg + 3 * TR * W, 64);
    }
    for (int k = 0; k < nblk; ++k) {
      _tile_loadd(0, a + k * TR, astride * 4);
      const bf* vb = b + k * bstride + g0 * 32;
      _tile_loadd(2, vb, VS);
      _tile_dpbf16ps(4, 0, 2);
      if (gn > 1) { _tile_loadd(3, vb + 32, VS); _tile_dpbf16ps(5, 0, 3); }
      if (gn > 2) { _tile_loadd(2, vb + 64, VS); _tile_dpbf16ps(6, 0, 2); }
      if (gn > 3) { _tile_loadd(3, vb + 96, VS); _tile_dpbf16ps(7, 0, 3); }
    }
    _tile_stored(4, cg, 64);
    if (gn > 1) _tile_stored(5, cg + TR * W, 64);
    if (gn > 2) _tile_stored(6, cg + 2 * TR * W, 64);
    if (gn > 3) _tile_stored(7, cg + 3 * TR * W, 64);
  }
}
#endif

template <int DP>
void run_pairs(const at::Tensor& q, const at::Tensor& kt, const at::Tensor& vbuf, int64_t prefix,
               const at::Tensor& paths, const at::Tensor& lens, double scale, bool amx,
               at::Tensor& out) {
  constexpr int NV = DP / W;
  const int n = q.size(0), hq = q.size(1), d = q.size(2), d2 = d / 2;
  const int hk = kt.size(0), nblk = kt.size(1), g = hq / hk;
  const int depth = paths.size(1);
  const int64_t sv_h = vbuf.stride(1), sv_t = vbuf.stride(2);
  const int64_t tile_len = int64_t(d2) * W * 2;
  const bf* KT = reinterpret_cast<const bf*>(kt.data_ptr<c10::BFloat16>());
  const bf* V = reinterpret_cast<const bf*>(vbuf.data_ptr<c10::BFloat16>());
  const bf* Q = reinterpret_cast<const bf*>(q.data_ptr<c10::BFloat16>());
  const int32_t* P = paths.data_ptr<int32_t>();
  const int32_t* Ln = lens.data_ptr<int32_t>();
  const Plan plan(prefix, P, Ln, n, depth, nblk);
  const std::vector<int64_t>& total = plan.total;
  const int64_t longest = plan.longest, chunks = plan.chunks, tb0 = plan.tb0, tb1 = plan.tb1;
  const int nt = plan.nt, tsw = plan.tsw;
  Partials& kept = partials(int64_t(n) * hq * chunks, DP);
  std::vector<float>&pm = kept.pm, &pl = kept.pl, &pa = kept.pa;
  std::vector<uint32_t> qw(int64_t(n) * hq * d2);
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < hq; ++h)
      std::memcpy(qw.data() + (int64_t(r) * hq + h) * d2, Q + r * q.stride(0) + h * q.stride(1),
                  sizeof(bf) * d);
  const float sc = float(scale);
  const int nq = n * g;
  // with tiles: each group's queries in rows (padded to whole tiles and one more, so a tile
  // read from any query's row stays inside), and probabilities likewise
  const int rows_pad = amx ? (nq + 15) / 16 * 16 + 16 : nq;
  std::vector<bf> qa(amx ? int64_t(hk) * rows_pad * d : 0, bf(0));
  for (int kh = 0; amx && kh < hk; ++kh)
    for (int k = 0; k < nq; ++k)
      std::memcpy(qa.data() + (int64_t(kh) * rows_pad + k) * d,
                  qw.data() + (int64_t(k / g) * hq + kh * g + k % g) * d2, sizeof(bf) * d);
  at::parallel_for(0, hk * chunks, 1, [&](int64_t begin, int64_t end) {
    // interleaved values: what the tile unit reads (the vector path unpacks in registers)
    std::vector<bf> vals(amx ? CHUNK / 2 * NV * 32 : 0), pair(amx ? CHUNK / 2 * NV * 32 : 0);
    std::vector<float> s(int64_t(nq) * CHUNK + W), ts(int64_t(nq) * std::max(tsw, W));
    std::vector<uint32_t> pb(int64_t(rows_pad) * CHUNK / 2, 0u);
    std::vector<const uint32_t*> qp(nq), pp(nq);
    std::vector<float*> sp(nq), sq(nq), op(nq);
#ifdef SW_AMX
    std::vector<float> scr(std::max(NV, 4) * TR * W, 0.f);
    std::unique_ptr<Tiles> tiles(amx ? new Tiles : nullptr);
#endif
    // scores of every query against `count` consecutive key tiles from `tile`, into sq[k] on
    auto score = [&](int kh, const bf* tile, int count) {
#ifdef SW_AMX
      if (amx) return amx_scores(qa.data() + int64_t(kh) * rows_pad * d, nq, tile, tile_len,
                                 count, d, sc, sq.data(), scr.data());
#endif
      for (int t = 0; t < count; ++t, tile += tile_len) {
        scores_many<PairScores>(qp.data(), nq, tile, d2, sc, sq.data());
        for (int k = 0; k < nq; ++k) sq[k] += W;
      }
    };
    for (int64_t task = begin; task < end; ++task) {
      const int kh = task / chunks;
      const int64_t c = task % chunks, a = c * CHUNK;
      const bf* Kh = KT + int64_t(kh) * nblk * tile_len;
      const bf* Vh = V + kh * sv_h;
      const int64_t shared_end = std::min(a + CHUNK, prefix);
      int shared_pairs = int(std::max<int64_t>(shared_end - a, 0) / 2);
      if (amx) shared_pairs = shared_pairs / TR * TR;  // whole blocks only (the rest per row)
      for (int i = 0; amx && i < shared_pairs; ++i)  // the tile unit reads them from a buffer
        interleave<NV>(Vh + (a + 2 * i) * sv_t, Vh + (a + 2 * i + 1) * sv_t, d,
                       vals.data() + int64_t(i) * NV * 32);
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        qp[k] = qw.data() + (int64_t(r) * hq + h) * d2;
        sp[k] = s.data() + int64_t(k) * CHUNK;
        pp[k] = pb.data() + int64_t(k) * CHUNK / 2;
      }
      for (int64_t t0 = a; t0 < shared_end; t0 += 4 * W) {
        for (int k = 0; k < nq; ++k) sq[k] = sp[k] + (t0 - a);
        score(kh, Kh + (t0 / W) * tile_len, int(std::min<int64_t>(4, (shared_end - t0 + W - 1) / W)));
      }
      const int64_t tail0 = std::max(a, prefix);
      const bool tail = nt > 0 && tail0 < std::min(a + CHUNK, longest);
      if (tail) {
        for (int64_t b = tb0; b < tb1; b += 4) {
          for (int k = 0; k < nq; ++k) sq[k] = ts.data() + int64_t(k) * tsw + (b - tb0) * W;
          score(kh, Kh + b * tile_len, int(std::min<int64_t>(4, tb1 - b)));
        }
        path_scores(plan, ts.data(), P, depth, prefix, a, tail0, nq, g, sp.data());
      }
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        const int64_t b = std::min(a + CHUNK, total[r]);
        const int64_t idx = (int64_t(r) * hq + h) * chunks + c;
        if (b <= a) { pm[idx] = -INFINITY; pl[idx] = 0.f; continue; }
        softmax_piece(sp[k], int(b - a), pm[idx], pl[idx]);
        to_pairs(sp[k], int(b - a), pb.data() + int64_t(k) * CHUNK / 2);
      }
      for (int k = 0; k < nq; ++k) {
        const int r = k / g, h = kh * g + k % g;
        op[k] = pa.data() + ((int64_t(r) * hq + h) * chunks + c) * DP;
      }
#ifdef SW_AMX
      if (amx) {  // the shared whole blocks, sixteen queries a tile
        for (int q0 = 0; q0 < nq; q0 += TR) {
          amx_pv<NV>(pb.data() + int64_t(q0) * CHUNK / 2, CHUNK / 2, vals.data(), TR * NV * 32,
                     shared_pairs / TR, true, scr.data());
          for (int m = 0; m < std::min(TR, nq - q0); ++m)
            for (int kk = 0; kk < NV; ++kk)
              st(op[q0 + m] + kk * W, ld(scr.data() + (kk * TR + m) * W));
        }
      } else
#endif
        direct_pv_many<NV>(pp.data(), nq, Vh + a * sv_t, sv_t, d, shared_pairs, op.data());
      // each query's keys past the shared pairs (its own path, and shared keys that pair or
      // share a block with the path's), pair by pair in logical order
      for (int k = 0; k < nq; ++k) {
        const int r = k / g;
        const int64_t b = std::min(a + CHUNK, total[r]);
        float* acc = op[k];
        if (b <= a) { std::memset(acc, 0, 4 * DP); continue; }
        const int64_t j0 = a + 2 * shared_pairs;
        if (j0 >= b) continue;
        auto key = [&](int64_t j) -> const bf* {
          if (j >= b) return nullptr;
          return Vh + (j < prefix ? j : prefix + P[r * depth + (j - prefix)]) * sv_t;
        };
#ifdef SW_AMX
        if (amx) {  // the row's blocks from j0 on, gathered, zeros past its last key
          const int blocks = int((b - j0 + 2 * TR - 1) / (2 * TR));
          for (int i = 0; i < blocks * TR; ++i) {
            bf* dst = pair.data() + int64_t(i) * NV * 32;
            if (j0 + 2 * i < b) interleave<NV>(key(j0 + 2 * i), key(j0 + 2 * i + 1), d, dst);
            else std::memset(dst, 0, sizeof(bf) * NV * 32);
          }
          for (int kk = 0; kk < NV; ++kk) st(scr.data() + kk * TR * W, ld(acc + kk * W));
          amx_pv<NV>(pp[k] + shared_pairs, CHUNK / 2, pair.data(), TR * NV * 32, blocks, false,
                     scr.data());
          for (int kk = 0; kk < NV; ++kk) st(acc + kk * W, ld(scr.data() + kk * TR * W));
          continue;
        }
#endif
        __m512 o[NV];
        for (int kk = 0; kk < NV; ++kk) o[kk] = _mm512_loadu_ps(acc + kk * W);
        for (int64_t j = j0; j < b; j += 2) {
          __m512bh v[NV];
          value_pairs<NV>(key(j), key(j + 1), d, v);
          const __m512bh p = (__m512bh)_mm512_set1_epi32(int(pp[k][(j - a) / 2]));
          for (int kk = 0; kk < NV; ++kk) o[kk] = _mm512_dpbf16_ps(o[kk], p, v[kk]);
        }
        for (int kk = 0; kk < NV; ++kk) _mm512_storeu_ps(acc + kk * W, o[kk]);
      }
      for (int k = 0; !amx && k < nq; ++k) unshuffle<NV>(op[k]);
    }
  });
  merge(n, hq, d, chunks, total, pm, pl, pa, DP, out);
}
#endif

}  // namespace

bool tiles() {  // whether bfloat16 pairs are summed by AMX tiles here (a head size of 32s)
#ifdef SW_AMX
  return amx_granted();
#else
  return false;
#endif
}

bool pair_keys() {  // whether this build reads bfloat16 key pairs (`tree_attention` below)
#ifdef SW_PAIRS
  return true;
#else
  return false;
#endif
}

// kt: float key tiles [hk, blocks, d, W], or with a bfloat16 model on a pair build, bfloat16
// key pairs [hk, blocks, d / 2, W, 2] (native.key_tiles says which)
at::Tensor tree_attention(at::Tensor q, at::Tensor kt, at::Tensor vbuf, int64_t prefix,
                          at::Tensor paths, at::Tensor lens, double scale) {
  const bool pairs = kt.scalar_type() == at::kBFloat16;
  TORCH_CHECK(q.dim() == 3 && kt.dim() == (pairs ? 5 : 4) && vbuf.dim() == 4, "bad ranks");
  TORCH_CHECK(kt.is_contiguous() && kt.size(3) == W, "kt layout");
  TORCH_CHECK(pairs || kt.scalar_type() == at::kFloat, "key tiles are float or bfloat16 pairs");
  TORCH_CHECK(!pairs || (pair_keys() && q.scalar_type() == at::kBFloat16 && kt.size(4) == 2),
              "bfloat16 key pairs need a pair build and a bfloat16 model");
  TORCH_CHECK(q.stride(2) == 1 && vbuf.stride(3) == 1, "last dim strided");
  TORCH_CHECK(paths.scalar_type() == at::kInt && lens.scalar_type() == at::kInt, "int32 paths");
  TORCH_CHECK(kt.size(0) == vbuf.size(1) && q.size(1) % kt.size(0) == 0, "heads do not group");
  TORCH_CHECK(kt.size(2) * (pairs ? 2 : 1) == q.size(2) && vbuf.size(3) == q.size(2),
              "head dims differ");
  TORCH_CHECK(paths.size(0) == q.size(0) && lens.size(0) == q.size(0), "one path per row");
  TORCH_CHECK(q.scalar_type() == vbuf.scalar_type(), "queries and values differ in dtype");
  TORCH_CHECK(q.device().is_cpu() && kt.device().is_cpu() && vbuf.device().is_cpu(), "CPU only");
  paths = paths.contiguous(); lens = lens.contiguous();
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  const int64_t d = q.size(2);
  TORCH_CHECK(d >= 1 && d <= 256, "head size above 256");
#ifdef SW_PAIRS
  if (pairs) {
    const bool amx = d % 32 == 0 && tiles();
    if (d <= 16) run_pairs<16>(q, kt, vbuf, prefix, paths, lens, scale, false, out);
    else if (d <= 64) run_pairs<64>(q, kt, vbuf, prefix, paths, lens, scale, amx, out);
    else if (d <= 128) run_pairs<128>(q, kt, vbuf, prefix, paths, lens, scale, amx, out);
    else run_pairs<256>(q, kt, vbuf, prefix, paths, lens, scale, amx, out);
    return out;
  }
#endif
#define SW_RUN(T)                                                           \
  (d <= 16    ? run<T, 16>(q, kt, vbuf, prefix, paths, lens, scale, out)  \
   : d <= 64  ? run<T, 64>(q, kt, vbuf, prefix, paths, lens, scale, out)  \
   : d <= 128 ? run<T, 128>(q, kt, vbuf, prefix, paths, lens, scale, out) \
              : run<T, 256>(q, kt, vbuf, prefix, paths, lens, scale, out))
  if (q.scalar_type() == at::kFloat) SW_RUN(float);
  else if (q.scalar_type() == at::kBFloat16) SW_RUN(c10::BFloat16);
  else if (q.scalar_type() == at::kHalf) SW_RUN(c10::Half);
  else TORCH_CHECK(false, "unsupported dtype");
  return out;
}

// float32 models (and stored blocks): rows of several parts, the first `shared` keys read from
// the first part's buffers (`run_forest`)
at::Tensor forest_attention(at::Tensor q, at::Tensor skt, at::Tensor svb, int64_t shared,
                            std::vector<at::Tensor> kts, std::vector<at::Tensor> vbs,
                            std::vector<int64_t> prefixes, std::vector<int64_t> rows,
                            at::Tensor paths, at::Tensor lens, double scale) {
  TORCH_CHECK(q.dim() == 3 && q.scalar_type() == at::kFloat && q.stride(2) == 1, "float queries");
  TORCH_CHECK(kts.size() == vbs.size() && kts.size() == prefixes.size() &&
              kts.size() == rows.size() && !kts.empty(), "one buffer pair per part");
  TORCH_CHECK(shared % W == 0 && shared >= 0, "the shared keys are whole tiles");
  int64_t all = 0;
  for (size_t p = 0; p < kts.size(); ++p) {
    TORCH_CHECK(kts[p].scalar_type() == at::kFloat && kts[p].dim() == 4 && kts[p].is_contiguous()
                && kts[p].size(3) == W && kts[p].size(0) == skt.size(0), "part key tiles");
    TORCH_CHECK(vbs[p].scalar_type() == at::kFloat && vbs[p].dim() == 4 && vbs[p].stride(3) == 1
                && vbs[p].size(3) == q.size(2), "part values");
    TORCH_CHECK(prefixes[p] >= shared, "a part's prefix holds the shared keys");
    all += rows[p];
  }
  TORCH_CHECK(skt.scalar_type() == at::kFloat && skt.is_contiguous() && skt.dim() == 4 &&
              skt.size(2) == q.size(2) && q.size(1) % skt.size(0) == 0, "shared key tiles");
  TORCH_CHECK((shared + W - 1) / W <= skt.size(1) && shared <= svb.size(2), "shared keys past buffer");
  TORCH_CHECK(svb.scalar_type() == at::kFloat && svb.stride(3) == 1, "shared values");
  TORCH_CHECK(all == q.size(0) && paths.size(0) == all && lens.size(0) == all, "one path per row");
  TORCH_CHECK(paths.scalar_type() == at::kInt && lens.scalar_type() == at::kInt, "int32 paths");
  paths = paths.contiguous(); lens = lens.contiguous();
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2)}, q.options());
  const int64_t d = q.size(2);
  TORCH_CHECK(d >= 1 && d <= 256, "head size above 256");
  if (d <= 16) run_forest<16>(q, skt, svb, shared, kts, vbs, prefixes, rows, paths, lens, scale, out);
  else if (d <= 64) run_forest<64>(q, skt, svb, shared, kts, vbs, prefixes, rows, paths, lens, scale, out);
  else if (d <= 128) run_forest<128>(q, skt, svb, shared, kts, vbs, prefixes, rows, paths, lens, scale, out);
  else run_forest<256>(q, skt, svb, shared, kts, vbs, prefixes, rows, paths, lens, scale, out);
  return out;
}

// a pass's n rows of float32 keys and values [n, hk, d] written from slot `start` of a float32
// cache [1, hk, capacity, d] and into its key tiles [hk, blocks, d, W]: what
// kvcache.GrowingLayer.append writes (the caller has checked the room)
void append_f32(const at::Tensor& kb, const at::Tensor& vb, const at::Tensor& kt, int64_t start,
                const at::Tensor& k, const at::Tensor& v) {
  const int64_t n = k.size(0), hk = k.size(1), d = k.size(2);
  TORCH_CHECK(k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat && k.dim() == 3 &&
              k.sizes() == v.sizes(), "float32 rows [n, heads, dim]");
  TORCH_CHECK(kb.scalar_type() == at::kFloat && vb.scalar_type() == at::kFloat &&
              kt.scalar_type() == at::kFloat && kb.dim() == 4 && vb.dim() == 4 &&
              kt.dim() == 4 && kt.is_contiguous() && kt.size(3) == W && kb.size(1) == hk &&
              vb.size(1) == hk && kt.size(0) == hk && kb.size(3) == d && vb.size(3) == d &&
              kt.size(2) == d && start >= 0 && start + n <= kb.size(2) &&
              start + n <= vb.size(2) && (start + n - 1) / W < kt.size(1),
              "float32 buffers and key tiles with room for the rows");
  float* KB = kb.data_ptr<float>(); float* VB = vb.data_ptr<float>();
  float* KT = kt.data_ptr<float>();
  const float* K = k.data_ptr<float>(); const float* V = v.data_ptr<float>();
  const int64_t blocks = kt.size(1);
  for (int64_t r = 0; r < n; ++r) {
    const int64_t slot = start + r;
    for (int64_t h = 0; h < hk; ++h) {
      const float* kr = K + r * k.stride(0) + h * k.stride(1);
      const float* vr = V + r * v.stride(0) + h * v.stride(1);
      float* kd = KB + h * kb.stride(1) + slot * kb.stride(2);
      float* vd = VB + h * vb.stride(1) + slot * vb.stride(2);
      float* td = KT + ((h * blocks + slot / W) * d) * W + slot % W;
      for (int64_t i = 0; i < d; ++i) {
        kd[i * kb.stride(3)] = kr[i * k.stride(2)];
        vd[i * vb.stride(3)] = vr[i * v.stride(2)];
        td[i * W] = kr[i * k.stride(2)];
      }
    }
  }
}

// one new row per part: its key and value [hk, d] (row p of k, v) written at `slots[p]` of the
// part's float buffers [1, hk, capacity, d] and into its key tiles [hk, blocks, d, W], as
// kvcache.GrowingLayer.append writes them (the caller has checked the room)
void append_rows(std::vector<at::Tensor> kbufs, std::vector<at::Tensor> vbufs,
                 std::vector<at::Tensor> kts, std::vector<int64_t> slots, at::Tensor k,
                 at::Tensor v) {
  TORCH_CHECK(k.dim() == 3 && k.size(0) == int64_t(kts.size()) && kbufs.size() == kts.size() &&
              vbufs.size() == kts.size() && slots.size() == kts.size(), "one float row per part");
  for (size_t p = 0; p < kts.size(); ++p)
    append_f32(kbufs[p], vbufs[p], kts[p], slots[p], k.narrow(0, int64_t(p), 1),
               v.narrow(0, int64_t(p), 1));
}

// a pass's n rows of float32 keys and values [n, hk, d] written from slot `start` of a bfloat16
// cache [1, hk, capacity, d] and into its key pair tiles [hk, blocks, d / 2, W, 2] (None: none
// yet), rounded as PyTorch rounds float32 to bfloat16 (to nearest, ties to even): what
// kvcache.GrowingLayer.append writes, in one call instead of a cast and three copies per row
// (a model on stored blocks with float32 activations; the caller has checked the room)
void append_bf16(at::Tensor kb, at::Tensor vb, const c10::optional<at::Tensor>& kt_or_none,
                 int64_t start, at::Tensor k, at::Tensor v) {
  TORCH_CHECK(k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat && k.dim() == 3 &&
              v.dim() == 3 && k.sizes() == v.sizes(), "float32 rows [n, heads, dim]");
  const int64_t n = k.size(0), hk = k.size(1), d = k.size(2);
  TORCH_CHECK(kb.scalar_type() == at::kBFloat16 && vb.scalar_type() == at::kBFloat16 &&
              kb.dim() == 4 && vb.dim() == 4 && kb.size(1) == hk && vb.size(1) == hk &&
              kb.size(3) == d && vb.size(3) == d && start >= 0 && start + n <= kb.size(2) &&
              start + n <= vb.size(2), "bfloat16 buffers with room for the rows");
  const bool tiles = kt_or_none.has_value() && kt_or_none->defined();
  const at::Tensor kt = tiles ? *kt_or_none : at::Tensor();
  if (tiles)
    TORCH_CHECK(kt.scalar_type() == at::kBFloat16 && kt.dim() == 5 && kt.is_contiguous() &&
                kt.size(0) == hk && kt.size(2) == d / 2 && kt.size(3) == W && kt.size(4) == 2 &&
                (start + n - 1) / W < kt.size(1) && d % 2 == 0, "bfloat16 key pair tiles");
  c10::BFloat16* KB = kb.data_ptr<c10::BFloat16>();
  c10::BFloat16* VB = vb.data_ptr<c10::BFloat16>();
  c10::BFloat16* KT = tiles ? kt.data_ptr<c10::BFloat16>() : nullptr;
  const float* K = k.data_ptr<float>();
  const float* V = v.data_ptr<float>();
  const int64_t blocks = tiles ? kt.size(1) : 0;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t slot = start + r;
    for (int64_t h = 0; h < hk; ++h) {
      const float* kr = K + r * k.stride(0) + h * k.stride(1);
      const float* vr = V + r * v.stride(0) + h * v.stride(1);
      c10::BFloat16* kd = KB + h * kb.stride(1) + slot * kb.stride(2);
      c10::BFloat16* vd = VB + h * vb.stride(1) + slot * vb.stride(2);
      for (int64_t i = 0; i < d; ++i) {
        const c10::BFloat16 key(kr[i * k.stride(2)]);
        kd[i * kb.stride(3)] = key;
        vd[i * vb.stride(3)] = c10::BFloat16(vr[i * v.stride(2)]);
        if (tiles) KT[(((h * blocks + slot / W) * (d / 2) + i / 2) * W + slot % W) * 2 + i % 2] = key;
      }
    }
  }
}

// One layer of a model on stored blocks over its cache: the pass's float32 keys and values
// [n, hk, d] written from slot `start`, then tree_attention over the queries [n, hq, d]. A
// bfloat16 cache (bfloat16 key pair tiles) takes append_bf16 and the queries rounded to
// bfloat16 as PyTorch rounds them, what leanpass's `_attend_bf16` calls; a float32 one the
// float copies that kvcache.GrowingLayer.append makes, then `_attend`'s call.
// quant_linear.cpp's layer stack reaches it through `attend_entry` (a capsule), so a whole
// pass's layers run in one call from Python; both extensions are built by this package with
// the same compiler and PyTorch, and the capsule's name carries the signature's version.
at::Tensor attend_layer(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor& kb, const at::Tensor& vb, const at::Tensor& kt,
                        int64_t start, int64_t prefix, const at::Tensor& paths,
                        const at::Tensor& lens, double scale) {
  if (kt.scalar_type() == at::kBFloat16) {
    append_bf16(kb, vb, kt, start, k, v);
    return tree_attention(q.to(at::kBFloat16), kt, vb, prefix, paths, lens, scale);
  }
  append_f32(kb, vb, kt, start, k, v);
  return tree_attention(q, kt, vb, prefix, paths, lens, scale);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("attend_entry", [] {
    return pybind11::capsule(reinterpret_cast<void*>(&attend_layer),
                             "swiftwriter.attend_layer.v1");
  });
  m.def("tree_attention", &tree_attention);
  m.def("append_bf16", &append_bf16);
  m.def("forest_attention", &forest_attention);
  m.def("append_rows", &append_rows);
  m.def("pair_keys", &pair_keys);
  m.def("tiles", &tiles);
}
