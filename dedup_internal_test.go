package dtq

import (
	"encoding/json"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCanonicalNumber: one text per exact decimal value, every digit kept.
func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.0", "0"}, {"0e7", "0"}, {"-0.000E-3", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1e0", "1"}, {"1E0", "1"}, {"1e+0", "1"}, {"10e-1", "1"}, {"0.1e1", "1"}, {"100e-2", "1"},
		{"42", "42"}, {"-42", "-42"}, {"4.2e1", "42"}, {"420e-1", "42"},
		{"100", "100"}, {"1e2", "100"}, {"1.5", "1.5"}, {"15e-1", "1.5"}, {"-1.50", "-1.5"},
		{"0.001", "0.001"}, {"1e-3", "0.001"}, {"0.000001", "0.000001"}, {"1e-7", "1e-7"}, {"0.00000012", "1.2e-7"},
		{"9007199254740993", "9007199254740993"}, {"9007199254740992", "9007199254740992"},
		{"123456789012345678901", "123456789012345678901"}, {"1e21", "1e+21"}, {"1000000000000000000000", "1e+21"},
		{"12345678901234567890123", "1.2345678901234567890123e+22"},
		{"1e400", "1e+400"}, {"-2.5E-400", "-2.5e-400"},
		{"1e99999999999999999999999", "1e+99999999999999999999999"}, {"10e99999999999999999999999", "1e+100000000000000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got := canonicalNumber(tt.in)
			require.Equal(t, tt.want, got)
			require.True(t, json.Valid([]byte(got)), "%s is JSON", got)
			if !strings.Contains(tt.in, "e9999") { // big.Float's exponent is an int32
				// the same exact value
				a, _, err := big.ParseFloat(tt.in, 10, 2000, big.ToNearestEven)
				require.NoError(t, err)
				b, _, err := big.ParseFloat(got, 10, 2000, big.ToNearestEven)
				require.NoError(t, err)
				require.Zero(t, a.Cmp(b))
			}
		})
	}
}

// TestDedupKeyByCanonical: numbers written differently make one key, big
// integers stay exact, and object members are sorted, in the value of a
// path at any depth.
func TestDedupKeyByCanonical(t *testing.T) {
	t.Parallel()
	key := func(payload string) string {
		k, err := dedupKeyBy([]string{"payload.v"}, "t", []byte(payload))
		require.NoError(t, err)
		return k
	}
	require.Equal(t, `by:payload.v=1`, key(`{"v":1}`))
	for _, p := range []string{`{"v":1.0}`, `{"v":1e0}`, `{"v":10E-1}`, `{"v":0.1e1}`} {
		require.Equal(t, key(`{"v":1}`), key(p), p)
	}
	require.NotEqual(t, key(`{"v":1}`), key(`{"v":"1"}`), "a string is not the number")
	require.NotEqual(t, key(`{"v":9007199254740993}`), key(`{"v":9007199254740992}`), "no rounding to float64")
	require.Equal(t, `by:payload.v={"a":[1.5,0],"b":2}`, key(`{"v":{"b":2.00,"a":[15e-1,-0]}}`))
	long := key(`{"v":1e` + strings.Repeat("9", 300) + `}`)
	require.Regexp(t, `^by:[0-9a-f]{64}$`, long)
	require.NotEqual(t, long, key(`{"v":1e`+strings.Repeat("9", 299)+`8}`))
}
