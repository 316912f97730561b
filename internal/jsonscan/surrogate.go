package jsonscan

import "bytes"

// LoneSurrogate returns where in the JSON text raw a \u escape of a UTF-16
// surrogate that is not part of a high-low pair starts, or -1. Decoding
// turns every such escape into U+FFFD, so payloads differing only there
// would share an idempotency fingerprint; they are refused instead.
func LoneSurrogate(raw []byte) int {
	for i := bytes.IndexByte(raw, '\\'); i >= 0 && i+1 < len(raw); {
		if raw[i+1] != 'u' {
			i += 2 // a two-byte escape, such as \\ itself
		} else {
			r, ok := hex4(raw, i+2)
			switch {
			case !ok:
				return -1 // not JSON; the decoder reports it
			case r >= 0xdc00 && r <= 0xdfff:
				return i
			case r >= 0xd800 && r <= 0xdbff:
				lo, ok := hex4(raw, i+8)
				if i+7 >= len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' || !ok || lo < 0xdc00 || lo > 0xdfff {
					return i
				}
				i += 12
			default:
				i += 6
			}
		}
		j := bytes.IndexByte(raw[min(i, len(raw)):], '\\')
		if j < 0 {
			return -1
		}
		i += j
	}
	return -1
}

// hex4 reads the four hex digits at b[i:i+4].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
