"""Reference fits and forecasts from statsmodels for statsmodels_test.go.

Reads {"cases": [...]} as JSON on stdin and writes one result per case as
JSON on stdout. Each case names a series "y", a kind and its orders:
  ar        AutoReg(y, lags=p, trend="c")
  arselect  ar_select_order(y, maxlag, ic="aic", trend="c"), then its model
  arma      hannan_rissanen(y, p, q, demean=True); forecasts by a Kalman
            filter of ARIMA(y - mean, (p,0,q), trend="n") at those params
  ewma      SimpleExpSmoothing(y, known initial level y[0]) at alpha
and the horizon "h" and the interval level "level" (upper quantile).
"""
import json
import sys
import warnings

import numpy as np
from scipy.stats import norm
from statsmodels.tsa.ar_model import AutoReg, ar_select_order
from statsmodels.tsa.arima.estimators.hannan_rissanen import hannan_rissanen
from statsmodels.tsa.arima.model import ARIMA
from statsmodels.tsa.holtwinters import SimpleExpSmoothing

warnings.simplefilter("ignore")


def upper(pred, q):
    # conf_int(alpha) is two-sided: its upper bound is the (1 - alpha/2) quantile.
    return pred.conf_int(alpha=2 * (1 - q))[:, 1].tolist()


def run(c):
    y = np.asarray(c["y"], dtype=float)
    h, q = c["h"], c["level"]
    n = len(y)
    if c["kind"] in ("ar", "arselect"):
        if c["kind"] == "ar":
            res = AutoReg(y, lags=c["p"], trend="c").fit()
        else:
            sel = ar_select_order(y, c["maxlag"], ic="aic", trend="c")
            res = sel.model.fit()
        pred = res.get_prediction(start=n, end=n + h - 1)
        p = res.model.ar_lags
        return {
            "order": 0 if p is None else len(p),
            "const": float(res.params[0]),
            "coef": [float(v) for v in res.params[1:]],
            "sigma2": float(res.sigma2),
            "forecast": pred.predicted_mean.tolist(),
            "upper": upper(pred, q),
        }
    if c["kind"] == "arma":
        params, other = hannan_rissanen(y, ar_order=c["p"], ma_order=c["q"], demean=True)
        out = {
            "ar": params.ar_params.tolist(),
            "ma": params.ma_params.tolist(),
            "sigma2": float(params.sigma2),
            "initial_ar_order": int(other.initial_ar_order),
            "stable": bool(params.is_stationary and params.is_invertible),
        }
        if not out["stable"]:
            # A Kalman filter forecast of an explosive model means nothing.
            return out
        mu = y.mean()
        mod = ARIMA(y - mu, order=(c["p"], 0, c["q"]), trend="n")
        res = mod.filter(np.r_[params.ar_params, params.ma_params, params.sigma2])
        fc = res.get_forecast(h)
        out["forecast"] = (fc.predicted_mean + mu).tolist()
        out["upper"] = (np.asarray(upper(fc, q)) + mu).tolist()
        return out
    if c["kind"] == "ewma":
        mod = SimpleExpSmoothing(y, initialization_method="known", initial_level=y[0])
        res = mod.fit(smoothing_level=c["alpha"], optimized=False)
        return {"forecast": res.forecast(h).tolist(), "level": float(res.level[-1])}
    raise ValueError("unknown kind " + c["kind"])


cases = json.load(sys.stdin)["cases"]
json.dump([run(c) for c in cases], sys.stdout)
