package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// errDecimal is the one message for every malformed Decimal, so that the
// file's author learns what to write rather than how strconv failed.
var errDecimal = errors.New(`want a decimal number such as 2 or "2.5"`)

// UnmarshalJSON takes a JSON string or a bare JSON number, keeping the
// number's text as written; null leaves the value unset. Whether the text
// is a number is Float's to say, so that Validate reports it by path.
func (d *Decimal) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*d = Decimal(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("%w, got %s", errDecimal, b)
	}
	*d = Decimal(n)
	return nil
}

// Float is the number d writes; unset ("") is 0. Only plain decimal
// notation with an optional exponent is accepted: strconv.ParseFloat alone
// would also take "NaN", "Inf" and hexadecimal, none of which a factor in
// a configuration file should be.
func (d Decimal) Float() (float64, error) {
	s := strings.TrimSpace(string(d))
	if s == "" {
		return 0, nil
	}
	if strings.Trim(s, "0123456789+-.eE") != "" {
		return 0, errDecimal
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errDecimal
	}
	return f, nil
}
