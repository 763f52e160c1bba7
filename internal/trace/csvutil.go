package trace

import (
	"encoding/csv"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// csvFile reads a CSV file with a header row and knows, for each field of the
// current record, its column name and line.
type csvFile struct {
	name string
	r    *csv.Reader
	head []string       // column names in file order
	col  map[string]int // column name -> index
	rec  []string
}

// openCSV reads the header and checks it against the known columns: every
// required column must be there, no column may be unknown or repeated.
func openCSV(rd io.Reader, name string, required, optional []string) (*csvFile, error) {
	r := csv.NewReader(rd)
	r.ReuseRecord = false
	head, err := r.Read()
	if err == io.EOF {
		return nil, errorf(name, 0, "", "empty file: want a header row")
	}
	if err != nil {
		return nil, csvError(name, err)
	}
	f := &csvFile{name: name, r: r, col: map[string]int{}}
	known := map[string]bool{}
	for _, c := range required {
		known[c] = true
	}
	for _, c := range optional {
		known[c] = true
	}
	for i, c := range head {
		c = strings.TrimSpace(c)
		if i == 0 {
			c = strings.TrimPrefix(c, "\ufeff") // spreadsheet exports start with a BOM
		}
		line, _ := r.FieldPos(i)
		if !known[c] {
			return nil, errorf(name, line, "", "unknown column %q (known: %s)", c, strings.Join(append(append([]string{}, required...), optional...), ","))
		}
		if _, dup := f.col[c]; dup {
			return nil, errorf(name, line, "", "column %q appears twice", c)
		}
		f.col[c] = i
		f.head = append(f.head, c)
	}
	for _, c := range required {
		if _, ok := f.col[c]; !ok {
			line, _ := r.FieldPos(0)
			return nil, errorf(name, line, "", "missing column %q", c)
		}
	}
	return f, nil
}

// next reads the next record; it returns false at the end of the file.
func (f *csvFile) next() (bool, error) {
	rec, err := f.r.Read()
	if err == io.EOF {
		return false, nil
	}
	var pe *csv.ParseError
	if errors.As(err, &pe) && errors.Is(pe.Err, csv.ErrFieldCount) {
		return false, errorf(f.name, pe.Line, "", "%d fields where the header has %d", len(rec), len(f.head))
	}
	if err != nil {
		return false, csvError(f.name, err)
	}
	f.rec = rec
	return true, nil
}

// line is the line the current record starts on.
func (f *csvFile) line() int {
	l, _ := f.r.FieldPos(0)
	return l
}

// has reports whether the file has a column.
func (f *csvFile) has(col string) bool {
	_, ok := f.col[col]
	return ok
}

// str returns the trimmed value of a column, "" when the file lacks it.
func (f *csvFile) str(col string) string {
	i, ok := f.col[col]
	if !ok {
		return ""
	}
	return strings.TrimSpace(f.rec[i])
}

// errAt builds an error on a column of the current record, at the line the
// field is on (a quoted field may span lines).
func (f *csvFile) errAt(col, format string, args ...any) *Error {
	line := f.line()
	if i, ok := f.col[col]; ok {
		line, _ = f.r.FieldPos(i)
	}
	return errorf(f.name, line, col, format, args...)
}

// int64 parses a non-negative integer column; an empty value gives def.
func (f *csvFile) int64(col string, def int64) (int64, error) {
	s := f.str(col)
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, f.errAt(col, "malformed integer %q", s)
	}
	if v < 0 {
		return 0, f.errAt(col, "negative value %d", v)
	}
	return v, nil
}

// intMax parses a non-negative integer column no larger than max.
func (f *csvFile) intMax(col string, def int64, max int64) (int, error) {
	v, err := f.int64(col, def)
	if err != nil {
		return 0, err
	}
	if v > max {
		return 0, f.errAt(col, "%d is above the limit of %d", v, max)
	}
	return int(v), nil
}

// seconds parses a non-negative time in seconds (decimals allowed); an empty
// value gives 0 and ok=false.
func (f *csvFile) seconds(col string) (d time.Duration, ok bool, err error) {
	s := f.str(col)
	if s == "" {
		return 0, false, nil
	}
	d, err = parseSeconds(s)
	if err != nil {
		return 0, false, f.errAt(col, "%v", err)
	}
	return d, true, nil
}

// parseSeconds turns "12" or "1.5" into a duration, refusing values the
// simulation clock could not hold.
func parseSeconds(s string) (time.Duration, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, errors.New("malformed number " + strconv.Quote(s))
	}
	return secondsDuration(v)
}

func secondsDuration(v float64) (time.Duration, error) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, errors.New("not a finite number of seconds")
	case v < 0:
		return 0, errors.New("negative time " + strconv.FormatFloat(v, 'g', -1, 64))
	case v > float64(defaultLimits.seconds):
		return 0, errors.New("time " + strconv.FormatFloat(v, 'g', -1, 64) + "s is above the limit of " + strconv.FormatInt(defaultLimits.seconds, 10) + "s")
	}
	// Round to the microsecond so that decimal inputs such as 0.1 come back
	// exactly when written out again.
	return time.Duration(math.Round(v*1e6)) * time.Microsecond, nil
}

// csvError turns encoding/csv's errors into file:line errors.
func csvError(name string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return errorf(name, pe.Line, "", "%v", pe.Err)
	}
	return errorf(name, 0, "", "%v", err)
}
