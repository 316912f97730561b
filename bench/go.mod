// bench measures the HTTP API in process (http.go), so its path sits under
// cmd/dtq: Go lets only code whose import path starts with
// github.com/dtq-io/dtq/cmd/dtq import cmd/dtq/internal/httpapi. Nothing
// fetches bench by path; make bench runs it from this directory.
module github.com/dtq-io/dtq/cmd/dtq/bench

go 1.26.8

require (
	github.com/dtq-io/dtq v0.0.0
	github.com/dtq-io/dtq/cmd/dtq v0.0.0
	github.com/dtq-io/dtq/dtqoutbox v0.0.0
	github.com/hibiken/asynq v0.26.0
	github.com/jackc/pgx/v5 v5.13.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dtq-io/dtq/dtqprom v0.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	github.com/jackc/puddle/v2 v2.2.3 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

// bench always measures the code of this checkout.
replace (
	github.com/dtq-io/dtq => ../
	github.com/dtq-io/dtq/cmd/dtq => ../cmd/dtq
	github.com/dtq-io/dtq/dtqotel => ../dtqotel
	github.com/dtq-io/dtq/dtqoutbox => ../dtqoutbox
	github.com/dtq-io/dtq/dtqprom => ../dtqprom
)
