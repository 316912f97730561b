package dtq

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The name checks are hand-written loops for speed; they must accept
// exactly what the contract's regular expressions accept.
func TestNameChecksMatchTheirRegexps(t *testing.T) {
	t.Parallel()
	queueRe := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	typeRe := regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)
	alphabet := "aZ09_-.:{}/ é"
	r := rand.New(rand.NewPCG(1, 2))
	cases := []string{"", "a", "-a", "_a", "a-", strings.Repeat("a", 64), strings.Repeat("a", 65), strings.Repeat("T", 128), strings.Repeat("T", 129)}
	for range 20000 {
		var b strings.Builder
		for range r.IntN(70) {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, c := range cases {
		require.Equal(t, queueRe.MatchString(c), ValidQueueName(c), "queue %q", c)
		require.Equal(t, typeRe.MatchString(c), validName(c, 128), "type %q", c)
	}
}
