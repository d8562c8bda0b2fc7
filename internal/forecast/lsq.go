package forecast

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// ErrSingular reports a design matrix without full column rank: a constant
// series, or one too short for the order asked.
var ErrSingular = errors.New("forecast: regressors are linearly dependent (constant or too short a series)")

// lsq solves least-squares problems by Householder QR of the design matrix
// augmented with the response, [X | y]. The triangular factor's last column
// holds Qᵀy, so the residual sum of squares of the first j regressors is the
// sum of squares of its entries j..k: one factorization answers every nested
// model. Buffers are kept between calls.
type lsq struct {
	a    []float64 // n × (k+1), row-major: regressors, then the response
	tau  []float64
	work []float64
	beta []float64
	n, k int
}

// reset sizes the problem for n observations of k regressors and returns
// the row-major buffer to fill, k+1 values per row (the last one the
// response).
func (w *lsq) reset(n, k int) []float64 {
	w.n, w.k = n, k
	size := n * (k + 1)
	if cap(w.a) < size {
		w.a = make([]float64, size)
	}
	w.a = w.a[:size]
	if cap(w.tau) < k+1 {
		w.tau = make([]float64, k+1)
	}
	w.tau = w.tau[:k+1]
	return w.a
}

// factor computes the QR factorization in place.
func (w *lsq) factor() {
	g := blas64.General{Rows: w.n, Cols: w.k + 1, Stride: w.k + 1, Data: w.a}
	if len(w.work) < 1 {
		w.work = make([]float64, 1)
	}
	lapack64.Geqrf(g, w.tau, w.work, -1)
	if need := int(w.work[0]); len(w.work) < need {
		w.work = make([]float64, need)
	}
	lapack64.Geqrf(g, w.tau, w.work, len(w.work))
}

// r is the (i, j) entry of the triangular factor.
func (w *lsq) r(i, j int) float64 { return w.a[i*(w.k+1)+j] }

// ssr is the residual sum of squares of the regression on the first j
// columns.
func (w *lsq) ssr(j int) float64 {
	s := 0.0
	for i := j; i <= w.k && i < w.n; i++ {
		v := w.r(i, w.k)
		s += v * v
	}
	return s
}

// solve returns the coefficients of the regression on the first j columns
// (valid until the next call), or ErrSingular when those columns are not of
// full rank.
func (w *lsq) solve(j int) ([]float64, error) {
	if cap(w.beta) < j {
		w.beta = make([]float64, j)
	}
	w.beta = w.beta[:j]
	if j == 0 {
		return w.beta, nil
	}
	if w.n < j {
		return nil, ErrSingular
	}
	big := 0.0
	for i := range j {
		big = max(big, math.Abs(w.r(i, i)))
	}
	for i := range j {
		if d := math.Abs(w.r(i, i)); d == 0 || d < 1e-12*big {
			return nil, ErrSingular
		}
		w.beta[i] = w.r(i, w.k)
	}
	t := blas64.Triangular{Uplo: blas.Upper, Diag: blas.NonUnit, N: j, Stride: w.k + 1, Data: w.a}
	blas64.Trsv(blas.NoTrans, t, blas64.Vector{N: j, Inc: 1, Data: w.beta})
	return w.beta, nil
}

// fullRank is the largest j ≤ k for which the first j regressors are
// linearly independent (by the triangular factor's diagonal).
func (w *lsq) fullRank() int {
	big := 0.0
	for i := 0; i < w.k && i < w.n; i++ {
		big = max(big, math.Abs(w.r(i, i)))
	}
	for i := 0; i < w.k && i < w.n; i++ {
		if d := math.Abs(w.r(i, i)); d == 0 || d < 1e-12*big {
			return i
		}
	}
	return min(w.k, w.n)
}
