package rdb

import "strconv"

// packer writes the values of a packed tail (a header's "packed" entry)
// into one script argument: each value as its length, a colon and its
// bytes, one after the other. However many values a call carries, it sends
// one argument for them, as some proxies refuse a command of more than
// 3,999 arguments (docs/compatibility.md); packed_argv in lua/_util.lua
// reads them back, byte for byte.
type packer struct{ b []byte }

func (p *packer) add(s string) {
	p.b = strconv.AppendInt(p.b, int64(len(s)), 10)
	p.b = append(p.b, ':')
	p.b = append(p.b, s...)
}

func (p *packer) addBytes(v []byte) {
	p.b = strconv.AppendInt(p.b, int64(len(v)), 10)
	p.b = append(p.b, ':')
	p.b = append(p.b, v...)
}

func (p *packer) addInt(n int64) { p.add(strconv.FormatInt(n, 10)) }

func (p *packer) addFloat(f float64) { p.add(strconv.FormatFloat(f, 'f', -1, 64)) }

// String is the packed argument.
func (p *packer) String() string { return string(p.b) }
