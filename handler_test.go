package dtq_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
)

// classOf reads the error_class an error carries through an ErrorClass method.
func classOf(err error) string {
	var c interface{ ErrorClass() string }
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	return ""
}

func constHandler(v string) dtq.HandlerFunc {
	return func(context.Context, *dtq.Task) (any, error) { return v, nil }
}

func TestServeMuxRoutes(t *testing.T) {
	t.Parallel()
	mux := dtq.NewServeMux()
	mux.Handle("email:send", constHandler("email"))
	mux.HandleFunc("image.resize", constHandler("image"))
	ctx := context.Background()
	cases := []struct{ typ, want string }{
		{"email:send", "email"},
		{"image.resize", "image"},
	}
	for _, c := range cases {
		res, err := mux.ProcessTask(ctx, &dtq.Task{Type: c.typ})
		require.NoError(t, err, c.typ)
		require.Equal(t, c.want, res, c.typ)
		require.NotNil(t, mux.Handler(c.typ), c.typ)
	}
	require.Nil(t, mux.Handler("email"), "no prefix matching")
	require.Equal(t, []string{"email:send", "image.resize"}, mux.Types())
	require.Empty(t, dtq.NewServeMux().Types())
}

func TestServeMuxUnknownType(t *testing.T) {
	t.Parallel()
	mux := dtq.NewServeMux()
	mux.HandleFunc("known", constHandler("ok"))
	res, err := mux.ProcessTask(context.Background(), &dtq.Task{Type: "unknown"})
	require.Nil(t, res)
	require.Error(t, err)
	require.Contains(t, err.Error(), `"unknown"`)
	require.Equal(t, "UnknownTaskType", classOf(err))
	require.False(t, dtq.IsPermanent(err), "retried: a rolling deploy may not have the handler everywhere yet")
}

func TestServeMuxRegistrationPanics(t *testing.T) {
	t.Parallel()
	mux := dtq.NewServeMux()
	mux.HandleFunc("a", constHandler("a"))
	require.PanicsWithValue(t, "dtq: handler for a registered twice", func() { mux.HandleFunc("a", constHandler("b")) })
	require.Panics(t, func() { mux.Handle("", constHandler("x")) })
	require.Panics(t, func() { mux.Handle("b", nil) })
	res, err := mux.ProcessTask(context.Background(), &dtq.Task{Type: "a"})
	require.NoError(t, err)
	require.Equal(t, "a", res, "the first registration stays")
}

func TestServeMuxMiddlewareOrder(t *testing.T) {
	t.Parallel()
	var trace []string
	mw := func(name string) dtq.Middleware {
		return func(next dtq.Handler) dtq.Handler {
			return dtq.HandlerFunc(func(ctx context.Context, task *dtq.Task) (any, error) {
				trace = append(trace, name+">")
				res, err := next.ProcessTask(ctx, task)
				trace = append(trace, "<"+name)
				return res, err
			})
		}
	}
	mux := dtq.NewServeMux()
	mux.Use(mw("outer"), mw("middle"))
	mux.HandleFunc("t", func(context.Context, *dtq.Task) (any, error) {
		trace = append(trace, "handler")
		return nil, nil
	})
	mux.Use(mw("inner")) // applies to handlers registered earlier too
	_, err := mux.ProcessTask(context.Background(), &dtq.Task{Type: "t"})
	require.NoError(t, err)
	require.Equal(t, []string{"outer>", "middle>", "inner>", "handler", "<inner", "<middle", "<outer"}, trace)

	// Handler returns the wrapped handler too.
	trace = nil
	_, err = mux.Handler("t").ProcessTask(context.Background(), &dtq.Task{Type: "t"})
	require.NoError(t, err)
	require.Len(t, trace, 7)

	// Unknown types do not reach middleware.
	trace = nil
	_, err = mux.ProcessTask(context.Background(), &dtq.Task{Type: "other"})
	require.Error(t, err)
	require.Empty(t, trace)
}

func TestTyped(t *testing.T) {
	t.Parallel()
	type payload struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	h := dtq.Typed(func(_ context.Context, task *dtq.Task, p payload) (any, error) {
		return map[string]any{"name": p.Name, "count": p.Count, "attempt": task.Attempt}, nil
	})
	ctx := context.Background()
	res, err := h.ProcessTask(ctx, &dtq.Task{Attempt: 2, Payload: json.RawMessage(`{"name":"a","count":3,"extra":true}`)})
	require.NoError(t, err)
	require.Equal(t, map[string]any{"name": "a", "count": 3, "attempt": 2}, res)

	for _, bad := range []string{`{"count":"three"}`, `[1]`, `{`, `"str"`} {
		res, err := h.ProcessTask(ctx, &dtq.Task{Payload: json.RawMessage(bad)})
		require.Nil(t, res, bad)
		require.True(t, dtq.IsPermanent(err), bad)
		require.Equal(t, "PayloadDecode", classOf(err), bad)
		require.Contains(t, err.Error(), "decode payload", bad)
	}

	// The handler's own errors pass through unchanged.
	errBoom := errors.New("boom")
	h = dtq.Typed(func(context.Context, *dtq.Task, payload) (any, error) { return nil, errBoom })
	_, err = h.ProcessTask(ctx, &dtq.Task{Payload: json.RawMessage(`{}`)})
	require.Equal(t, errBoom, err)
}

func TestErrorMarkers(t *testing.T) {
	t.Parallel()
	errBoom := errors.New("boom")
	require.NoError(t, dtq.Permanent(nil))
	p := dtq.Permanent(errBoom)
	require.True(t, dtq.IsPermanent(p))
	require.ErrorIs(t, p, errBoom)
	require.Equal(t, "boom", p.Error())
	require.False(t, dtq.IsPermanent(errBoom))
	require.False(t, dtq.IsPermanent(nil))
	require.True(t, dtq.IsPermanent(errors.Join(errors.New("other"), p)), "found when wrapped")

	r := dtq.RetryAfter(time.Minute, errBoom)
	require.ErrorIs(t, r, errBoom)
	require.Equal(t, "boom", r.Error())
	require.False(t, dtq.IsPermanent(r))
	require.Error(t, dtq.RetryAfter(time.Second, nil), "a nil error still asks for a retry")
}
