package dtqtest_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtest"
)

type resizePayload struct {
	Width int `json:"width"`
}

// resize is the handler under test: it refuses a width no retry can fix.
func resize(_ context.Context, t *dtq.Task, p resizePayload) (any, error) {
	if p.Width <= 0 {
		return nil, dtq.Permanent(errors.New("width must be positive"))
	}
	return map[string]any{"width": p.Width, "attempt": t.Attempt}, nil
}

func Example() {
	h := dtq.Typed(resize)
	ctx := context.Background()

	res, err := dtqtest.Run(ctx, h, dtqtest.NewTask("resize", map[string]int{"width": 640}, dtqtest.Attempt(2)))
	fmt.Println(string(res), err)

	_, err = dtqtest.Run(ctx, h, dtqtest.NewTask("resize", map[string]int{"width": 0}))
	fmt.Println(err, dtqtest.IsPermanent(err))

	_, err = dtqtest.Run(ctx, h, dtqtest.NewTask("resize", map[string]string{"width": "wide"}))
	fmt.Println(dtqtest.IsPermanent(err))
	// Output:
	// {"attempt":2,"width":640} <nil>
	// width must be positive true
	// true
}
