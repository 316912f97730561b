package wire_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/wire"
)

func TestCheckIdempotencyKey(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		header  string
		message string // "" when the header is accepted
	}{
		{"order-42", ""},
		{`"order-42"`, ""},
		{`"say \"hi\""`, ""},
		{"", "must be 1..255 characters"},
		{"tab\tkey", "must be printable ASCII (0x20..0x7e)"},
		{`"a"b"`, "is not a valid quoted string"},
	} {
		err := wire.CheckIdempotencyKey(c.header)
		if c.message == "" {
			require.NoError(t, err, "%q", c.header)
			continue
		}
		var ve *dtq.ValidationError
		require.ErrorAs(t, err, &ve, "%q", c.header)
		require.Equal(t, "idempotency_key", ve.Field)
		require.Equal(t, c.message, ve.Message)
		require.ErrorIs(t, err, dtq.ErrInvalidTask)
	}
}
