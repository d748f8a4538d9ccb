#include "engine/quant/cholesky.h"

#include <algorithm>
#include <cmath>

#include "engine/core/strings.h"
#include "engine/core/thread_pool.h"

namespace lathe {
namespace {

// Four interleaved partial sums (k mod 4), added pairwise at the end: independent chains the CPU
// overlaps (a single chain waits for each addition), in a fixed order.
inline double dot(const double* a, const double* b, int64_t n) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k] * b[k];
    s1 += a[k + 1] * b[k + 1];
    s2 += a[k + 2] * b[k + 2];
    s3 += a[k + 3] * b[k + 3];
  }
  for (; k < n; ++k) s0 += a[k] * b[k];
  return (s0 + s1) + (s2 + s3);
}

void transpose_in_place(std::vector<double>& a, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) std::swap(a[i * n + j], a[j * n + i]);
}

// Columns solved together by the triangular solves (each row of the factor is read once for all).
constexpr int64_t kCols = 16;

// Columns c0 .. c0+nc-1 of L^-1 for L [n, n] lower triangular: forward substitution of
// L y = e_j, into y [n, kCols] (row i, column j - c0; rows above c0 are zero).
void forward_solve_identity(const double* l, int64_t n, int64_t c0, int64_t nc, double* y) {
  double acc[kCols];
  std::fill(y, y + n * kCols, 0.0);
  for (int64_t i = c0; i < n; ++i) {
    const double* li = l + i * n;
    for (int64_t c = 0; c < nc; ++c) acc[c] = i == c0 + c ? 1.0 : 0.0;
    for (int64_t t = c0; t < i; ++t) {
      const double lt = li[t];
      const double* yt = y + t * kCols;
      for (int64_t c = 0; c < nc; ++c) acc[c] -= lt * yt[c];
    }
    for (int64_t c = 0; c < nc; ++c) y[i * kCols + c] = acc[c] / li[i];
  }
}

}  // namespace

Status cholesky_lower(std::vector<double>& a, int64_t n) {
  // Left-looking in blocks of kBlock columns, so the rows of the finished columns are streamed
  // once per block rather than once per column: first every row's block entries take the finished
  // columns [0, j0) (dots of rows i and j), then the block is factorized column by column with dots
  // over [j0, j). Row i's first j entries are already L's, so each dot is contiguous.
  constexpr int64_t kBlock = 64;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t j1 = std::min(n, j0 + kBlock);
    if (j0 > 0)
      ThreadPool::global().parallel_for(
          n - j0,
          [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
              const int64_t i = j0 + t;
              double* ri = a.data() + i * n;
              for (int64_t j = j0; j < std::min(j1, i + 1); ++j)
                ri[j] -= dot(ri, a.data() + j * n, j0);
            }
          },
          std::max<int64_t>(1, 4096 / std::max<int64_t>(j0, 1)));
    for (int64_t j = j0; j < j1; ++j) {
      double* rj = a.data() + j * n;
      const double pivot = rj[j] - dot(rj + j0, rj + j0, j - j0);
      if (!(pivot > 0.0) || !std::isfinite(pivot))
        return invalid_argument(
            strformat("the matrix is not positive definite (pivot %lld of %lld is %g)",
                      static_cast<long long>(j), static_cast<long long>(n), pivot));
      const double d = std::sqrt(pivot);
      rj[j] = d;
      ThreadPool::global().parallel_for(
          n - j - 1,
          [&](int64_t b, int64_t e) {
            for (int64_t t = b; t < e; ++t) {
              double* ri = a.data() + (j + 1 + t) * n;
              ri[j] = (ri[j] - dot(ri + j0, rj + j0, j - j0)) / d;
            }
          },
          std::max<int64_t>(1, 16384 / std::max<int64_t>(j - j0, 1)));
    }
  }
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = i + 1; k < n; ++k) a[i * n + k] = 0.0;
  return Status();
}

std::vector<double> cholesky_inverse(const std::vector<double>& l, int64_t n) {
  std::vector<double> u(l);  // L^T, so the backward pass reads rows
  transpose_in_place(u, n);
  std::vector<double> out(static_cast<size_t>(n * n), 0.0);
  // Column j of A^-1 solves L y = e_j, then L^T x = y; A^-1 is symmetric, so x is row j too.
  // kCols columns at a time: each row of L and L^T is read once for all of them. Per column the
  // sums run in ascending (forward) and descending (backward) index order.
  const int64_t num_tasks = (n + kCols - 1) / kCols;
  ThreadPool::global().parallel_for(
      num_tasks,
      [&](int64_t b, int64_t e) {
        std::vector<double> y(static_cast<size_t>(n * kCols)), x(y.size());
        double acc[kCols];
        for (int64_t task = b; task < e; ++task) {
          const int64_t c0 = task * kCols, nc = std::min(kCols, n - c0);
          forward_solve_identity(l.data(), n, c0, nc, y.data());
          for (int64_t i = n - 1; i >= 0; --i) {
            const double* ui = u.data() + i * n;
            for (int64_t c = 0; c < nc; ++c) acc[c] = y[static_cast<size_t>(i * kCols + c)];
            for (int64_t t = i + 1; t < n; ++t) {
              const double ut = ui[t];
              const double* xt = x.data() + t * kCols;
              for (int64_t c = 0; c < nc; ++c) acc[c] -= ut * xt[c];
            }
            for (int64_t c = 0; c < nc; ++c) x[static_cast<size_t>(i * kCols + c)] = acc[c] / ui[i];
          }
          for (int64_t c = 0; c < nc; ++c)
            for (int64_t i = 0; i < n; ++i)
              out[static_cast<size_t>((c0 + c) * n + i)] = x[static_cast<size_t>(i * kCols + c)];
        }
      },
      1);
  return out;
}

Status cholesky_upper(std::vector<double>& a, int64_t n) {
  LATHE_RETURN_IF_ERROR(cholesky_lower(a, n));
  transpose_in_place(a, n);
  return Status();
}

Status inverse_upper_cholesky(std::vector<double>& h, int64_t n) {
  // With J the exchange matrix (index i -> n-1-i): J H J = M M^T (M lower), so H = R R^T with R =
  // J M J upper, H^-1 = R^-T R^-1, and U = R^-1 = J M^-1 J is the upper factor of H^-1 (positive
  // diagonal). One factorization and one triangular inverse instead of a factorization, an
  // inverse and a second factorization.
  std::vector<double> m(h.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j)
      m[static_cast<size_t>(i * n + j)] = h[static_cast<size_t>((n - 1 - i) * n + (n - 1 - j))];
  LATHE_RETURN_IF_ERROR(cholesky_lower(m, n));
  // M^-1 column by column (forward substitution, kCols columns per pass over M's rows); column
  // j of M^-1 lands in U's row n-1-j, reversed.
  std::fill(h.begin(), h.end(), 0.0);
  const int64_t num_tasks = (n + kCols - 1) / kCols;
  ThreadPool::global().parallel_for(
      num_tasks,
      [&](int64_t b, int64_t e) {
        std::vector<double> y(static_cast<size_t>(n * kCols));
        for (int64_t task = b; task < e; ++task) {
          const int64_t c0 = task * kCols, nc = std::min(kCols, n - c0);
          forward_solve_identity(m.data(), n, c0, nc, y.data());
          // Minv[i][j] for j = c0 + c goes to U[n-1-i][n-1-j].
          for (int64_t c = 0; c < nc; ++c)
            for (int64_t i = c0 + c; i < n; ++i)
              h[static_cast<size_t>((n - 1 - i) * n + (n - 1 - (c0 + c)))] =
                  y[static_cast<size_t>(i * kCols + c)];
        }
      },
      1);
  return Status();
}

}  // namespace lathe
