// Dense symmetric positive-definite linear algebra in double precision for GPTQ: the Cholesky
// factorization, the inverse from it, and the upper factor of the inverse (torch.linalg.cholesky,
// torch.cholesky_inverse, torch.linalg.cholesky(..., upper=True)). Matrices are n x n, row-major.
// O(n^3) work, rows in parallel on ThreadPool::global().
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/status.h"

namespace lathe {

// In place: a = L with a = L L^T, L lower triangular (the strict upper triangle is zeroed).
// kInvalidArgument naming the first pivot that is not positive (the matrix is not positive
// definite, numerically) — a's contents are unspecified then.
Status cholesky_lower(std::vector<double>& a, int64_t n);

// A^-1 from the lower Cholesky factor of A: (L L^T)^-1 = L^-T L^-1. Returns the full symmetric
// inverse.
std::vector<double> cholesky_inverse(const std::vector<double>& l, int64_t n);

// In place: a = U with a = U^T U, U upper triangular (the strict lower triangle is zeroed).
Status cholesky_upper(std::vector<double>& a, int64_t n);

// The upper Cholesky factor of H^-1, GPTQ's "Hinv": chol(H), its inverse, chol(., upper). H is
// consumed. Errors as cholesky_lower.
Status inverse_upper_cholesky(std::vector<double>& h, int64_t n);

}  // namespace lathe
