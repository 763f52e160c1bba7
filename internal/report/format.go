package report

import (
	"fmt"
	"math"
	"strconv"
)

// none marks a figure no run recorded.
const none = "–"

// fixed renders a mean with the given decimals, and "± sd" when asked and
// more than one run recorded it.
func fixed(st stat, decimals int, withSD bool) string {
	if st.N == 0 || !finite(st.Mean) {
		return none
	}
	s := strconv.FormatFloat(st.Mean, 'f', decimals, 64)
	if withSD && st.N > 1 {
		s += " ± " + strconv.FormatFloat(st.SD, 'f', decimals, 64)
	}
	return s
}

// share renders a fraction in [0, 1] as a percentage.
func share(st stat) string {
	st.Mean *= 100
	return fixed(st, 1, false)
}

// count renders a mean of counts: whole numbers stay whole, a mean over
// seeds that falls between two counts gets one decimal.
func count(st stat) string {
	if st.N == 0 || !finite(st.Mean) {
		return none
	}
	if st.Mean == math.Trunc(st.Mean) {
		return strconv.FormatFloat(st.Mean, 'f', 0, 64)
	}
	return strconv.FormatFloat(st.Mean, 'f', 1, 64)
}

// duration renders a mean number of seconds the way people read waits.
func duration(st stat) string {
	if st.N == 0 {
		return none
	}
	return humanDuration(st.Mean)
}

// humanDuration renders seconds with two units at most: 0.4s, 45s, 12m05s,
// 1h02m, 3d04h. It rounds to the shown precision first, so 3599.6 s is
// "1h00m", not "59m60s".
func humanDuration(sec float64) string {
	switch {
	case math.IsNaN(sec) || math.IsInf(sec, 0) || sec < 0:
		return none
	case sec == 0:
		return "0s"
	case sec < 0.05:
		return "<0.1s"
	case sec < 9.95 && sec != math.Trunc(sec):
		return strconv.FormatFloat(sec, 'f', 1, 64) + "s"
	}
	s := int64(math.Round(sec))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	m := (s + 30) / 60 // whole minutes from here on
	if m < 24*60 {
		return fmt.Sprintf("%dh%02dm", m/60, m%60)
	}
	h := (m + 30) / 60
	return fmt.Sprintf("%dd%02dh", h/24, h%24)
}
