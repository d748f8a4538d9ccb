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

}  // namespace

Status cholesky_lower(std::vector<double>& a, int64_t n) {
  // Column by column: the pivot from row j, then every row below it in parallel. Row i's first j
  // entries are already L's, so each entry is one contiguous dot product.
  for (int64_t j = 0; j < n; ++j) {
    double* rj = a.data() + j * n;
    const double pivot = rj[j] - dot(rj, rj, j);
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
            ri[j] = (ri[j] - dot(ri, rj, j)) / d;
          }
        },
        std::max<int64_t>(1, 16384 / std::max<int64_t>(j, 1)));
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
  ThreadPool::global().parallel_for(
      n,
      [&](int64_t b, int64_t e) {
        std::vector<double> y(static_cast<size_t>(n));
        for (int64_t j = b; j < e; ++j) {
          std::fill(y.begin(), y.end(), 0.0);
          for (int64_t i = j; i < n; ++i) {
            const double* li = l.data() + i * n;
            const double rhs = (i == j ? 1.0 : 0.0) - dot(li + j, y.data() + j, i - j);
            y[static_cast<size_t>(i)] = rhs / li[i];
          }
          double* x = out.data() + j * n;
          for (int64_t i = n - 1; i >= 0; --i) {
            const double* ui = u.data() + i * n;
            x[i] = (y[static_cast<size_t>(i)] - dot(ui + i + 1, x + i + 1, n - i - 1)) / ui[i];
          }
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
  LATHE_RETURN_IF_ERROR(cholesky_lower(h, n));
  h = cholesky_inverse(h, n);
  return cholesky_upper(h, n);
}

}  // namespace lathe
