package dtq_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-io/dtq"
)

func ExampleSubmission_UnmarshalJSON() {
	body := []byte(`{"task_type": "resize_image", "queue": "media", "payload": {"w": 640},
		"priority": 8, "delay_ms": 1500, "idempotency_key": "\"img-7\""}`)
	var s dtq.Submission
	if err := json.Unmarshal(body, &s); err != nil {
		panic(err)
	}
	fmt.Println(s.Type, s.Queue, *s.Priority, s.Delay, s.IdempotencyKey)

	err := json.Unmarshal([]byte(`{"task_type": "resize_image", "priority": 12}`), &s)
	var ve *dtq.ValidationError
	fmt.Println(errors.As(err, &ve), ve.Field, errors.Is(err, dtq.ErrInvalidTask))

	err = s.UnmarshalJSON([]byte(`[1, 2, 3]`))
	fmt.Println(errors.Is(err, dtq.ErrInvalidJSON))
	// Output:
	// resize_image media 8 1.5s "img-7"
	// true priority true
	// true
}

func ExampleSubmission_MarshalJSON() {
	b, err := json.Marshal(dtq.Submission{Type: "send_receipt", Queue: "emails",
		Payload: map[string]any{"order": 42}, Delay: 90 * time.Second,
		Dedup: &dtq.Dedup{Key: "order-42", Mode: dtq.DedupDrop}})
	if err != nil {
		panic(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"task_type":"send_receipt","queue":"emails","payload":{"order":42},"delay_ms":90000,"dedup":{"key":"order-42","mode":"drop"}}
}
