package jsonscan

// Depth returns the deepest nesting of objects and arrays in raw.
func Depth(raw []byte) int {
	depth, deepest, inStr, esc := 0, 0, false, false
	for _, c := range raw {
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}
