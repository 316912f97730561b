package dtqtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestNewTaskDefaults(t *testing.T) {
	t.Parallel()
	before := time.Now()
	task := dtqtest.NewTask("resize", map[string]any{"w": 10})
	require.Equal(t, "resize", task.Type)
	require.JSONEq(t, `{"w":10}`, string(task.Payload))
	require.Equal(t, "default", task.Queue)
	require.Equal(t, 1, task.Attempt)
	require.Equal(t, 5, task.MaxAttempts)
	require.Regexp(t, `^[0-9a-f]{32}$`, task.ID)
	require.Empty(t, task.IdempotencyKey)
	require.JSONEq(t, `{}`, string(task.Metadata))
	require.False(t, task.CreatedAt.Before(before.Truncate(time.Second)))
	require.WithinDuration(t, before.Add(dtqtest.DefaultTimeout), task.Deadline, 5*time.Second)
	require.NotEqual(t, task.ID, dtqtest.NewTask("resize", nil).ID)
}

func TestNewTaskPayloads(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		payload any
		want    string
	}{
		{"nil", nil, `{}`},
		{"null map", map[string]int(nil), `{}`},
		{"raw", json.RawMessage(`{"a":[1,2]}`), `{"a":[1,2]}`},
		{"bytes", []byte(`{"b":true}`), `{"b":true}`},
		{"struct", struct {
			N int `json:"n"`
		}{7}, `{"n":7}`},
	}
	for _, c := range cases {
		require.JSONEq(t, c.want, string(dtqtest.NewTask("x", c.payload).Payload), c.name)
	}
	require.Panics(t, func() { dtqtest.NewTask("x", json.RawMessage(`{`)) })
	require.Panics(t, func() { dtqtest.NewTask("x", map[string]any{"f": func() {}}) })
}

func TestNewTaskOptions(t *testing.T) {
	t.Parallel()
	d := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	task := dtqtest.NewTask("x", nil, dtqtest.Attempt(3), dtqtest.MaxAttempts(4), dtqtest.ID("abc"),
		dtqtest.Queue("emails"), dtqtest.IdempotencyKey("order-1"), dtqtest.Deadline(d))
	require.Equal(t, 3, task.Attempt)
	require.Equal(t, 4, task.MaxAttempts)
	require.Equal(t, "abc", task.ID)
	require.Equal(t, "emails", task.Queue)
	require.Equal(t, "order-1", task.IdempotencyKey)
	require.Equal(t, d, task.Deadline)
}

type thumb struct {
	URL string `json:"url"`
}

func TestRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	errBoom := errors.New("boom")
	mux := dtq.NewServeMux()
	mux.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) {
		return map[string]int{"attempt": task.Attempt}, nil
	})
	mux.HandleFunc("nil", func(context.Context, *dtq.Task) (any, error) { return nil, nil })
	mux.HandleFunc("raw", func(context.Context, *dtq.Task) (any, error) { return json.RawMessage(`[1,2]`), nil })
	mux.HandleFunc("bad_raw", func(context.Context, *dtq.Task) (any, error) { return []byte(`{nope`), nil })
	mux.HandleFunc("fail", func(context.Context, *dtq.Task) (any, error) { return "ignored", errBoom })
	mux.HandleFunc("perm", func(context.Context, *dtq.Task) (any, error) { return nil, dtq.Permanent(errBoom) })
	mux.HandleFunc("panic", func(context.Context, *dtq.Task) (any, error) { panic("oh no") })
	mux.Handle("typed", dtq.Typed(func(_ context.Context, _ *dtq.Task, p thumb) (any, error) {
		return thumb{URL: p.URL + "?thumb"}, nil
	}))

	res, err := dtqtest.Run(ctx, mux, dtqtest.NewTask("ok", nil, dtqtest.Attempt(2)))
	require.NoError(t, err)
	require.JSONEq(t, `{"attempt":2}`, string(res))

	res, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("nil", nil))
	require.NoError(t, err)
	require.Nil(t, res)

	res, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("raw", nil))
	require.NoError(t, err)
	require.JSONEq(t, `[1,2]`, string(res))

	_, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("bad_raw", nil))
	require.ErrorContains(t, err, "not valid JSON")

	res, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("fail", nil))
	require.ErrorIs(t, err, errBoom)
	require.Nil(t, res)
	require.False(t, dtqtest.IsPermanent(err))

	_, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("perm", nil))
	require.ErrorIs(t, err, errBoom)
	require.True(t, dtqtest.IsPermanent(err))

	_, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("panic", nil))
	require.ErrorContains(t, err, "panic: oh no")
	require.True(t, dtqtest.IsPermanent(err))

	res, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("typed", thumb{URL: "https://x/a.png"}))
	require.NoError(t, err)
	require.JSONEq(t, `{"url":"https://x/a.png?thumb"}`, string(res))
	_, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("typed", json.RawMessage(`{"url":7}`)))
	require.True(t, dtqtest.IsPermanent(err), "a payload that does not decode is permanent")

	_, err = dtqtest.Run(ctx, mux, dtqtest.NewTask("nobody", nil))
	require.Error(t, err)
	require.False(t, dtqtest.IsPermanent(err), "an unknown type is retried")

	_, err = dtqtest.Run(ctx, nil, dtqtest.NewTask("x", nil))
	require.Error(t, err)
}

func TestRunCancelsAtDeadline(t *testing.T) {
	t.Parallel()
	h := dtq.HandlerFunc(func(ctx context.Context, _ *dtq.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, err := dtqtest.Run(context.Background(), h, dtqtest.NewTask("x", nil, dtqtest.Deadline(time.Now().Add(10*time.Millisecond))))
	require.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = dtqtest.Run(ctx, h, dtqtest.NewTask("x", nil, dtqtest.Deadline(time.Time{})))
	require.ErrorIs(t, err, context.Canceled)
}
