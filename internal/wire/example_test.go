package wire_test

import (
	"errors"
	"fmt"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/wire"
)

func ExampleDecodeSubmission() {
	body := []byte(`{"task_type": "resize_image", "queue": "media", "payload": {"w": 640},
		"priority": 8, "delay_ms": 1500, "idempotency_key": "\"img-7\""}`)
	s, err := wire.DecodeSubmission(body)
	if err != nil {
		panic(err)
	}
	fmt.Println(s.Type, s.Queue, *s.Priority, s.Delay, s.IdempotencyKey)

	_, err = wire.DecodeSubmission([]byte(`{"task_type": "resize_image", "priority": 12}`))
	var ve *dtq.ValidationError
	fmt.Println(errors.As(err, &ve), ve.Field, errors.Is(err, dtq.ErrInvalidTask))

	_, err = wire.DecodeSubmission([]byte(`[1, 2, 3]`))
	fmt.Println(errors.Is(err, wire.ErrInvalidJSON))
	// Output:
	// resize_image media 8 1.5s "img-7"
	// true priority true
	// true
}
