package forecast

import (
	"math"
	"math/rand/v2"
	"testing"
)

// BenchmarkPredict is the cost per entity per step of the provisioning
// loop (issue goal: ≤ 50 µs, so 10^5 entities fit a one-second step on one
// core): refit on a window of the entity's history and forecast the peak of
// the prediction window.
func BenchmarkPredict(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	series := make([]float64, 4096)
	for i := range series {
		series[i] = 40 + 10*math.Sin(float64(i)/15) + 3*rng.NormFloat64()
	}
	for _, bc := range []struct {
		name string
		cfg  Config
		w    int
	}{
		{"provisioning-default-w128", Config{Method: MethodAR, MaxLag: 32, Quantile: 0.99, Growth: true, FloorAtLast: true, Horizon: 2}, 128},
		{"growth-w128-lag8", Config{Method: MethodAR, MaxLag: 8, Quantile: 0.99, Growth: true, FloorAtLast: true, Horizon: 2}, 128},
		{"growth-w48-lag8", Config{Method: MethodAR, MaxLag: 8, Quantile: 0.99, Growth: true, FloorAtLast: true, Horizon: 2}, 48},
		{"ar-w64-lag8", Config{Method: MethodAR, MaxLag: 8, Horizon: 12}, 64},
		{"ar-w128-lag8", Config{Method: MethodAR, MaxLag: 8, Horizon: 12}, 128},
		{"ar-w32-lag4", Config{Method: MethodAR, MaxLag: 4, Horizon: 6}, 32},
		{"arma21-w128", Config{Method: MethodARMA, P: 2, Q: 1, Horizon: 12}, 128},
		{"ewma-w64", Config{Method: MethodEWMA, Horizon: 12}, 64},
		{"seasonal-w64", Config{Method: MethodSeasonalNaive, Period: 16, Horizon: 12}, 64},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p, err := NewPredictor(bc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				off := i % (len(series) - bc.w)
				if _, err := p.Predict(series[off : off+bc.w]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
