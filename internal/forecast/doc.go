// Package forecast predicts a consumer's demand from its recent history: the
// models P0 §8 provisions ahead with, and the baselines they are judged
// against.
//
//   - AR(p) fitted by ordinary least squares with a constant, the order chosen
//     by AIC among 0..MaxLag on a common sample and the chosen order refitted
//     on the whole window (statsmodels' ar_select_order followed by AutoReg).
//   - ARMA(p,q) by the Hannan–Rissanen procedure: a long autoregression by
//     Yule–Walker for residuals, least squares on lagged values and lagged
//     residuals, and the bias-correction step when the second step's model is
//     stationary and invertible (statsmodels' hannan_rissanen, demeaned).
//   - EWMA (simple exponential smoothing, a flat forecast) and seasonal-naive
//     (the value one period ago) as baselines.
//
// Every model gives point forecasts and forecast-error variances for the
// steps ahead (ψ-weights for AR and ARMA, the ETS(A,N,N) formula for EWMA),
// and PeakOf turns them into the forecast of the peak over a prediction
// window with an upper quantile: provisioning for a window needs its peak,
// not its next value. The quantile's multiplier comes from the model's own
// one-step residuals (their empirical quantile once there are enough of
// them, the normal quantile before), so a workload whose surprises are
// one-sided and heavy gets a wider margin than a Gaussian one.
//
// Linear algebra is gonum's: least squares by Householder QR (LAPACK dgeqrf)
// on the design matrix augmented with the response, so one factorization
// gives the residual sum of squares of every nested order AIC compares;
// Yule–Walker by Cholesky; stationarity by the eigenvalues of the companion
// matrix. The results are checked against Python statsmodels on fixed series
// (statsmodels_test.go): coefficients within 1e-6, forecasts within 1e-3.
//
// A Predictor keeps its buffers between calls, so a loop that forecasts many
// entities every step allocates nothing per entity; it is not safe for
// concurrent use (one per worker).
package forecast
