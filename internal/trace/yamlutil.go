package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// yamlDoc is a YAML file decoded twice: into typed structs with KnownFields,
// so a misspelt field is an error, and into its node tree, which keeps the
// line of every value for the checks that come after decoding.
type yamlDoc struct {
	name string
	root *yaml.Node // the document's top-level value
}

// decodeYAML reads one YAML document from r into v.
func decodeYAML(r io.Reader, name string, v any) (*yamlDoc, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, errorf(name, 0, "", "%v", err)
	}
	var root yaml.Node
	err = safeYAML(func() error {
		dec := yaml.NewDecoder(bytes.NewReader(b))
		dec.KnownFields(true)
		if err := dec.Decode(v); err != nil {
			return err
		}
		var more yaml.Node
		if err := dec.Decode(&more); err != io.EOF {
			if err != nil {
				return err
			}
			return fmt.Errorf("yaml: line %d: a second YAML document; corral reads one per file", more.Line)
		}
		return yaml.Unmarshal(b, &root)
	})
	if err == io.EOF {
		return nil, errorf(name, 0, "", "empty file")
	}
	if err != nil {
		return nil, yamlError(name, err)
	}
	doc := &yamlDoc{name: name, root: &root}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		doc.root = root.Content[0]
	}
	return doc, nil
}

// safeYAML turns a panic inside the YAML library into an error: a reader must
// never crash on its input, whatever the library does with it.
func safeYAML(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: malformed YAML (%v)", r)
		}
	}()
	return f()
}

var (
	yamlLineRE    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknownRE = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	yamlTypeRE    = regexp.MustCompile("^cannot unmarshal (!!\\w+)(?: `(.*)`)? into (\\S+)$")
)

// yamlError rewrites yaml.v3's errors as file:line errors, naming the wanted
// kind of value rather than a Go type.
func yamlError(name string, err error) error {
	msgs := []string{err.Error()}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msgs = te.Errors // report the first; the user fixes them one by one
	}
	msg := strings.TrimPrefix(msgs[0], "yaml: ")
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msgs[0]); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	if m := yamlUnknownRE.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("unknown field %q", m[1])
	} else if m := yamlTypeRE.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("%s is not %s", yamlValueText(m[1], m[2]), goTypeWords(m[3]))
	}
	return errorf(name, line, "", "%s", msg)
}

func yamlValueText(tag, value string) string {
	switch {
	case value != "":
		return strconv.Quote(value)
	case tag == "!!map":
		return "a mapping"
	case tag == "!!seq":
		return "a list"
	}
	return tag
}

// goTypeWords names what a Go type accepts, in the words of the format docs.
func goTypeWords(t string) string {
	switch {
	case strings.HasPrefix(t, "int") || strings.HasPrefix(t, "*int") || strings.HasPrefix(t, "uint"):
		return "an integer (or is out of range)"
	case strings.HasPrefix(t, "float") || strings.HasPrefix(t, "*float"):
		return "a number"
	case t == "bool" || t == "*bool":
		return "true or false"
	case t == "string":
		return "a string"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	}
	return "a mapping"
}

// line returns the line of the value reached by following path from the
// document's top: a string steps into a mapping key, an int into a list item.
// A key's line is its own (so "gpus:" over a nested block points at "gpus");
// when the path breaks off, the line of the deepest node reached.
func (d *yamlDoc) line(path ...any) int {
	n := d.root
	line := n.Line
	for _, p := range path {
		for n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		switch k := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			found := false
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					line = n.Content[i].Line
					n = n.Content[i+1]
					found = true
					break
				}
			}
			if !found {
				return line
			}
		case int:
			if n.Kind != yaml.SequenceNode || k < 0 || k >= len(n.Content) {
				return line
			}
			n = n.Content[k]
			line = n.Line
		}
	}
	return line
}

// errAt builds an error on the field at path.
func (d *yamlDoc) errAt(field string, path []any, format string, args ...any) *Error {
	return errorf(d.name, d.line(path...), field, format, args...)
}
