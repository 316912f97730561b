package rdb

import "fmt"

// The decoders below read a script's reply as go-redis hands it over
// (int64, string, []any) into the type its header's Returns: line names;
// scripts_gen.go calls them. A reply of another shape is an error, never a
// zero value.

// replyInt reads an integer reply.
func replyInt(v any) (int64, error) {
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("want an integer, got %s", replyKind(v))
	}
	return n, nil
}

// replyString reads a bulk string or status reply.
func replyString(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string, got %s", replyKind(v))
	}
	return s, nil
}

// replyInts reads an array of integers.
func replyInts(v any) ([]int64, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array, got %s", replyKind(v))
	}
	out := make([]int64, len(a))
	for i, x := range a {
		n, err := replyInt(x)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i+1, err)
		}
		out[i] = n
	}
	return out, nil
}

// replyTuple reads an array of least to most elements (most < 0: no
// upper bound).
func replyTuple(v any, least, most int) ([]any, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array, got %s", replyKind(v))
	}
	if len(a) < least || (most >= 0 && len(a) > most) {
		if most < 0 {
			return nil, fmt.Errorf("want %d elements or more, got %d", least, len(a))
		}
		return nil, fmt.Errorf("want %d..%d elements, got %d", least, most, len(a))
	}
	return a, nil
}

// replyKind names the kind of a reply value for an error.
func replyKind(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case int64:
		return "an integer"
	case string:
		return "a string"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("%T", v)
}

// replyStrings reads an array of strings.
func replyStrings(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("want an array, got %s", replyKind(v))
	}
	out := make([]string, len(a))
	for i, x := range a {
		s, err := replyString(x)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i+1, err)
		}
		out[i] = s
	}
	return out, nil
}
