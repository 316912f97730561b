package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/httpapi"
)

// httpSubmit measures POST /api/v1/tasks through a real listener with
// keep-alive connections from the same process.
func httpSubmit(ctx context.Context, rc *redis.Client, n, conns int) result {
	c := newClient(rc)
	d := open(rc, nil)
	adm, _ := d.NewAdmin(&dtq.AdminConfig{Client: c})
	gateway, _ := d.NewWorkerGateway(nil)
	api, err := httpapi.New(httpapi.Config{Client: c, Inspector: d.Inspector(), Admin: adm, WorkerGateway: gateway})
	if err != nil {
		panic(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	srv := &http.Server{Handler: api}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/api/v1/tasks"
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	client := &http.Client{Transport: tr}
	body := []byte(`{"task_type":"noop","payload":{"data":"` + string(bytes.Repeat([]byte("x"), 80)) + `"}}`)
	post := func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		res, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusAccepted {
			panic(fmt.Sprint("status ", res.StatusCode))
		}
	}
	post() // register the queue, warm the connection
	before := readStats(ctx, rc)
	var next atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				post()
			}
		})
	}
	wg.Wait()
	el := time.Since(start)
	after := readStats(ctx, rc)
	r := result{Tasks: int64(n), Seconds: el.Seconds(), PerSecond: float64(n) / el.Seconds(),
		Note: fmt.Sprintf("%d keep-alive connections, load generator in the same process", conns)}
	charge(&r, before, after, int64(n))
	return r
}
